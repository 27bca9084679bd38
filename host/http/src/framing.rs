//! Every request of a keep-alive connection, checked before hyper sees it: [`Framed`] sits
//! between the socket and hyper, follows the HTTP/1.1 message framing (head, then a
//! Content-Length or chunked body, then the next head) and hands hyper only whole heads that are
//! well-formed, within the size limit and unambiguous about their body length (one
//! Content-Length value; no Content-Length next to Transfer-Encoding; chunked last). A head that
//! fails gets an OpenAI-format 400 or 431 written after hyper has finished the responses before
//! it (hyper sees the end of the stream), never hyper's bare 400. A body must arrive within
//! `body_timeout` plus one second per `min_body_rate` bytes received; past that, the read fails
//! with `TimedOut` (the handler answers 408) and the connection closes.
//!
//! Requests pipelined before a refused head are answered first: hyper sees the end of the
//! stream only when their responses are written (`framing_out.rs` follows them).
//!
//! Invariant: hyper reads exactly the client's bytes, in order, up to the first refused head.

use std::pin::Pin;
use std::task::{Context, Poll, Waker, ready};
use std::time::Duration;

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

use crate::error::ApiError;
use crate::framing_out::Responses;
use crate::preface::{Head, classify, refusal_bytes, refusal_for};

/// Limits applied to every request of a connection.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest request head (request line and headers).
    pub max_head_bytes: usize,
    /// Time every body gets, on top of the time its bytes earn at `min_body_rate`.
    pub body_timeout: Duration,
    /// Bytes per second a slow body must keep up on average (at least 1).
    pub min_body_rate: u64,
}

/// Where the reader is in the current message.
#[derive(Debug, PartialEq, Eq)]
enum State {
    Head,
    /// Body bytes still to come.
    Length(u64),
    Chunked(Chunk),
    /// Refused or unparseable: hyper gets no more bytes.
    Done,
}

/// Position inside a chunked body.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Chunk {
    Size {
        n: u64,
        digits: u8,
    },
    /// A chunk extension after size `0`, `1` bytes long so far.
    Ext(u64, usize),
    SizeLf(u64),
    Data(u64),
    DataCr,
    DataLf,
    TrailerStart,
    TrailerLine,
    TrailerLineLf,
    EndLf,
}

/// Longest chunk extension or trailer section accepted.
const MAX_CHUNK_META: usize = 8 << 10;

/// A socket as hyper should see it.
pub struct Framed<S> {
    inner: S,
    limits: Limits,
    state: State,
    /// Bytes read from the socket, not yet given to hyper.
    buf: BytesMut,
    /// How many bytes at the front of `buf` are cleared for hyper.
    cleared: usize,
    /// Bytes of the current body read so far, and when the body began to be read.
    body_seen: u64,
    body_started: Option<Instant>,
    trailer_bytes: usize,
    /// An answer to write before the connection closes (a refused head).
    refusal: Option<bytes::Bytes>,
    timer: Option<Pin<Box<Sleep>>>,
    /// The answers hyper has written to the requests it was handed.
    responses: Responses,
    /// hyper's read, held back after a refused head until the requests before it are answered.
    read_waker: Option<Waker>,
}

impl<S> Framed<S> {
    pub fn new(inner: S, limits: Limits) -> Framed<S> {
        Framed {
            inner,
            limits,
            state: State::Head,
            buf: BytesMut::with_capacity(8 << 10),
            cleared: 0,
            body_seen: 0,
            body_started: None,
            trailer_bytes: 0,
            refusal: None,
            timer: None,
            responses: Responses::default(),
            read_waker: None,
        }
    }

    /// Follows bytes written to the client; wakes a held-back read once nothing before the
    /// refused head waits for its answer.
    fn wrote(&mut self, bytes: &[u8]) {
        self.responses.written(bytes);
        if (self.responses.unanswered() == 0 || self.responses.lost())
            && let Some(w) = self.read_waker.take()
        {
            w.wake();
        }
    }

    fn refuse(&mut self, e: &ApiError) {
        self.state = State::Done;
        self.refusal = Some(refusal_bytes(e).into());
    }

