//! The first request head of a connection, read before hyper sees it: bytes that are not an
//! HTTP/1.x request (a TLS handshake, a stray protocol, a broken request line or header) get an
//! OpenAI-format 400 instead of hyper's bare one, and a head over the limit a 431; a good head is
//! replayed to hyper untouched through [`Rewind`].
//!
//! Invariant: nothing the client sent is lost or reordered: hyper reads exactly the bytes read
//! here, then the socket.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use http::StatusCode;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};

use crate::error::ApiError;

/// Largest first request head accepted (request line and headers).
pub const MAX_HEAD_BYTES: usize = 64 << 10;
/// Most headers in a request (hyper's default).
pub(crate) const MAX_HEADERS: usize = 100;

/// A stream that first yields bytes already read from it.
pub struct Rewind<S> {
    prefix: Bytes,
    inner: S,
}

impl<S: AsyncRead + Unpin> AsyncRead for Rewind<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if self.prefix.has_remaining() {
            let n = self.prefix.len().min(buf.remaining());
            buf.put_slice(&self.prefix[..n]);
            self.prefix.advance(n);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Rewind<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// What the first bytes of a request are.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Head {
    /// A whole, well-formed request head of this many bytes.
    Complete(usize),
    /// Well-formed so far.
    Partial,
    /// Not an HTTP/1.x request: why.
    Malformed(String),
    TooLarge,
}

/// Classifies the request head at the start of `buf`, at most `max` bytes long.
pub(crate) fn classify(buf: &[u8], max: usize) -> Head {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) if n > max => Head::TooLarge,
        Ok(httparse::Status::Complete(n)) => Head::Complete(n),
        Ok(httparse::Status::Partial) if buf.len() >= max => Head::TooLarge,
        Ok(httparse::Status::Partial) => Head::Partial,
        Err(httparse::Error::TooManyHeaders) => Head::TooLarge,
        Err(e) => Head::Malformed(e.to_string()),
    }
}

/// Reads the connection's first request head. `Some`: hand the stream to hyper; `None`: the
/// connection was answered (malformed or too large) or closed before a whole head arrived.
pub async fn first_head<S>(mut stream: S, timeout: Duration) -> Option<Rewind<S>>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut buf = BytesMut::with_capacity(4096);
    let read = async {
        loop {
            if stream.read_buf(&mut buf).await.ok()? == 0 {
                return None;
            }
            match classify(&buf, MAX_HEAD_BYTES) {
                Head::Partial => {}
                other => return Some(other),
            }
        }
    };
    let head = tokio::time::timeout(timeout, read).await.ok().flatten()?;
    if matches!(head, Head::Complete(_) | Head::Partial) {
        return Some(Rewind {
            prefix: buf.freeze(),
            inner: stream,
        });
    }
    answer_and_close(
        stream,
        &refusal_bytes(&refusal_for(head)),
        Duration::from_secs(1),
    )
    .await;
    None
}

/// Writes a whole response and closes. Closing with unread input makes the kernel reset the
/// connection, which can destroy the answer before the client reads it: what is still coming
/// is read and dropped, for at most `drain_for` and 1 MiB.
pub(crate) async fn answer_and_close<S>(mut stream: S, response: &[u8], drain_for: Duration)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let _ = stream.write_all(response).await;
    let _ = stream.shutdown().await;
    let mut sink = [0u8; 8192];
    let drain = async {
        let mut left = 1usize << 20;
        while left > 0 {
            match stream.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    };
    let _ = tokio::time::timeout(drain_for, drain).await;
}

/// The refusal of a head that is not a request or is over the limits.
pub(crate) fn refusal_for(head: Head) -> ApiError {
    match head {
        Head::Malformed(why) => ApiError::bad_request(format!(
            "not an HTTP/1.1 request ({why}); this server speaks plain HTTP/1.1"
        )),
        Head::TooLarge => {
            let mut e = ApiError::bad_request(format!(
                "the request head is over {MAX_HEAD_BYTES} bytes or {MAX_HEADERS} headers"
            ))
            .with_code("request_header_fields_too_large");
            e.status = StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE;
            e
        }
        Head::Complete(_) | Head::Partial => {
            ApiError::bad_request("the request head is incomplete")
        }
    }
}

/// A whole HTTP/1.1 response carrying `e` that closes the connection.
pub(crate) fn refusal_bytes(e: &ApiError) -> Vec<u8> {
    let body = e.to_json().to_string();
    let mut head = format!(
        "HTTP/1.1 {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
        e.status,
        body.len()
    );
    if let Some(s) = e.retry_after {
        head.push_str(&format!("retry-after: {s}\r\n"));
    }
    head.push_str("\r\n");
    head.push_str(&body);
    head.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_are_classified() {
        let classify = |b: &[u8]| super::classify(b, MAX_HEAD_BYTES);
        assert_eq!(
            classify(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
            Head::Complete(27)
        );
        assert_eq!(classify(b"POST /v1/chat"), Head::Partial);
        assert_eq!(classify(b""), Head::Partial);
        assert!(matches!(
            classify(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"),
            Head::Malformed(_)
        ));
        assert!(matches!(
            classify(b"GET / HTTP/2.0\r\n\r\n"),
            Head::Malformed(_)
        ));
        assert!(matches!(
            classify(b"GET / HTTP/1.1\r\nBad Header: x\r\n\r\n"),
            Head::Malformed(_)
        ));
        let long = format!("GET /{} HTTP/1.1\r\n", "a".repeat(MAX_HEAD_BYTES));
        assert_eq!(classify(long.as_bytes()), Head::TooLarge);
        let many: String = (0..=MAX_HEADERS).map(|i| format!("x-{i}: y\r\n")).collect();
        assert_eq!(
            classify(format!("GET / HTTP/1.1\r\n{many}\r\n").as_bytes()),
            Head::TooLarge
        );
    }

    #[tokio::test]
    async fn a_good_head_is_replayed_unchanged() {
        let (mut client, server) = tokio::io::duplex(1 << 16);
        let sent = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\nrest of the stream";
        client.write_all(sent).await.expect("write");
        let mut s = first_head(server, Duration::from_secs(5))
            .await
            .expect("handed over");
        drop(client);
        let mut got = Vec::new();
        s.read_to_end(&mut got).await.expect("read");
        assert_eq!(got, sent);
    }

    #[tokio::test]
    async fn garbage_gets_an_openai_error() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let mut client = tokio::net::TcpStream::connect(listener.local_addr().expect("addr"))
            .await
            .expect("connect");
        let (server, _) = listener.accept().await.expect("accept");
        client
            .write_all(b"HELLO THERE\r\n\r\n")
            .await
            .expect("write");
        client.shutdown().await.expect("half-close");
        assert!(first_head(server, Duration::from_secs(5)).await.is_none());
        let mut got = String::new();
        client.read_to_string(&mut got).await.expect("read");
        assert!(got.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{got}");
        let body = got.split("\r\n\r\n").nth(1).expect("body");
        let v: serde_json::Value = serde_json::from_str(body).expect("json");
        assert_eq!(v["error"]["type"], "invalid_request_error", "{v}");
    }
}
