//! `memoria route` end to end: three `memoria serve` hosts behind the router on 127.0.0.1.
//! Requests sharing a prefix meet on one host (the `x-memoria-backend` header says which) while
//! different prefixes spread; when that host dies they go to another and still succeed; auth
//! headers pass through; an SSE stream through the router is the host's stream; and the
//! official `openai` Python client works against the router.

mod events;
mod events_cluster;
mod events_disk;
mod events_resync;
mod events_tiers;
mod router;

use std::collections::BTreeSet;
use std::process::Command;

use serde_json::{Value, json};

use crate::serve::client::{Resp, get, post, request};
use crate::serve::server::{Server, model};
use router::Router;

fn hosts(name: &str, args: &[&str]) -> Vec<Server> {
    let m = model();
    let mut full = vec!["-m", m.as_str()];
    full.extend_from_slice(args);
    (0..3)
        .map(|i| Server::start(&format!("{name}-{i}"), &full))
        .collect()
}

fn backend(r: &Resp) -> String {
    r.header("x-memoria-backend")
        .unwrap_or_else(|| panic!("no x-memoria-backend: {} {}", r.status, r.text()))
        .to_string()
}

/// A chat request whose system prompt (many blocks long) is `prefix`.
fn chat(prefix: &str, question: &str) -> Value {
    json!({"messages": [{"role": "system", "content": prefix},
                        {"role": "user", "content": question}],
           "max_tokens": 4, "temperature": 0})
}

/// Polls `cond` 50 ms apart, up to `tries` times.
fn eventually(tries: usize, mut cond: impl FnMut() -> bool) -> bool {
    (0..tries).any(|_| {
        let ok = cond();
        if !ok {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        ok
    })
}

#[test]
fn route_shared_prefixes_meet_on_one_host_and_move_when_it_dies() {
    let keys = [
        "--api-key",
        "route-user-key",
        "--admin-key",
        "route-admin-key",
    ];
    let mut servers = hosts("route-prefix", &keys);
    let refs: Vec<&Server> = servers.iter().collect();
    // The default load scale: the router does not count its own finished requests as load
    // (`others_load`), so sequential requests see equal loads and plain rendezvous decides.
    let r = Router::start("route-prefix", &refs, &["--stats-key", "route-admin-key"]);
    let auth = [("Authorization", "Bearer route-user-key")];
    let prefix = "Lily and Tim went to the park to play with a big red ball. ".repeat(4);

    let unauthorized = post(r.addr, "/v1/chat/completions", &chat(&prefix, "Hi"), &[]);
    assert_eq!(unauthorized.status, 401, "{}", unauthorized.text());

    let mut chosen = BTreeSet::new();
    for q in [
        "What happened?",
        "Who was there?",
        "Was it fun?",
        "Why red?",
    ] {
        let resp = post(r.addr, "/v1/chat/completions", &chat(&prefix, q), &auth);
        assert_eq!(resp.status, 200, "{}\nrouter: {}", resp.text(), r.stderr());
        assert_eq!(resp.header("x-memoria-prefix-blocks"), Some("1"));
        chosen.insert(backend(&resp));
        assert!(resp.json()["usage"]["prompt_tokens"].as_u64() > Some(16));
    }
    assert_eq!(
        chosen.len(),
        1,
        "one prefix went to several hosts: {chosen:?}"
    );
    let home = chosen.into_iter().next().expect("a backend");
    let last = post(
        r.addr,
        "/v1/chat/completions",
        &chat(&prefix, "And then?"),
        &auth,
    );
    let cached = last.json()["usage"]["prompt_tokens_details"]["cached_tokens"].as_u64();
    assert!(
        cached > Some(16),
        "the shared prefix was not cached: {}",
        last.text()
    );

    // Completions, so the first block is the text's own (a chat's starts with the template).
    let spread: BTreeSet<String> = (0..12)
        .map(|i| {
            let p = format!("{i} dogs found a bone in the garden and then they ran away.");
            let body = json!({"prompt": p, "max_tokens": 2});
            let resp = post(r.addr, "/v1/completions", &body, &auth);
            assert_eq!(resp.header("x-memoria-prefix-blocks"), Some("1"));
            assert_eq!(resp.status, 200, "{}", resp.text());
            backend(&resp)
        })
        .collect();
    assert!(spread.len() >= 2, "12 prefixes all went to {spread:?}");
    // 18 requests (the refused one included), one after another: the router keeps its
    // connections to the hosts.
    let m = get(r.addr, "/metrics", &[]).text();
    let sum = |name: &str| -> u64 {
        m.lines()
            .filter(|l| l.starts_with(name))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    };
    let connects = sum("memoria_route_upstream_connects_total{");
    let reuses = sum("memoria_route_upstream_reuses_total{");
    eprintln!("route: 18 sequential requests, {connects} connections opened, {reuses} reused");
    assert!(
        reuses >= 8 && connects <= 9 && connects + reuses >= 18,
        "18 sequential requests: {connects} connections opened, {reuses} reused\n{m}"
    );

    let dead = servers
        .iter()
        .position(|s| format!("http://{}", s.addr) == home)
        .expect("the chosen backend is one of the hosts");
    drop(servers.remove(dead));
    let mut moved = BTreeSet::new();
    for q in ["After the host died?", "Still there?", "Once more"] {
        let resp = post(r.addr, "/v1/chat/completions", &chat(&prefix, q), &auth);
        assert_eq!(resp.status, 200, "{}\nrouter: {}", resp.text(), r.stderr());
        moved.insert(backend(&resp));
    }
    assert_eq!(moved.len(), 1, "{moved:?}");
    assert!(
        !moved.contains(&home),
        "still routed to the dead host {home}"
    );
    let gauge = format!("memoria_route_backend_up{{backend=\"{home}\"}} 0");
    assert!(
        eventually(100, || get(r.addr, "/metrics", &[]).text().contains(&gauge)),
        "{}",
        get(r.addr, "/metrics", &[]).text()
    );
    let metrics = get(r.addr, "/metrics", &[]).text();
    for s in &servers {
        let line = format!(
            "memoria_route_backend_up{{backend=\"http://{}\"}} 1",
            s.addr
        );
        assert!(metrics.contains(&line), "{metrics}");
    }
    assert!(
        metrics.contains("memoria_route_requests_total{backend="),
        "{metrics}"
    );
    crate::serve::promtool_check("route-metrics", &metrics);
    let health = get(r.addr, "/health", &[]);
    assert_eq!(health.status, 200);
    assert_eq!(health.json()["backends_up"], 2, "{}", health.text());
}

/// The `data:` events of an SSE body with what differs per response (`id`, `created`, the
/// llama-server `timings`) removed.
fn events(body: &str) -> Vec<Value> {
    body.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| match serde_json::from_str::<Value>(d) {
            Ok(mut v) => {
                if let Some(o) = v.as_object_mut() {
                    o.remove("id");
                    o.remove("created");
                    o.remove("timings");
                }
                v
            }
            Err(_) => Value::String(d.to_string()),
        })
        .collect()
}