    /// Clears as many buffered bytes as the framing allows.
    fn advance(&mut self) {
        loop {
            let avail = self.buf.len() - self.cleared;
            match &mut self.state {
                State::Done => return,
                State::Head => {
                    if avail == 0 {
                        return;
                    }
                    match check_head(&self.buf[self.cleared..], self.limits.max_head_bytes) {
                        Ok(None) => return,
                        Ok(Some((n, next, is_head))) => {
                            self.cleared += n;
                            self.responses.delivered(is_head);
                            self.start_body(next);
                        }
                        Err(e) => {
                            self.refuse(&e);
                            return;
                        }
                    }
                }
                State::Length(left) => {
                    let n = usize::try_from(*left).unwrap_or(usize::MAX).min(avail);
                    if n == 0 {
                        return;
                    }
                    *left -= n as u64;
                    let done = *left == 0;
                    self.cleared += n;
                    self.body_seen = self.body_seen.saturating_add(n as u64);
                    if done {
                        self.state = State::Head;
                    }
                }
                State::Chunked(_) => {
                    if avail == 0 {
                        return;
                    }
                    let before = self.cleared;
                    let r = self.step_chunked();
                    self.body_seen = self
                        .body_seen
                        .saturating_add((self.cleared - before) as u64);
                    if r.is_err() {
                        // Unparseable framing: hyper gets the bytes up to the fault, then the end
                        // of the stream, and fails the body itself (no next head is trusted).
                        self.state = State::Done;
                        return;
                    }
                }
            }
        }
    }

    fn start_body(&mut self, next: State) {
        self.body_seen = 0;
        self.body_started = None;
        self.trailer_bytes = 0;
        self.state = match next {
            State::Length(0) => State::Head,
            other => other,
        };
    }

    /// Walks chunked framing over the buffered bytes; Err on a framing fault (the bytes up to
    /// and including it stay cleared, so hyper fails the body on it).
    fn step_chunked(&mut self) -> Result<(), ()> {
        while self.cleared < self.buf.len() {
            let State::Chunked(c) = &mut self.state else {
                return Ok(());
            };
            if let Chunk::Data(left) = c {
                let avail = self.buf.len() - self.cleared;
                let n = usize::try_from(*left).unwrap_or(usize::MAX).min(avail);
                *left -= n as u64;
                self.cleared += n;
                if *left == 0 {
                    *c = Chunk::DataCr;
                }
                continue;
            }
            let b = self.buf[self.cleared];
            self.cleared += 1;
            if chunk_byte(c, b, &mut self.trailer_bytes)? {
                self.state = State::Head;
                return Ok(());
            }
        }
        Ok(())
    }

    /// When the current body must have arrived by (None outside a body).
    fn body_deadline(&mut self) -> Option<Instant> {
        if !matches!(self.state, State::Length(_) | State::Chunked(_)) {
            return None;
        }
        let started = *self.body_started.get_or_insert_with(Instant::now);
        let earned = Duration::from_secs(self.body_seen / self.limits.min_body_rate.max(1));
        let allowed = self.limits.body_timeout.saturating_add(earned);
        Some(started.checked_add(allowed).unwrap_or(started))
    }
}

/// Feeds one framing byte (not chunk data) to `c`; `Ok(true)` when the body ended with it.
pub(crate) fn chunk_byte(c: &mut Chunk, b: u8, meta: &mut usize) -> Result<bool, ()> {
    let next = match *c {
        Chunk::Data(_) => return Err(()),
        Chunk::Size { n, digits } => match (b as char).to_digit(16) {
            Some(d) if digits < 16 => Chunk::Size {
                n: (n << 4) | u64::from(d),
                digits: digits + 1,
            },
            _ if digits == 0 => return Err(()),
            Some(_) => return Err(()),
            None if b == b'\r' => Chunk::SizeLf(n),
            None if matches!(b, b';' | b' ' | b'\t') => Chunk::Ext(n, 0),
            None => return Err(()),
        },
        Chunk::Ext(n, len) => match b {
            b'\r' => Chunk::SizeLf(n),
            b'\n' => return Err(()),
            _ if len >= MAX_CHUNK_META => return Err(()),
            _ => Chunk::Ext(n, len + 1),
        },
        Chunk::SizeLf(n) => match (b, n) {
            (b'\n', 0) => Chunk::TrailerStart,
            (b'\n', n) => Chunk::Data(n),
            _ => return Err(()),
        },
        Chunk::DataCr if b == b'\r' => Chunk::DataLf,
        Chunk::DataLf if b == b'\n' => Chunk::Size { n: 0, digits: 0 },
        Chunk::DataCr | Chunk::DataLf => return Err(()),
        Chunk::TrailerStart if b == b'\r' => Chunk::EndLf,
        Chunk::TrailerStart | Chunk::TrailerLine => {
            *meta += 1;
            if *meta > MAX_CHUNK_META {
                return Err(());
            }
            if b == b'\r' {
                Chunk::TrailerLineLf
            } else {
                Chunk::TrailerLine
            }
        }
        Chunk::TrailerLineLf if b == b'\n' => Chunk::TrailerStart,
        Chunk::EndLf if b == b'\n' => return Ok(true),
        Chunk::TrailerLineLf | Chunk::EndLf => return Err(()),
    };
    *c = next;
    Ok(false)
}

