//! hostcalls: runs a program of host calls that the request body spells (hex), for the host's
//! host-call fuzzing: every `memoria:llm` function with argument values taken from the program
//! (lengths up to megabytes, token ids past the vocabulary, NaN and infinite sampling values,
//! huge counts and durations), sessions and streams opened, forked, used after others were
//! dropped, and handle numbers forged from the program (a type-confused or stale handle must
//! trap the guest, never touch the host). Answers one line per call: `ok ...` or `err ...`.

use std::fmt::Write;

use memoria_guest::http::{self, IncomingRequest, ResponseOutparam};
use memoria_guest::raw::session::{GenerateParams, GenerationStream, Sampling, Session};
use memoria_guest::raw::{cache, embeddings, log, models};

struct HostCalls;

/// The program's bytes, read from the front; zeros once exhausted.
struct Prog {
    bytes: Vec<u8>,
    at: usize,
}

impl Prog {
    fn done(&self) -> bool {
        self.at >= self.bytes.len()
    }
    fn u8(&mut self) -> u8 {
        let b = self.bytes.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        b
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    fn u64(&mut self) -> u64 {
        u64::from(self.u32()) | (u64::from(self.u32()) << 32)
    }
    /// A length: mostly small, sometimes past a megabyte.
    fn len(&mut self) -> usize {
        let n = usize::from(self.u16());
        match self.u8() % 8 {
            0 => n.saturating_mul(16),
            1 => n % 4,
            _ => n % 512,
        }
    }
    /// A float that is sometimes NaN, infinite, negative or huge.
    fn f32(&mut self) -> f32 {
        match self.u8() % 8 {
            0 => f32::NAN,
            1 => f32::INFINITY,
            2 => f32::NEG_INFINITY,
            3 => -(f32::from(self.u16())),
            4 => f32::MAX,
            _ => f32::from(self.u8()) / 64.0,
        }
    }
    /// Text of `len()` characters, ASCII or not.
    fn text(&mut self) -> String {
        let n = self.len();
        let c = match self.u8() % 4 {
            0 => 'é',
            1 => '\u{1F600}',
            2 => '\0',
            _ => 'a',
        };
        std::iter::repeat_n(c, n).collect()
    }
    fn tokens(&mut self) -> Vec<u32> {
        let n = self.len();
        let shape = self.u8();
        (0..n)
            .map(|i| match shape % 4 {
                0 => u32::MAX - i as u32,
                1 => (i as u32).wrapping_mul(7919),
                _ => (i as u32) % 200,
            })
            .collect()
    }
    fn params(&mut self) -> GenerateParams {
        let sampling = (self.u8() % 2 == 0).then(|| Sampling {
            temperature: self.f32(),
            top_k: self.u32(),
            top_p: self.f32(),
            min_p: self.f32(),
            repeat_penalty: self.f32(),
            seed: self.u64(),
        });
        let stops = usize::from(self.u8() % 6);
        GenerateParams {
            max_tokens: match self.u8() % 4 {
                0 => u32::MAX,
                1 => 0,
                _ => u32::from(self.u8() % 8),
            },
            sampling,
            stop: (0..stops).map(|_| self.text()).collect(),
        }
    }
}

fn hex(s: &[u8]) -> Vec<u8> {
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    s.chunks(2)
        .filter_map(|p| Some(digit(*p.first()?)? << 4 | digit(*p.get(1)?)?))
        .collect()
}

fn outcome<T, E: std::fmt::Debug>(out: &mut String, what: &str, r: Result<T, E>) -> Option<T> {
    match r {
        Ok(v) => {
            let _ = writeln!(out, "ok {what}");
            Some(v)
        }
        Err(e) => {
            let _ = writeln!(out, "err {what}: {e:?}");
            None
        }
    }
}

/// Runs the program; returns its report.
fn run(mut p: Prog) -> String {
    let mut out = String::new();
    let mut sessions: Vec<Option<Session>> = Vec::new();
    let mut streams: Vec<Option<GenerationStream>> = Vec::new();
    let mut ops = 0;
    while !p.done() && ops < 48 {
        ops += 1;
        let op = p.u8() % 20;
        let pick = usize::from(p.u8());
        let s = match sessions.len() {
            0 => None,
            n => sessions[pick % n].as_ref(),
        };
        match (op, s) {
            (0, _) | (1..=8, None) => {
                let s = outcome(&mut out, "open", Session::open());
                sessions.push(s);
            }
            (1, Some(s)) => {
                let t = p.text();
                outcome(&mut out, "append-text", s.append_text(&t));
            }
            (2, Some(s)) => {
                let t = p.tokens();
                outcome(&mut out, "append-tokens", s.append_tokens(&t));
            }
            (3, Some(s)) => {
                let params = p.params();
                outcome(&mut out, "generate", s.generate(&params));
            }
            (4, Some(s)) => {
                let params = p.params();
                let st = outcome(&mut out, "stream", s.stream(&params));
                streams.push(st);
            }
            (5, Some(s)) => {
                let f = outcome(&mut out, "fork", s.fork());
                sessions.push(f);
            }
            (6, Some(s)) => {
                let n = p.u32();
                outcome(&mut out, "truncate", s.truncate(n));
            }
            (7, Some(s)) => {
                outcome(&mut out, "len", s.len());
                outcome(&mut out, "tokens", s.tokens());
            }
            (8, Some(s)) => {
                let name = p.text();
                outcome(&mut out, "save", s.save(&name));
            }
            (9, _) => {
                let i = pick % sessions.len().max(1);
                if let Some(slot) = sessions.get_mut(i) {
                    *slot = None;
                    out.push_str("ok drop session\n");
                }
            }
            (10, _) => {
                let n = streams.len().max(1);
                if let Some(Some(st)) = streams.get(pick % n) {
                    for _ in 0..(p.u8() % 8) {
                        outcome(&mut out, "next", st.next());
                    }
                }
            }
            (11, _) => {
                let n = streams.len().max(1);
                if let Some(slot) = streams.get_mut(pick % n) {
                    *slot = None;
                    out.push_str("ok drop stream\n");
                }
            }
            (12, _) => {
                let name = p.text();
                let r = outcome(&mut out, "restore", Session::restore(&name));
                sessions.push(r);
            }
            (13, _) => {
                let t = p.text();
                let special = p.u8() % 2 == 0;
                outcome(&mut out, "tokenize", models::tokenize(&t, special));
                let ids = p.tokens();
                outcome(&mut out, "detokenize", models::detokenize(&ids));
            }
            (14, _) => {
                let n = p.len() % 64;
                let msgs: Vec<models::Message> = (0..n)
                    .map(|_| models::Message {
                        role: p.text(),
                        content: p.text(),
                    })
                    .collect();
                let add = p.u8() % 2 == 0;
                outcome(
                    &mut out,
                    "apply-chat-template",
                    models::apply_chat_template(&msgs, add),
                );
            }
            (15, _) => {
                let n = p.len() % 600;
                let texts: Vec<String> = (0..n).map(|_| p.text()).collect();
                outcome(&mut out, "embed", embeddings::embed(&texts));
            }
            (16, _) => {
                let t = p.tokens();
                let ttl = (p.u8() % 2 == 0).then(|| p.u64());
                let priority = (p.u8() % 2 == 0).then(|| p.u32() as i32);
                outcome(&mut out, "warm", cache::warm(&t, ttl, priority));
                let _ = cache::stats();
            }
            (17, _) => {
                let level = match p.u8() % 4 {
                    0 => log::Level::Debug,
                    1 => log::Level::Info,
                    2 => log::Level::Warn,
                    _ => log::Level::Error,
                };
                let m = p.text();
                log::log(level, &m);
                out.push_str("ok log\n");
            }
            (18, _) => {
                let _ = models::list_models();
                out.push_str("ok list-models\n");
            }
            _ => {
                // A forged handle: a small number, so it may name a live session, a stream
                // (another resource type), a dropped one or nothing. The host must trap the
                // guest (or answer for a live session of this very store), never misbehave.
                let h = p.u32() % 8;
                let _ = writeln!(out, "forge {h}");
                // SAFETY: deliberately unsound from the guest's side; the host checks handles.
                let forged = unsafe { Session::from_handle(h) };
                outcome(&mut out, "forged len", forged.len());
                // Not dropped: its handle may belong to a value still held above.
                std::mem::forget(forged);
            }
        }
    }
    out
}

impl http::Handler for HostCalls {
    fn handle(req: IncomingRequest, out: ResponseOutparam) {
        let body = http::read_body(&req).unwrap_or_default();
        let report = run(Prog {
            bytes: hex(&body),
            at: 0,
        });
        http::respond(out, 200, "text/plain", report.as_bytes());
    }
}

http::export!(HostCalls);
