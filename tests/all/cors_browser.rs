//! CORS in a real browser: headless Chromium loads a page served from another origin (a tiny
//! HTTP server of the test's own on another port) whose script calls `/v1/chat/completions` of
//! a running `memoria serve`, as a web front-end would: on a keyed host, without the key the
//! browser lets the page read the 401, with the key the answer; on an open host the answer. The
//! page writes what it read into its DOM, which Chromium dumps.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;

use crate::serve::server::{Server, model, temp_dir};
use crate::status_page::browse;

const KEY: &str = "browser-test-key-1";

/// The page: three calls (no key, a wrong key, the key) to `target`, their statuses and the
/// answer's first choice written into `#out`'s attributes.
fn page(target: &str) -> String {
    format!(
        r#"<!doctype html><html><body><pre id="out" data-done="0">waiting</pre><script>
const url = "{target}/v1/chat/completions";
const body = JSON.stringify({{messages: [{{role: "user", content: "Once upon a time"}}], max_tokens: 4}});
async function call(key) {{
  const headers = {{"Content-Type": "application/json"}};
  if (key) headers["Authorization"] = "Bearer " + key;
  try {{
    const r = await fetch(url, {{method: "POST", headers, body}});
    const j = await r.json();
    return [r.status, j.choices ? "answer" : (j.error ? "error" : "other")];
  }} catch (e) {{
    return [0, "blocked"];
  }}
}}
(async () => {{
  const out = document.getElementById("out");
  const [a, b, c] = [await call(""), await call("wrong-key-123"), await call("{KEY}")];
  out.setAttribute("data-nokey", a.join(":"));
  out.setAttribute("data-wrongkey", b.join(":"));
  out.setAttribute("data-key", c.join(":"));
  out.setAttribute("data-done", "1");
  out.textContent = "done";
}})();
</script></body></html>"#
    )
}

/// Serves `html` at any path on 127.0.0.1 (another origin than the server's) until the test
/// ends; returns its origin.
fn serve_page(html: String) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the page server");
    let addr = listener.local_addr().expect("address");
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            let mut r = BufReader::new(s.try_clone().expect("clone"));
            let mut line = String::new();
            while r.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            let resp = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{html}",
                html.len()
            );
            let _ = s.write_all(resp.as_bytes());
        }
    });
    format!("http://127.0.0.1:{}", addr.port())
}

fn attr(dom: &str, name: &str) -> String {
    let key = format!(" {name}=\"");
    let at = dom
        .find(&key)
        .unwrap_or_else(|| panic!("no {name} in the page:\n{dom}"));
    let v = &dom[at + key.len()..];
    v[..v.find('"').expect("attribute end")].to_string()
}

#[test]
fn cors_a_page_from_another_origin_calls_chat_in_chromium() {
    let m = model();
    let keyed = Server::start(
        "cors-browser-keyed",
        &["-m", &m, "-c", "256", "--api-key", KEY],
    );
    let open = Server::start("cors-browser-open", &["-m", &m, "-c", "256"]);
    let dir = temp_dir("cors-browser");
    // The server is addressed as `localhost`, the page as 127.0.0.1: two origins.
    for (s, nokey, key) in [
        (&keyed, "401:error", "200:answer"),
        (&open, "200:answer", "200:answer"),
    ] {
        let origin = serve_page(page(&format!("http://localhost:{}", s.addr.port())));
        let profile = dir.join(format!("profile-{}", s.addr.port()));
        let dom = browse(
            &profile,
            &format!("{origin}/index.html"),
            8000,
            &["--dump-dom"],
        );
        assert_eq!(
            attr(&dom, "data-done"),
            "1",
            "{dom}\nserver: {}",
            s.stderr()
        );
        assert_eq!(attr(&dom, "data-nokey"), nokey, "{dom}");
        assert_eq!(attr(&dom, "data-key"), key, "{dom}");
        if s.addr.port() == keyed.addr.port() {
            assert_eq!(attr(&dom, "data-wrongkey"), "401:error", "{dom}");
        }
        assert!(
            s.stderr().contains("OPTIONS") || s.stderr().contains("POST /v1/chat/completions"),
            "{}",
            s.stderr()
        );
    }
}
