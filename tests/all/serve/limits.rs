//! HTTP reproductions over raw TCP on 127.0.0.1, with small configured limits so
//! every wait is bounded: a slow body is cut (408) within `body_timeout_s` plus what its bytes
//! earn; connections past `max_connections` get an OpenAI-format 503 at once; a malformed later
//! request on a keep-alive connection, two Content-Length headers and an oversized header on a
//! second request get OpenAI-format 400/431 (never hyper's bare 400); a stalled later head is
//! closed after `header_timeout_s`.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::client::get;
use super::eventually;
use super::server::{Server, model, temp_dir};

/// A server with 1 s body and 2 s header timeouts and at most 4 connections.
fn server(name: &str) -> Server {
    let cfg = temp_dir(name).join("host.toml");
    std::fs::write(
        &cfg,
        "[server]\nheader_timeout_s = 2\nbody_timeout_s = 1\nmin_body_bytes_per_s = 1024\nmax_connections = 4\n",
    )
    .expect("config");
    Server::start(
        name,
        &["-m", &model(), "--config", cfg.to_str().expect("utf-8")],
    )
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    s.set_nodelay(true).expect("nodelay");
    s
}

/// Reads one response (head and Content-Length body) from `s`: status and body.
fn read_response(s: &mut TcpStream) -> (u16, Vec<u8>) {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        match s.read(&mut byte) {
            Ok(1) => buf.push(byte[0]),
            Ok(_) => panic!(
                "connection closed mid-head: {:?}",
                String::from_utf8_lossy(&buf)
            ),
            Err(e) => panic!("reading a response head: {e}"),
        }
    }
    let head = String::from_utf8_lossy(&buf).into_owned();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("bad status line: {head:?}"));
    let len: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0);
    let mut body = vec![0; len];
    s.read_exact(&mut body).expect("body");
    (status, body)
}

fn assert_openai(status: u16, body: &[u8], want: u16, what: &str) -> Value {
    assert_eq!(
        status,
        want,
        "{what}: body {}",
        String::from_utf8_lossy(body)
    );
    let v: Value = serde_json::from_slice(body).unwrap_or_else(|e| {
        panic!(
            "{what}: not JSON ({e}): {:?}",
            String::from_utf8_lossy(body)
        )
    });
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty())
            && v["error"]["type"].is_string(),
        "{what}: not an OpenAI error: {v}"
    );
    v
}

const HEALTH: &[u8] = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n";

#[test]
fn serve_a_slow_body_is_never_timed_out() {
    let s = server("slow-body");
    let mut c = connect(s.addr);
    c.write_all(
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n",
    )
    .expect("head");
    c.set_read_timeout(Some(Duration::from_secs(1)))
        .expect("timeout");
    let started = Instant::now();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    // 1 byte per second; the server must answer or close within 1 s + 1000/1024 s (+ slack).
    'outer: while started.elapsed() < Duration::from_secs(8) {
        let _ = c.write_all(b"{");
        loop {
            match c.read(&mut buf) {
                Ok(0) => break 'outer,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => break,
                Err(_) => break 'outer,
            }
        }
    }
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(5),
        "a 1 byte/s body was held {took:?} (limit 1 s + 1 s per 1024 bytes)"
    );
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 408"), "expected a 408: {text:?}");
    let body = text.split("\r\n\r\n").nth(1).unwrap_or("");
    let v: Value = serde_json::from_str(body).expect("408 body is JSON");
    assert_eq!(v["error"]["code"], "request_timeout", "{v}");
    // A normal body on a new connection still works.
    assert_eq!(get(s.addr, "/health", &[]).status, 200);
}

#[test]
fn serve_no_connection_cap() {
    let s = server("conn-cap");
    let held: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut c = connect(s.addr);
            c.write_all(HEALTH).expect("request");
            let (status, _) = read_response(&mut c);
            assert_eq!(status, 200);
            c
        })
        .collect();
    let started = Instant::now();
    let mut extra = connect(s.addr);
    let (status, body) = read_response(&mut extra);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "refusal took {:?}",
        started.elapsed()
    );
    let v = assert_openai(status, &body, 503, "over max_connections");
    assert_eq!(v["error"]["code"], "too_many_connections", "{v}");
    drop(held);
    assert!(
        eventually(100, || {
            let mut c = connect(s.addr);
            c.write_all(HEALTH).is_ok() && read_response(&mut c).0 == 200
        }),
        "slots were not released when connections closed"
    );
}