#[test]
fn route_sse_streams_pass_through_unchanged() {
    let servers = hosts("route-sse", &[]);
    let refs: Vec<&Server> = servers.iter().collect();
    let r = Router::start("route-sse", &refs, &[]);
    let body = json!({"prompt": "Once upon a time there was a little girl named Lily who loved",
                      "max_tokens": 24, "temperature": 0, "stream": true,
                      "stream_options": {"include_usage": true}});
    let via = post(r.addr, "/v1/completions", &body, &[]);
    assert_eq!(via.status, 200, "{}", via.text());
    assert_eq!(via.header("content-type"), Some("text/event-stream"));
    let home = backend(&via);
    let host = servers
        .iter()
        .find(|s| format!("http://{}", s.addr) == home)
        .expect("the chosen host");
    let direct = post(host.addr, "/v1/completions", &body, &[]);
    assert_eq!(direct.status, 200, "{}", direct.text());
    let (a, b) = (events(&via.text()), events(&direct.text()));
    assert!(a.len() > 3, "{}", via.text());
    assert_eq!(a.last(), Some(&Value::String("[DONE]".into())));
    // The usage chunk differs only in cached tokens (the second request hit the cache).
    let strip = |v: &[Value]| -> Vec<Value> {
        v.iter()
            .map(|e| {
                let mut e = e.clone();
                if let Some(u) = e.get_mut("usage") {
                    u["prompt_tokens_details"] = Value::Null;
                }
                e
            })
            .collect()
    };
    assert_eq!(
        strip(&a),
        strip(&b),
        "via router:\n{}\ndirect:\n{}",
        via.text(),
        direct.text()
    );
    let chat = json!({"messages": [{"role": "user", "content": "Tell me a story"}],
                      "max_tokens": 8, "stream": true, "temperature": 0});
    let streamed = post(r.addr, "/v1/chat/completions", &chat, &[]);
    assert_eq!(streamed.status, 200);
    assert!(
        streamed.text().trim_end().ends_with("data: [DONE]"),
        "{}",
        streamed.text()
    );
    let none = request(r.addr, "GET", "/v1/models", &[], b"");
    assert_eq!(none.status, 200, "{}", none.text());
    assert_eq!(none.header("x-memoria-prefix-blocks"), Some("0"));
}

#[test]
fn route_openai_python_client() {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let servers = hosts("route-python", &[]);
    let refs: Vec<&Server> = servers.iter().collect();
    let r = Router::start("route-python", &refs, &[]);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/python/openai_client.py");
    let out = Command::new(&python)
        .arg(script)
        .arg(format!("http://{}", r.addr))
        .output()
        .unwrap_or_else(|e| panic!("run {python} (pip install openai): {e}"));
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("ok"),
        "openai client through the router failed:\nstdout: {}\nstderr: {}\nrouter: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        r.stderr()
    );
}
