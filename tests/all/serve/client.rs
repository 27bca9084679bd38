//! A minimal blocking HTTP/1.1 client on std sockets for the server tests: one request per
//! connection (`Connection: close`), chunked bodies decoded, raw bytes allowed in bodies so
//! tests can send invalid UTF-8, and a streaming reader that can hang up mid-response.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use serde_json::Value;

/// A whole response.
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "HTTP {} body is not JSON ({e}): {}",
                self.status,
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect to the server");
    s.set_read_timeout(Some(Duration::from_secs(120)))
        .expect("timeout");
    s.set_nodelay(true).expect("nodelay");
    s
}

fn write_request(
    s: &mut TcpStream,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) {
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if !body.is_empty() || method == "POST" {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).expect("write head");
    s.write_all(body).expect("write body");
}

fn read_head(r: &mut BufReader<TcpStream>) -> (u16, Vec<(String, String)>) {
    let mut line = String::new();
    r.read_line(&mut line).expect("status line");
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {line:?}"));
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        r.read_line(&mut h).expect("header");
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    (status, headers)
}

/// Sends one request and reads the whole response.
pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Resp {
    let mut s = connect(addr);
    write_request(&mut s, method, path, headers, body);
    let mut r = BufReader::new(s);
    let (status, headers) = read_head(&mut r);
    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    let mut body = Vec::new();
    if chunked {
        loop {
            let mut size = String::new();
            r.read_line(&mut size).expect("chunk size");
            let n = usize::from_str_radix(size.trim(), 16).expect("hex chunk size");
            if n == 0 {
                break;
            }
            let mut chunk = vec![0; n + 2];
            r.read_exact(&mut chunk).expect("chunk");
            body.extend_from_slice(&chunk[..n]);
        }
    } else {
        r.read_to_end(&mut body).expect("body");
    }
    Resp {
        status,
        headers,
        body,
    }
}

/// POSTs JSON.
pub fn post(addr: SocketAddr, path: &str, body: &Value, headers: &[(&str, &str)]) -> Resp {
    let mut h = vec![("Content-Type", "application/json")];
    h.extend_from_slice(headers);
    request(addr, "POST", path, &h, body.to_string().as_bytes())
}

/// GETs a path.
pub fn get(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Resp {
    request(addr, "GET", path, headers, b"")
}

/// A streaming response being read.
pub struct Stream {
    r: BufReader<TcpStream>,
    pub status: u16,
}

impl Stream {
    /// Sends a request and reads the status and headers.
    pub fn open(addr: SocketAddr, path: &str, body: &Value, headers: &[(&str, &str)]) -> Stream {
        let mut s = connect(addr);
        let mut h = vec![("Content-Type", "application/json")];
        h.extend_from_slice(headers);
        write_request(&mut s, "POST", path, &h, body.to_string().as_bytes());
        let mut r = BufReader::new(s);
        let (status, _) = read_head(&mut r);
        Stream { r, status }
    }

    /// The next `data:` payload of the SSE stream (None at the end).
    pub fn next_event(&mut self) -> Option<String> {
        loop {
            let mut line = String::new();
            if self.r.read_line(&mut line).ok()? == 0 {
                return None;
            }
            if let Some(d) = line.trim().strip_prefix("data: ") {
                return Some(d.to_string());
            }
        }
    }
}

/// Sends only a request head (e.g. declaring a body the server must refuse unread).
pub fn request_head_only(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> Resp {
    let mut s = connect(addr);
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).expect("write head");
    let mut r = BufReader::new(s);
    let (status, headers) = read_head(&mut r);
    let len = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; len];
    r.read_exact(&mut body).expect("body");
    Resp {
        status,
        headers,
        body,
    }
}

/// Writes `bytes` as they are (not necessarily HTTP) and reads the answer until the server
/// closes the connection. The server may refuse before reading everything and reset the connection, so write and
/// read errors after the answer arrived are not failures.
pub fn raw(addr: SocketAddr, bytes: &[u8]) -> Resp {
    let mut s = connect(addr);
    let _ = s.write_all(bytes);
    let mut r = BufReader::new(s);
    let (status, headers) = read_head(&mut r);
    let mut body = Vec::new();
    let _ = r.read_to_end(&mut body);
    Resp {
        status,
        headers,
        body,
    }
}