/// Checks the head at the start of `buf`: `Ok(None)` while incomplete, else its length and the
/// framing of its body; Err with the refusal for a malformed, oversized or ambiguous head.
/// The third value says whether it is a `HEAD` request (its answer has no body).
fn check_head(buf: &[u8], max: usize) -> Result<Option<(usize, State, bool)>, ApiError> {
    let len = match classify(buf, max) {
        Head::Partial => return Ok(None),
        Head::Complete(n) => n,
        other => return Err(refusal_for(other)),
    };
    let mut headers = [httparse::EMPTY_HEADER; crate::preface::MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    if !matches!(req.parse(&buf[..len]), Ok(httparse::Status::Complete(_))) {
        return Err(ApiError::bad_request(
            "the request head could not be parsed",
        ));
    }
    let mut length: Option<u64> = None;
    let mut te: Option<String> = None;
    for h in req.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            let bad = || ApiError::bad_request("the Content-Length header is not a single number");
            // Digits only, as hyper parses it (no lists, no sign), and below its maximum.
            let v = std::str::from_utf8(h.value).map_err(|_| bad())?.trim();
            if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            let n: u64 = v
                .parse()
                .ok()
                .filter(|&n| n < u64::MAX - 1)
                .ok_or_else(bad)?;
            if length.is_some_and(|l| l != n) {
                return Err(ApiError::bad_request(
                    "conflicting Content-Length headers: send exactly one",
                ));
            }
            length = Some(n);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            let v = String::from_utf8_lossy(h.value);
            te = Some(match te {
                Some(prev) => format!("{prev},{v}"),
                None => v.into_owned(),
            });
        }
    }
    if req.method == Some("CONNECT") {
        let mut e = ApiError::bad_request("CONNECT is not supported by this server");
        e.status = http::StatusCode::METHOD_NOT_ALLOWED;
        return Err(e.with_code("method_not_allowed"));
    }
    if te.is_some() && req.version == Some(0) {
        return Err(ApiError::bad_request(
            "an HTTP/1.0 request may not carry Transfer-Encoding",
        ));
    }
    let next = match (te, length) {
        (Some(_), Some(_)) => {
            return Err(ApiError::bad_request(
                "a request may not carry both Transfer-Encoding and Content-Length",
            ));
        }
        (Some(te), None) => {
            let last = te.rsplit(',').next().unwrap_or("").trim();
            if !last.eq_ignore_ascii_case("chunked") {
                return Err(ApiError::bad_request(format!(
                    "Transfer-Encoding {te:?} is not supported: its last coding must be chunked"
                )));
            }
            State::Chunked(Chunk::Size { n: 0, digits: 0 })
        }
        (None, Some(n)) => State::Length(n),
        (None, None) => State::Length(0),
    };
    Ok(Some((len, next, req.method == Some("HEAD"))))
}

