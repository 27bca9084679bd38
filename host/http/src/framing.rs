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
//! stream only when their responses are written (`framing_out.rs` follows them). The rules a head and a chunked body are checked against are
//! in `framing_grammar.rs`.
//!
//! Invariant: hyper reads exactly the client's bytes, in order, up to the first refused head.

use std::pin::Pin;
use std::task::{Context, Poll, Waker, ready};
use std::time::Duration;

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

use crate::error::ApiError;
use crate::framing_grammar::{Chunk, State, check_head, chunk_byte};
use crate::framing_out::Responses;
use crate::preface::refusal_bytes;

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
#[path = "framing_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "framing_props.rs"]
mod props;

#[cfg(test)]
#[path = "framing_fuzz.rs"]
mod fuzz;