#[test]
fn serve_refusals_that_are_not_in_openai_format() {
    let s = server("refusals");
    // A malformed second request on a keep-alive connection.
    let mut c = connect(s.addr);
    c.write_all(HEALTH).expect("first");
    assert_eq!(read_response(&mut c).0, 200);
    c.write_all(b"GET /health HTTP/1.1\r\nBad Header: x\r\n\r\n")
        .expect("second");
    let (status, body) = read_response(&mut c);
    assert_openai(status, &body, 400, "malformed second request");

    // Two different Content-Length headers: first and second request of a connection.
    let two = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 5\r\n\r\n{}";
    let mut c = connect(s.addr);
    c.write_all(two).expect("two lengths");
    let (status, body) = read_response(&mut c);
    let v = assert_openai(status, &body, 400, "two Content-Length headers");
    assert!(v.to_string().contains("Content-Length"), "{v}");
    let mut c = connect(s.addr);
    c.write_all(HEALTH).expect("first");
    assert_eq!(read_response(&mut c).0, 200);
    c.write_all(two).expect("two lengths, second request");
    let (status, body) = read_response(&mut c);
    assert_openai(
        status,
        &body,
        400,
        "two Content-Length headers, second request",
    );

    // Content-Length next to Transfer-Encoding (request smuggling).
    let mut c = connect(s.addr);
    c.write_all(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
        .expect("smuggle");
    let (status, body) = read_response(&mut c);
    assert_openai(status, &body, 400, "Content-Length with Transfer-Encoding");

    // A 100 KB header is refused on the second request as on the first.
    let big = format!(
        "GET /health HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
        "a".repeat(100 << 10)
    );
    for first in [true, false] {
        let mut c = connect(s.addr);
        if !first {
            c.write_all(HEALTH).expect("first");
            assert_eq!(read_response(&mut c).0, 200);
        }
        let _ = c.write_all(big.as_bytes());
        let (status, body) = read_response(&mut c);
        assert_openai(status, &body, 431, &format!("100 KB header, first={first}"));
    }

    // A chunked body, then a good second request on the same connection.
    let mut c = connect(s.addr);
    c.write_all(b"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n7\r\n{\"conte\r\nd\r\nnt\": \"hello\"}\r\n0\r\n\r\n")
        .expect("chunked");
    let (status, body) = read_response(&mut c);
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    c.write_all(HEALTH).expect("after chunked");
    assert_eq!(read_response(&mut c).0, 200);
}

#[test]
fn serve_a_stalled_later_head_is_closed() {
    let s = server("stalled-head");
    let mut c = connect(s.addr);
    c.write_all(HEALTH).expect("first");
    assert_eq!(read_response(&mut c).0, 200);
    c.write_all(b"GET /hea").expect("partial head");
    let started = Instant::now();
    let mut rest = Vec::new();
    let _ = c.read_to_end(&mut rest);
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(5),
        "a stalled second head was held {took:?} (header_timeout_s = 2)"
    );
    assert!(
        took >= Duration::from_millis(1500),
        "closed too early: {took:?}"
    );
}

#[test]
fn serve_back_to_back_connections_fit_one_connection_slot() {
    let name = "conn-one";
    let cfg = temp_dir(name).join("host.toml");
    std::fs::write(&cfg, "[server]\nmax_connections = 1\n").expect("config");
    let s = Server::start(
        name,
        &["-m", &model(), "--config", cfg.to_str().expect("utf-8")],
    );
    // Each request on its own connection, the previous one closed by the client just before:
    // the ending connection's slot is the next one's, not a 503.
    for i in 0..20 {
        let mut c = connect(s.addr);
        c.write_all(HEALTH).expect("request");
        let (status, body) = read_response(&mut c);
        assert_eq!(
            status,
            200,
            "request {i}: {}",
            String::from_utf8_lossy(&body)
        );
        drop(c);
    }
}