impl<S: AsyncRead + Unpin> AsyncRead for Framed<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        loop {
            if this.cleared > 0 {
                let n = this.cleared.min(out.remaining());
                out.put_slice(&this.buf[..n]);
                this.buf.advance(n);
                this.cleared -= n;
                return Poll::Ready(Ok(()));
            }
            if this.state == State::Done {
                // After a refused head, hyper sees the end of the stream only once the
                // requests before it are answered (pipelined: a valid request, then a bad one).
                if this.refusal.is_some()
                    && this.responses.unanswered() > 0
                    && !this.responses.lost()
                {
                    this.read_waker = Some(cx.waker().clone());
                    return Poll::Pending;
                }
                return Poll::Ready(Ok(()));
            }
            this.advance();
            if this.cleared > 0 || this.state == State::Done {
                continue;
            }
            let deadline = this.body_deadline();
            if this.buf.capacity() - this.buf.len() < 4096 {
                this.buf.reserve(8 << 10);
            }
            let got = {
                let spare = this.buf.spare_capacity_mut();
                let mut rb = ReadBuf::uninit(spare);
                match Pin::new(&mut this.inner).poll_read(cx, &mut rb) {
                    Poll::Ready(Ok(())) => Poll::Ready(Ok(rb.filled().len())),
                    Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                    Poll::Pending => Poll::Pending,
                }
            };
            match got {
                Poll::Ready(Ok(0)) => {
                    // End of the stream: whatever partial head is buffered is dropped.
                    this.buf.clear();
                    this.state = State::Done;
                    return Poll::Ready(Ok(()));
                }
                Poll::Ready(Ok(n)) => {
                    // SAFETY: `poll_read` initialised the first `n` spare bytes.
                    unsafe { this.buf.set_len(this.buf.len() + n) };
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => {
                    let Some(deadline) = deadline else {
                        this.timer = None;
                        return Poll::Pending;
                    };
                    let timer = this
                        .timer
                        .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
                    if timer.deadline() != deadline {
                        timer.as_mut().reset(deadline);
                    }
                    ready!(timer.as_mut().poll(cx));
                    this.state = State::Done;
                    return Poll::Ready(Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        BodyTimeout,
                    )));
                }
            }
        }
    }
}

/// The error a too-slow body read fails with.
#[derive(Debug)]
pub struct BodyTimeout;

impl std::fmt::Display for BodyTimeout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the request body arrived too slowly")
    }
}

