//! The HTTP/1.1 message framing a request follows, as [`Framed`](crate::framing::Framed)
//! checks it: a head's check (the length or chunked coding of its body; the refusal of a
//! malformed, oversized or ambiguous head) and the byte machine of a chunked body, which the
//! response side (`framing_out.rs`) follows too.

use crate::error::ApiError;
use crate::preface::{Head, classify, refusal_for};
/// Where the reader is in the current message.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum State {
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
pub(crate) fn check_head(buf: &[u8], max: usize) -> Result<Option<(usize, State, bool)>, ApiError> {
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
