//! `/cors-proxy`: off without `--ui-mcp-proxy` (403), and with it: the API key required on a
//! keyed host, only the `x-llama-server-proxy-header-*` headers forwarded (never the client's
//! own `Authorization`, key or cookies), the upstream's status (a bodiless 204 too), headers and
//! body passed back, and non-http(s) URLs refused.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::mpsc;

use serde_json::json;

use super::client::{get, request};
use super::server::{Server, model};

/// A one-request upstream on 127.0.0.1: answers `status` with `body` and sends the request's
/// head lines (lower-cased) on the channel.
fn upstream(status: &'static str, body: &'static str) -> (u16, mpsc::Receiver<Vec<String>>) {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind upstream");
    let port = l.local_addr().expect("addr").port();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let (s, _) = l.accept().expect("accept");
        let mut r = BufReader::new(s.try_clone().expect("clone"));
        let mut head = Vec::new();
        let mut length = 0usize;
        loop {
            let mut line = String::new();
            r.read_line(&mut line).expect("head line");
            let line = line.trim_end().to_ascii_lowercase();
            if line.is_empty() {
                break;
            }
            if let Some(n) = line.strip_prefix("content-length:") {
                length = n.trim().parse().expect("length");
            }
            head.push(line);
        }
        let mut payload = vec![0; length];
        std::io::Read::read_exact(&mut r, &mut payload).expect("body");
        let mut s = s;
        let extra = if body.is_empty() {
            String::new()
        } else {
            format!("Content-Length: {}\r\n", body.len())
        };
        write!(
            s,
            "HTTP/1.1 {status}\r\nX-Upstream: yes\r\nSet-Cookie: a=b\r\nConnection: close\r\n{extra}\r\n{body}"
        )
        .expect("answer");
        tx.send(head).expect("send head");
    });
    (port, rx)
}

#[test]
fn serve_cors_proxy_off_by_default() {
    let m = model();
    let s = Server::start("cors-proxy-off", &["-m", &m, "-c", "64"]);
    let r = get(s.addr, "/cors-proxy?url=http://127.0.0.1:1/", &[]);
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(
        r.json()["error"]["type"],
        "feature_disabled",
        "{}",
        r.text()
    );
    assert_eq!(
        get(s.addr, "/props", &[]).json()["cors_proxy_enabled"],
        false
    );
}

#[test]
fn serve_cors_proxy_forwards_only_explicit_headers_and_needs_the_key() {
    let m = model();
    let key = "proxy-test-key-0123456789";
    let s = Server::start(
        "cors-proxy-on",
        &["-m", &m, "-c", "64", "--ui-mcp-proxy", "--api-key", key],
    );
    assert_eq!(
        get(
            s.addr,
            "/props",
            &[("Authorization", &format!("Bearer {key}"))]
        )
        .json()["cors_proxy_enabled"],
        true
    );
    // Without the key: refused before anything is fetched.
    let r = get(s.addr, "/cors-proxy?url=http://127.0.0.1:1/", &[]);
    assert_eq!(r.status, 401, "{}", r.text());
    let bearer = format!("Bearer {key}");
    let (port, head) = upstream("200 OK", "hello");
    let r = get(
        s.addr,
        &format!("/cors-proxy?url=http://127.0.0.1:{port}/capture%3Fa%3D1"),
        &[
            ("Authorization", &bearer),
            ("X-Api-Key", key),
            ("Cookie", "session=secret"),
            ("Proxy-Authorization", "Basic secret"),
            ("x-llama-server-proxy-header-accept", "application/json"),
            (
                "x-llama-server-proxy-header-authorization",
                "Bearer explicit",
            ),
        ],
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.text(), "hello");
    assert_eq!(r.header("x-upstream"), Some("yes"));
    assert_eq!(r.header("set-cookie"), None);
    let head = head.recv().expect("upstream saw the request");
    assert_eq!(head[0], "get /capture?a=1 http/1.1", "{head:?}");
    assert!(
        head.contains(&"accept: application/json".to_string()),
        "{head:?}"
    );
    assert!(
        head.contains(&"authorization: bearer explicit".to_string()),
        "{head:?}"
    );
    for h in &head {
        assert!(
            !h.starts_with("cookie") && !h.starts_with("x-api-key") && !h.starts_with("proxy-"),
            "forwarded {h}: {head:?}"
        );
    }
    // A bodiless 204 to a POST comes back as it is.
    let (port, head) = upstream("204 No Content", "");
    let r = request(
        s.addr,
        "POST",
        &format!("/cors-proxy?url=http://127.0.0.1:{port}/"),
        &[
            ("Authorization", &bearer),
            ("Content-Type", "application/json"),
        ],
        json!({}).to_string().as_bytes(),
    );
    assert_eq!(r.status, 204, "{}", r.text());
    assert!(r.body.is_empty());
    assert!(head.recv().expect("upstream saw the POST")[0].starts_with("post / "));
    // Only http and https; an unreachable target is a 502.
    for url in [
        "file:///etc/passwd",
        "ftp://127.0.0.1/",
        "http://u:p@127.0.0.1/",
    ] {
        let r = get(
            s.addr,
            &format!("/cors-proxy?url={url}"),
            &[("Authorization", &bearer)],
        );
        assert_eq!(r.status, 400, "{url}: {}", r.text());
    }
    let dead = TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let r = get(
        s.addr,
        &format!("/cors-proxy?url=http://127.0.0.1:{dead}/"),
        &[("Authorization", &bearer)],
    );
    assert_eq!(r.status, 502, "{}", r.text());
}