impl std::error::Error for BodyTimeout {}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Framed<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = &mut *self;
        let r = ready!(Pin::new(&mut this.inner).poll_write(cx, buf));
        if let Ok(n) = r {
            this.wrote(&buf[..n.min(buf.len())]);
        }
        Poll::Ready(r)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    /// Writes the refusal of a bad head (if any) before closing.
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        while let Some(r) = this.refusal.as_mut() {
            if r.is_empty() {
                this.refusal = None;
                break;
            }
            match ready!(Pin::new(&mut this.inner).poll_write(cx, r)) {
                Ok(0) | Err(_) => this.refusal = None,
                Ok(n) => r.advance(n),
            }
        }
        ready!(Pin::new(&mut this.inner).poll_shutdown(cx))?;
        if this.state == State::Done {
            // Unread input would make the kernel reset the connection and maybe destroy the
            // answer: drop what has already arrived (bounded, never waiting).
            let mut sink = [0u8; 8192];
            for _ in 0..128 {
                let mut rb = ReadBuf::new(&mut sink);
                match Pin::new(&mut this.inner).poll_read(cx, &mut rb) {
                    Poll::Ready(Ok(())) if !rb.filled().is_empty() => {}
                    _ => break,
                }
            }
        }
        Poll::Ready(Ok(()))
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let this = &mut *self;
        let r = ready!(Pin::new(&mut this.inner).poll_write_vectored(cx, bufs));
        if let Ok(n) = r {
            let mut left = n;
            for b in bufs {
                if left == 0 {
                    break;
                }
                let take = left.min(b.len());
                this.wrote(&b[..take]);
                left -= take;
            }
        }
        Poll::Ready(r)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    fn limits(body_timeout: Duration) -> Limits {
        Limits {
            max_head_bytes: 1024,
            body_timeout,
            min_body_rate: 1024,
        }
    }

    /// Everything hyper would read from `sent` (the client then closes its side).
    async fn passed(sent: &[u8]) -> Vec<u8> {
        let (mut client, server) = tokio::io::duplex(1 << 16);
        client.write_all(sent).await.expect("write");
        client.shutdown().await.expect("close");
        let mut f = Framed::new(server, limits(Duration::from_secs(5)));
        let mut got = Vec::new();
        f.read_to_end(&mut got).await.expect("read");
        got
    }

    #[tokio::test]
    async fn pipelined_requests_pass_unchanged() {
        let sent: &[u8] = b"POST /a HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcGET /b HTTP/1.1\r\n\r\nPOST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n0\r\nT: v\r\n\r\nGET /d HTTP/1.1\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(passed(sent).await, sent);
    }

    #[tokio::test]
    async fn a_bad_later_head_ends_the_stream_at_its_start() {
        let good: &[u8] = b"GET /a HTTP/1.1\r\n\r\n";
        for bad in [
            &b"GET /b HTTP/1.1\r\nBad Header: x\r\n\r\n"[..],
            b"POST /b HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            b"POST /b HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"POST /b HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
            b"POST /b HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
            b"POST /b HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\n",
            b"POST /b HTTP/1.1\r\nContent-Length: 18446744073709551615\r\n\r\n",
            b"POST /b HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
        ] {
            let (mut client, server) = tokio::io::duplex(1 << 16);
            client.write_all(good).await.expect("write");
            client.write_all(bad).await.expect("write");
            let mut f = Framed::new(server, limits(Duration::from_secs(5)));
            let got = answered_then_ended(&mut f, good.len()).await;
            assert_eq!(got, good, "{}", String::from_utf8_lossy(bad));
            f.shutdown().await.expect("shutdown");
            let mut answer = Vec::new();
            client.read_to_end(&mut answer).await.expect("answer");
            let answer = String::from_utf8_lossy(&answer);
            let refusal = answer.strip_prefix(OK).expect("the first answer first");
            assert!(refusal.starts_with("HTTP/1.1 400 "), "{answer}");
            let body = refusal.split("\r\n\r\n").nth(1).expect("body");
            let v: serde_json::Value = serde_json::from_str(body).expect("json");
            assert_eq!(v["error"]["type"], "invalid_request_error", "{v}");
        }
    }

    /// The answer a server gives the request before a refused head.
    const OK: &str = "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";

    /// Reads the `n` bytes of the requests before a refused head; checks that the end of the
    /// stream waits for their answer, writes it ([`OK`]) and reads to the end.
    async fn answered_then_ended<S>(f: &mut Framed<S>, n: usize) -> Vec<u8>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        let mut got = vec![0u8; n];
        f.read_exact(&mut got).await.expect("read");
        let mut probe = [0u8; 16];
        let early = tokio::time::timeout(Duration::from_millis(50), f.read(&mut probe)).await;
        assert!(early.is_err(), "the end of the stream waits for the answer");
        f.write_all(OK.as_bytes()).await.expect("answer");
        let mut rest = Vec::new();
        f.read_to_end(&mut rest).await.expect("read");
        assert!(rest.is_empty(), "nothing past the refused head");
        got
    }

    #[tokio::test]
    async fn an_oversized_later_head_gets_431() {
        let (mut client, server) = tokio::io::duplex(1 << 16);
        let big = format!("GET /b HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(2048));
        client
            .write_all(b"GET /a HTTP/1.1\r\n\r\n")
            .await
            .expect("write");
        client.write_all(big.as_bytes()).await.expect("write");
        let mut f = Framed::new(server, limits(Duration::from_secs(5)));
        let got = answered_then_ended(&mut f, 19).await;
        assert_eq!(got, b"GET /a HTTP/1.1\r\n\r\n");
        f.shutdown().await.expect("shutdown");
        let mut answer = vec![0u8; OK.len() + 12];
        client.read_exact(&mut answer).await.expect("answer");
        assert_eq!(&answer[OK.len()..], b"HTTP/1.1 431");
    }

    #[tokio::test]
    async fn bad_chunk_framing_ends_the_stream_at_the_fault() {
        let sent: &[u8] =
            b"POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nGET /x HTTP/1.1\r\n\r\n";
        let got = passed(sent).await;
        let head_len = sent.len() - b"zz\r\nGET /x HTTP/1.1\r\n\r\n".len();
        assert_eq!(
            got,
            &sent[..head_len + 1],
            "up to and including the faulty byte"
        );
        let huge: &[u8] =
            b"POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n11111111111111111\r\n";
        let got = passed(huge).await;
        assert!(got.len() < huge.len(), "a 17-digit chunk size is refused");
    }

    #[tokio::test]
    async fn a_slow_body_times_out() {
        let (mut client, server) = tokio::io::duplex(1 << 16);
        client
            .write_all(b"POST /a HTTP/1.1\r\nContent-Length: 1000\r\n\r\nab")
            .await
            .expect("write");
        let mut f = Framed::new(server, limits(Duration::from_millis(300)));
        let started = std::time::Instant::now();
        let mut got = Vec::new();
        let err = f.read_to_end(&mut got).await.expect_err("times out");
        assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(250) && took < Duration::from_secs(3),
            "{took:?}"
        );
        assert!(got.ends_with(b"ab"), "the bytes that came were passed on");
        drop(client);
    }
}

