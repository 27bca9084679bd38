//! misbehave: a guest that breaks the rules on purpose, one way per path, for the containment
//! tests: `/loop` spins forever, `/bomb` allocates without end, `/trap` panics, `/overflow`
//! recurses until the stack runs out, `/oversize?bytes=N` passes an N-byte string to a host
//! call, `/restore?name=X` tries to open a saved session, `/save?name=X` saves one,
//! `/stats` reports the namespace's cache counters, `/embed` embeds two texts, anything else answers `ok`.

use std::hint::black_box;

use memoria_guest::http::{self, IncomingRequest, ResponseOutparam};
use memoria_guest::{Session, cache, models};

struct Misbehave;

fn query<'a>(path: &'a str, key: &str) -> Option<&'a str> {
    let q = path.split_once('?')?.1;
    q.split('&')
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
}

/// Recurses through a function pointer so no frame can be merged or turned into a loop; the
/// frames live on wasm's own stack (nothing here takes an address), which runs out first.
#[inline(never)]
fn recurse(n: u64) -> u64 {
    if n == u64::MAX {
        return 0;
    }
    let next: fn(u64) -> u64 = black_box(recurse);
    next(n + 1).wrapping_mul(3) ^ n
}

impl http::Handler for Misbehave {
    fn handle(req: IncomingRequest, out: ResponseOutparam) {
        let path = http::path(&req);
        let route = path
            .split('?')
            .next()
            .unwrap_or("")
            .rsplit('/')
            .next()
            .unwrap_or("");
        match route {
            "loop" => {
                let mut i = 0u64;
                loop {
                    i = black_box(i.wrapping_add(1));
                }
            }
            "bomb" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(black_box(vec![1u8; 1 << 20]));
                }
            }
            "trap" => panic!("this guest panics on purpose"),
            "overflow" => {
                let n = recurse(0);
                http::respond(out, 200, "text/plain", n.to_string().as_bytes());
            }
            "oversize" => {
                let n: usize = query(&path, "bytes")
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(1 << 21);
                let big = "a".repeat(n);
                let answer = match models::tokenize(&big, false) {
                    Ok(t) => format!("accepted {} tokens", t.len()),
                    Err(e) => format!("refused: {e}"),
                };
                http::respond(out, 200, "text/plain", answer.as_bytes());
            }
            "restore" => {
                let name = query(&path, "name").unwrap_or("x");
                let answer = match Session::restore(name) {
                    Ok(s) => format!("restored {} tokens", s.len().unwrap_or(0)),
                    Err(e) => format!("refused: {e}"),
                };
                http::respond(out, 200, "text/plain", answer.as_bytes());
            }
            "save" => {
                let name = query(&path, "name").unwrap_or("x");
                let r = Session::new().and_then(|s| {
                    s.append("a secret that belongs to one namespace")?;
                    s.save(name)
                });
                let answer = match r {
                    Ok(()) => "saved".to_string(),
                    Err(e) => format!("refused: {e}"),
                };
                http::respond(out, 200, "text/plain", answer.as_bytes());
            }
            "embed" => {
                let texts = ["a happy dog".to_string(), "a sad cat".to_string()];
                let answer = match memoria_guest::embed(&texts) {
                    Ok(v) => format!("count={} dims={}", v.len(), v.first().map_or(0, Vec::len)),
                    Err(e) => format!("refused: {e}"),
                };
                http::respond(out, 200, "text/plain", answer.as_bytes());
            }
            "stats" => {
                let s = cache::stats();
                let body = format!("hit_tokens={} miss_tokens={}", s.hit_tokens, s.miss_tokens);
                http::respond(out, 200, "text/plain", body.as_bytes());
            }
            _ => http::respond(out, 200, "text/plain", b"ok"),
        }
    }
}

http::export!(Misbehave);