#[test]
fn serve_pipelined_valid_request_is_answered_before_a_malformed_one() {
    let s = server("pipelined");
    // A valid request whose answer the engine computes, then a malformed one, in one write.
    let body = br#"{"content": "hello world"}"#;
    let mut both = format!(
        "POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    both.extend_from_slice(body);
    both.extend_from_slice(b"GET /health HTTP/1.1\r\nBad Header: x\r\n\r\n");
    for _ in 0..3 {
        let mut c = connect(s.addr);
        c.write_all(&both).expect("pipelined");
        let (status, first) = read_response(&mut c);
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&first));
        let v: Value = serde_json::from_slice(&first).expect("tokens");
        assert!(v["tokens"].as_array().is_some_and(|t| !t.is_empty()), "{v}");
        let (status, second) = read_response(&mut c);
        assert_openai(status, &second, 400, "the malformed request after it");
    }
    // Two valid ones pipelined, then a malformed one: all three answered in order.
    let mut three = HEALTH.to_vec();
    three.extend_from_slice(HEALTH);
    three.extend_from_slice(b"NOT HTTP\r\n\r\n");
    let mut c = connect(s.addr);
    c.write_all(&three).expect("pipelined");
    assert_eq!(read_response(&mut c).0, 200);
    assert_eq!(read_response(&mut c).0, 200);
    let (status, body) = read_response(&mut c);
    assert_openai(status, &body, 400, "malformed third");
}

/// Resident anonymous bytes of process `pid` (`/proc/PID/status` `RssAnon`): the heap and
/// stacks, where request bodies live. The binary's code pages a first request faults in are
/// file-backed and left out: they never go away and would read as bytes kept.
fn rss(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("RssAnon:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(0, |k| k * 1024)
}

#[test]
fn serve_stalled_request_bodies_stay_within_the_body_memory_budget() {
    const BODY: usize = (4 << 20) - 1;
    const CONNECTIONS: usize = 200;
    let name = "body-budget";
    let cfg = temp_dir(name).join("host.toml");
    std::fs::write(
        &cfg,
        "[server]\nmax_body_memory_mb = 8\nmax_component_bytes = 4194304\nbody_timeout_s = 60\nmax_connections = 256\n",
    )
    .expect("config");
    let s = Server::start(
        name,
        &["-m", &model(), "--config", cfg.to_str().expect("utf-8")],
    );
    let pid = s.child.id();
    // Settled first: the answers below allocate what they always will.
    assert_eq!(get(s.addr, "/stats", &[]).status, 200);
    std::thread::sleep(Duration::from_millis(300));
    let before = rss(pid);
    // Each connection declares a body just under the 4 MiB limit and, unless refused, sends all
    // of it but the last byte and stalls: at most two fit the 8 MiB budget.
    let head = format!(
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {BODY}\r\n\r\n"
    );
    let filler = vec![b' '; BODY - 1];
    let mut open = Vec::new();
    let mut refused = 0;
    for _ in 0..CONNECTIONS {
        let mut c = connect(s.addr);
        c.write_all(head.as_bytes()).expect("head");
        // A refused body is answered at its head, before any of it is read.
        c.set_read_timeout(Some(Duration::from_secs(2)))
            .expect("timeout");
        let mut peek = [0u8; 1];
        match c.peek(&mut peek) {
            Ok(n) if n > 0 => {
                c.set_read_timeout(Some(Duration::from_secs(10)))
                    .expect("timeout");
                let (status, body) = read_response(&mut c);
                let v = assert_openai(status, &body, 503, "a body past the budget");
                assert_eq!(v["error"]["code"], "body_memory_exhausted", "{v}");
                refused += 1;
            }
            _ => {
                c.write_all(&filler).expect("the body but its last byte");
                open.push(c);
            }
        }
    }
    let during = rss(pid);
    assert!(open.len() <= 2, "{} bodies held at once", open.len());
    assert_eq!(refused + open.len(), CONNECTIONS);
    // The budget and what connections hold beside it (kernel socket buffers are not RSS).
    let grown = during.saturating_sub(before);
    assert!(
        grown < 40 << 20,
        "RSS grew by {} MiB with {} stalled bodies (budget 8 MiB)",
        grown >> 20,
        open.len()
    );
    let stats = get(s.addr, "/stats", &[]);
    let v: Value = serde_json::from_slice(&stats.body).expect("stats");
    assert_eq!(v["memory"]["budgets"]["request_bodies"], 8 << 20, "{v}");
    drop(open);
    assert!(
        eventually(100, || {
            let v: Value =
                serde_json::from_slice(&get(s.addr, "/stats", &[]).body).unwrap_or_default();
            v["memory"]["used"]["request_bodies"] == 0
        }),
        "closed connections give their body bytes back"
    );
    // Each body was received into its own mapping, unmapped when the connection closed: one
    // body kept (4 MiB) would exceed this.
    assert!(
        eventually(100, || rss(pid) <= before + before / 10),
        "RSS {} MiB after the bodies ended, {} MiB before",
        rss(pid) >> 20,
        before >> 20
    );
    assert_eq!(get(s.addr, "/health", &[]).status, 200);
}