#[cfg(test)]
mod props {
    //! Framing properties over generated streams: a valid pipelined stream passes whole however
    //! it is split; any bytes never panic, pass only a prefix of themselves, and pass the same
    //! prefix however they are split.

    use proptest::prelude::*;

    use super::*;

    /// What `Framed` clears for hyper when `input` arrives in pieces cut at `cuts`.
    pub(super) fn cleared(input: &[u8], cuts: &[usize]) -> Vec<u8> {
        let mut f = Framed::new(
            tokio::io::empty(),
            Limits {
                max_head_bytes: 4096,
                body_timeout: Duration::from_secs(1),
                min_body_rate: 1,
            },
        );
        let mut out = Vec::new();
        let mut at = 0;
        let mut ends: Vec<usize> = cuts.iter().map(|c| c % (input.len() + 1)).collect();
        ends.push(input.len());
        ends.sort_unstable();
        for end in ends {
            f.buf.extend_from_slice(&input[at..end.max(at)]);
            at = end.max(at);
            f.advance();
            out.extend_from_slice(&f.buf.split_to(f.cleared));
            f.cleared = 0;
        }
        out
    }

    /// One valid request: a head, then no body, a Content-Length body or a chunked one.
    pub(super) fn request() -> impl Strategy<Value = Vec<u8>> {
        let body = prop::collection::vec(any::<u8>(), 0..300);
        let chunks = prop::collection::vec(prop::collection::vec(any::<u8>(), 1..40), 0..5);
        prop_oneof![
            Just(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
            body.prop_map(|b| {
                let mut r = format!(
                    "POST /v1/completions HTTP/1.1\r\nContent-Length: {}\r\n\r\n",
                    b.len()
                )
                .into_bytes();
                r.extend(b);
                r
            }),
            (chunks, any::<bool>()).prop_map(|(cs, trailer)| {
                let mut r =
                    b"POST /tokenize HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
                for c in cs {
                    r.extend(format!("{:x};ext=1\r\n", c.len()).bytes());
                    r.extend(c);
                    r.extend(b"\r\n");
                }
                r.extend(b"0\r\n");
                if trailer {
                    r.extend(b"X-Trailer: yes\r\n");
                }
                r.extend(b"\r\n");
                r
            }),
        ]
    }

    proptest! {
        #![proptest_config(memoria_fuzz::config(2000))]

        #[test]
        fn valid_pipelined_streams_pass_whole(
            reqs in prop::collection::vec(request(), 1..6),
            cuts in prop::collection::vec(any::<usize>(), 0..12),
        ) {
            let stream: Vec<u8> = reqs.concat();
            prop_assert_eq!(cleared(&stream, &cuts), stream);
        }

        #[test]
        fn any_bytes_pass_a_prefix_whatever_the_split(
            prefix in request(),
            noise in prop::collection::vec(any::<u8>(), 0..400),
            cuts in prop::collection::vec(any::<usize>(), 0..12),
        ) {
            let mut input = prefix;
            input.extend(noise);
            let whole = cleared(&input, &[]);
            prop_assert!(input.starts_with(&whole));
            prop_assert_eq!(cleared(&input, &cuts), whole);
        }
    }
}

#[cfg(test)]
#[path = "framing_fuzz.rs"]
mod fuzz;
