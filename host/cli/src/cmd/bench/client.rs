//! Loopback HTTP for the process-level benchmarks (`bench cluster`): JSON GET and POST, and one
//! streamed completion or chat timed to its first content event. Every call has a deadline; a
//! non-200 answer is an error naming the status and the body.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpStream;

/// The `data:` payloads of a server-sent event stream, one at a time (events without one are
/// skipped).
pub struct SseReader {
    body: Incoming,
    buf: Vec<u8>,
}

impl SseReader {
    pub fn new(body: Incoming) -> SseReader {
        SseReader {
            body,
            buf: Vec::new(),
        }
    }

    /// The next payload; `None` at the end of the body.
    pub async fn next(&mut self) -> anyhow::Result<Option<String>> {
        loop {
            while let Some(end) = self.buf.windows(2).position(|w| w == b"\n\n") {
                let event: Vec<u8> = self.buf.drain(..end + 2).collect();
                let line = String::from_utf8_lossy(&event);
                if let Some(data) = line.trim().strip_prefix("data: ") {
                    return Ok(Some(data.to_string()));
                }
            }
            let Some(frame) = self.body.frame().await else {
                return Ok(None);
            };
            if let Ok(data) = frame?.into_data() {
                self.buf.extend_from_slice(&data);
            }
        }
    }
}

/// A host (or router) on the loopback interface.
#[derive(Clone, Copy, Debug)]
pub struct Client {
    pub addr: SocketAddr,
    pub deadline: Duration,
}

/// One streamed request's outcome.
#[derive(Debug, Default)]
pub struct Streamed {
    /// Seconds to the first content event.
    pub ttft_s: f64,
    /// Seconds to the end of the stream.
    pub total_s: f64,
    /// The generated text, concatenated.
    pub text: String,
    /// The final `usage` object (null when the server sent none).
    pub usage: Value,
    /// `x-memoria-backend` of the answer (set by `memoria route`).
    pub backend: Option<String>,
}

impl Client {
    pub fn new(addr: SocketAddr, deadline: Duration) -> Client {
        Client { addr, deadline }
    }

    async fn send(
        &self,
        method: &str,
        path: &str,
        body: String,
    ) -> anyhow::Result<hyper::Response<Incoming>> {
        let stream = TcpStream::connect(self.addr)
            .await
            .with_context(|| format!("connecting to {}", self.addr))?;
        stream.set_nodelay(true)?;
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(conn);
        let req = hyper::Request::builder()
            .method(method)
            .uri(path)
            .header("host", self.addr.to_string())
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body)))?;
        Ok(sender.send_request(req).await?)
    }

    async fn json(&self, method: &str, path: &str, body: String) -> anyhow::Result<Value> {
        let work = async {
            let resp = self.send(method, path, body).await?;
            let status = resp.status().as_u16();
            let bytes = resp.into_body().collect().await?.to_bytes();
            if status != 200 {
                bail!("HTTP {status}: {}", String::from_utf8_lossy(&bytes));
            }
            Ok(serde_json::from_slice(&bytes)?)
        };
        tokio::time::timeout(self.deadline, work)
            .await
            .with_context(|| format!("{method} {path} on {}: deadline passed", self.addr))?
            .with_context(|| format!("{method} {path} on {}", self.addr))
    }

    /// GET `path` as JSON.
    pub async fn get(&self, path: &str) -> anyhow::Result<Value> {
        self.json("GET", path, String::new()).await
    }

    /// POST `body` to `path`, the answer as JSON.
    pub async fn post(&self, path: &str, body: &Value) -> anyhow::Result<Value> {
        self.json("POST", path, body.to_string()).await
    }

    /// POST a streaming request (`"stream": true` is the caller's) and read it to `[DONE]`.
    pub async fn stream(&self, path: &str, body: &Value) -> anyhow::Result<Streamed> {
        tokio::time::timeout(self.deadline, self.stream_inner(path, body))
            .await
            .with_context(|| format!("POST {path} on {}: deadline passed", self.addr))?
            .with_context(|| format!("POST {path} on {}", self.addr))
    }

    async fn stream_inner(&self, path: &str, body: &Value) -> anyhow::Result<Streamed> {
        let started = Instant::now();
        let resp = self.send("POST", path, body.to_string()).await?;
        let status = resp.status().as_u16();
        let backend = resp
            .headers()
            .get("x-memoria-backend")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let body = resp.into_body();
        if status != 200 {
            let bytes = body.collect().await?.to_bytes();
            bail!("HTTP {status}: {}", String::from_utf8_lossy(&bytes));
        }
        let mut out = Streamed {
            backend,
            usage: Value::Null,
            ..Streamed::default()
        };
        let mut first = None;
        let mut done = false;
        let mut events = SseReader::new(body);
        while let Some(data) = events.next().await? {
            if data == "[DONE]" {
                done = true;
                continue;
            }
            let v: Value = serde_json::from_str(&data).context("an SSE event is not JSON")?;
            if let Some(e) = v.get("error") {
                bail!("error event: {e}");
            }
            let choice = &v["choices"][0];
            // A completion's event carries `text` (one per token, maybe empty); a chat's
            // first event may carry only the role, so content counts once non-empty.
            let piece = choice["text"].as_str().or_else(|| {
                choice["delta"]["content"]
                    .as_str()
                    .filter(|s| !s.is_empty())
            });
            if let Some(p) = piece {
                first.get_or_insert_with(|| started.elapsed().as_secs_f64());
                out.text.push_str(p);
            }
            if let Some(u) = v.get("usage").filter(|u| !u.is_null()) {
                out.usage = u.clone();
            }
        }
        if !done {
            bail!("the stream ended without [DONE]");
        }
        out.total_s = started.elapsed().as_secs_f64();
        out.ttft_s = first.unwrap_or(out.total_s);
        Ok(out)
    }
}
