//! The responses hyper writes on a connection, followed just far enough to know when every
//! request handed to it has its final answer: each response head (1xx heads are interim), then
//! its body by `Content-Length` or chunked framing (none for a `HEAD` request, 204 or 304). The
//! read side uses it to hold back the end of the stream after a refused pipelined head until
//! the requests before it are answered.
//!
//! Invariant: `unanswered` is the number of requests delivered to hyper whose final response
//! has not been written completely; once the tracker cannot follow the bytes, it says so
//! (`lost`) and callers stop waiting on it.

use std::collections::VecDeque;

use crate::framing_grammar::{Chunk, chunk_byte};

/// Largest response head followed (hyper's are far smaller).
const MAX_OUT_HEAD: usize = 64 << 10;

#[derive(Debug)]
enum Out {
    Head(Vec<u8>),
    Length(u64),
    Chunked(Chunk, usize),
    Lost,
}

/// Follows written responses against delivered requests.
#[derive(Debug)]
pub(crate) struct Responses {
    out: Out,
    /// Per delivered request not yet answered: whether it was a `HEAD` (its answer has no body).
    waiting: VecDeque<bool>,
}

impl Default for Responses {
    fn default() -> Self {
        Responses {
            out: Out::Head(Vec::new()),
            waiting: VecDeque::new(),
        }
    }
}

impl Responses {
    /// A request head was handed to hyper.
    pub fn delivered(&mut self, is_head: bool) {
        self.waiting.push_back(is_head);
    }

    /// Requests delivered without a complete final response.
    pub fn unanswered(&self) -> usize {
        self.waiting.len()
    }

    /// Whether the written bytes could not be followed (waiting on them is pointless).
    pub fn lost(&self) -> bool {
        matches!(self.out, Out::Lost)
    }

    /// Feeds bytes hyper wrote to the socket, in order.
    pub fn written(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            match &mut self.out {
                Out::Lost => return,
                Out::Head(head) => {
                    let (b, rest) = bytes.split_first().expect("not empty");
                    bytes = rest;
                    head.push(*b);
                    if head.ends_with(b"\r\n\r\n") {
                        let head = std::mem::take(head);
                        self.out = self.after_head(&head);
                    } else if head.len() > MAX_OUT_HEAD {
                        self.out = Out::Lost;
                    }
                }
                Out::Length(left) => {
                    let n = usize::try_from(*left)
                        .unwrap_or(usize::MAX)
                        .min(bytes.len());
                    *left -= n as u64;
                    bytes = &bytes[n..];
                    if *left == 0 {
                        self.answered();
                    }
                }
                Out::Chunked(c, meta) => {
                    if let Chunk::Data(left) = c {
                        let n = usize::try_from(*left)
                            .unwrap_or(usize::MAX)
                            .min(bytes.len());
                        *left -= n as u64;
                        bytes = &bytes[n..];
                        if *left == 0 {
                            *c = Chunk::DataCr;
                        }
                        continue;
                    }
                    let (b, rest) = bytes.split_first().expect("not empty");
                    bytes = rest;
                    match chunk_byte(c, *b, meta) {
                        Ok(true) => self.answered(),
                        Ok(false) => {}
                        Err(()) => self.out = Out::Lost,
                    }
                }
            }
        }
    }

    fn answered(&mut self) {
        self.waiting.pop_front();
        self.out = Out::Head(Vec::new());
    }

    /// What follows a complete response head.
    fn after_head(&mut self, head: &[u8]) -> Out {
        let mut headers = [httparse::EMPTY_HEADER; 128];
        let mut resp = httparse::Response::new(&mut headers);
        if !matches!(resp.parse(head), Ok(httparse::Status::Complete(_))) {
            return Out::Lost;
        }
        let Some(code) = resp.code else {
            return Out::Lost;
        };
        if (100..200).contains(&code) {
            // Interim (100 Continue): the final answer is still to come.
            return Out::Head(Vec::new());
        }
        let is_head = self.waiting.front().copied().unwrap_or(false);
        let mut length = None;
        let mut chunked = false;
        for h in resp.headers.iter() {
            if h.name.eq_ignore_ascii_case("content-length") {
                length = std::str::from_utf8(h.value)
                    .ok()
                    .and_then(|v| v.trim().parse::<u64>().ok());
            } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = h.value.to_ascii_lowercase().ends_with(b"chunked");
            }
        }
        if is_head || code == 204 || code == 304 {
            self.answered();
            return Out::Head(Vec::new());
        }
        match (chunked, length) {
            (true, _) => Out::Chunked(Chunk::Size { n: 0, digits: 0 }, 0),
            (false, Some(0)) => {
                self.answered();
                Out::Head(Vec::new())
            }
            (false, Some(n)) => Out::Length(n),
            // A body to the end of the connection: nothing after it can be followed.
            (false, None) => Out::Lost,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn final_answers_are_counted_whatever_the_write_boundaries() {
        let stream: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n\
            HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello\
            HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n\
            HTTP/1.1 200 OK\r\ncontent-length: 99\r\n\r\n\
            HTTP/1.1 204 No Content\r\n\r\n";
        for step in [1, 2, 7, stream.len()] {
            let mut r = Responses::default();
            for is_head in [false, false, true, false] {
                r.delivered(is_head);
            }
            assert_eq!(r.unanswered(), 4);
            for part in stream.chunks(step) {
                r.written(part);
            }
            assert_eq!(r.unanswered(), 0, "step {step}");
            assert!(!r.lost());
        }
        let mut r = Responses::default();
        r.delivered(false);
        r.written(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhel");
        assert_eq!(r.unanswered(), 1, "body incomplete");
        r.written(b"lo");
        assert_eq!(r.unanswered(), 0);
        let mut r = Responses::default();
        r.delivered(false);
        r.written(b"garbage\r\n\r\n");
        assert!(r.lost());
    }
}
