//! Request and response bodies: reading a request body under a byte limit (413 past it, checked
//! against Content-Length first so nothing is read) and within the bytes all bodies being
//! received may hold ([`BodyBudget`], 503 past it), whole JSON/text responses, and a streamed
//! body fed by a bounded channel (SSE). Invariant: no body is buffered past either bound, and a
//! large body's memory goes back to the kernel when it is dropped.

use std::pin::Pin;
use std::task::{Context, Poll};

use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::Relaxed;

use bytes::{Bytes, BytesMut};
use http::{HeaderValue, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, Incoming};
use memoria_runtime::{BodyError, HttpBody};
use tokio::sync::mpsc;

use crate::error::ApiError;

/// Every response the server sends.
pub type Response = hyper::Response<HttpBody>;

/// A whole body.
pub fn full(bytes: impl Into<Bytes>) -> HttpBody {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// A response with a whole body and a content type.
pub fn bytes_response(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response {
    let mut resp = hyper::Response::new(full(body));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}

/// A JSON response.
pub fn json_response(status: StatusCode, value: &serde_json::Value) -> Response {
    bytes_response(status, "application/json", value.to_string())
}

/// 200 with JSON.
pub fn ok_json(value: &serde_json::Value) -> Response {
    json_response(StatusCode::OK, value)
}

/// Bytes of request bodies being received at once, across connections: a body's bytes are
/// taken from it as they arrive and given back when the body is read (or dropped), so stalled
/// uploads cannot hold more than `max` between them; a body past it is refused with 503.
#[derive(Debug)]
pub struct BodyBudget {
    used: AtomicUsize,
    max: usize,
}

impl BodyBudget {
    pub fn new(max: usize) -> BodyBudget {
        BodyBudget {
            used: AtomicUsize::new(0),
            max,
        }
    }

    /// Bytes held by bodies being received.
    pub fn used(&self) -> usize {
        self.used.load(Relaxed)
    }

    /// The most they may hold.
    pub fn max(&self) -> usize {
        self.max
    }

    fn try_take(&self, n: usize) -> bool {
        self.used
            .fetch_update(Relaxed, Relaxed, |u| {
                u.checked_add(n).filter(|&t| t <= self.max)
            })
            .is_ok()
    }
}

/// Bytes taken from a [`BodyBudget`], given back on drop.
struct Held<'a> {
    budget: &'a BodyBudget,
    bytes: usize,
    /// The body was read whole (its buffer lives on with the request).
    read: bool,
    /// Its buffer is on the heap (not [`Receiving::Mapped`]).
    on_heap: bool,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        let before = self.budget.used.fetch_sub(self.bytes, Relaxed);
        // The last of a burst of large bodies was abandoned (its buffer was dropped first):
        // memory the allocator keeps for reuse goes back to the system.
        if self.on_heap && !self.read && before == self.bytes && self.bytes >= TRIM_AFTER_BYTES {
            trim_heap();
        }
    }
}

/// Abandoned bodies at least this large give the heap back when the last one being received
/// ends.
const TRIM_AFTER_BYTES: usize = 1 << 20;

/// Bodies of at least this many bytes (declared, or received so far) are received into a
/// mapping of their own ([`Receiving::Mapped`]).
const MAP_FROM_BYTES: usize = 1 << 20;

/// Where a body's bytes go as they arrive. A large body (declared so, or a chunked one once it
/// has grown that large) gets its own anonymous mapping: its pages are touched only as bytes
/// arrive and go back to the kernel the moment the body (or the request that read it) is
/// dropped, whichever thread drops it. On the heap it could stay resident after its free: a
/// thread arena's top is never trimmed, and this process keeps freed heap memory on purpose
/// (`memoria::heap`).
enum Receiving {
    Heap(BytesMut),
    Mapped { map: memmap2::MmapMut, len: usize },
}

impl Receiving {
    /// A buffer for a body of `declared` bytes (`None`: chunked), or `None` where the mapping
    /// cannot be made.
    fn new(declared: Option<usize>) -> Option<Receiving> {
        match declared {
            Some(n) if n >= MAP_FROM_BYTES => memmap2::MmapMut::map_anon(n)
                .ok()
                .map(|map| Receiving::Mapped { map, len: 0 }),
            Some(n) => Some(Receiving::Heap(BytesMut::with_capacity(n))),
            None => Some(Receiving::Heap(BytesMut::new())),
        }
    }

    /// Moves a body on the heap that has reached [`MAP_FROM_BYTES`] (a chunked one: a declared
    /// one that large was mapped from the start) into a mapping of `limit` bytes, its most:
    /// pages past what arrives are never touched. It stays on the heap where the mapping
    /// cannot be made.
    fn promote(&mut self, total: usize, limit: usize) {
        let Receiving::Heap(b) = self else { return };
        if total < MAP_FROM_BYTES || total > limit {
            return;
        }
        if let Ok(mut map) = memmap2::MmapMut::map_anon(limit) {
            let len = b.len();
            map[..len].copy_from_slice(b);
            *self = Receiving::Mapped { map, len };
        }
    }

    fn len(&self) -> usize {
        match self {
            Receiving::Heap(b) => b.len(),
            Receiving::Mapped { len, .. } => *len,
        }
    }

    /// Appends `data`; `false` (nothing appended) where it would pass a mapping's end, i.e.
    /// the body is longer than it declared.
    fn extend(&mut self, data: &[u8]) -> bool {
        match self {
            Receiving::Heap(b) => b.extend_from_slice(data),
            Receiving::Mapped { map, len } => {
                let Some(dst) = len
                    .checked_add(data.len())
                    .and_then(|end| map.get_mut(*len..end))
                else {
                    return false;
                };
                dst.copy_from_slice(data);
                *len += data.len();
            }
        }
        true
    }

    fn freeze(self) -> Bytes {
        match self {
            Receiving::Heap(b) => b.freeze(),
            Receiving::Mapped { map, len } => Bytes::from_owner(map).slice(..len),
        }
    }
}

/// Returns the heap's free memory to the system. Each call follows a body of at least
/// [`TRIM_AFTER_BYTES`] received and abandoned, so the trims are bounded by the bytes clients
/// send; a time limit instead could skip the trim after the last body of a burst and keep its
/// memory.
fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free heap pages; it takes malloc's own locks.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Reads the whole request body, refusing more than `limit` bytes with 413 and a body that
/// does not fit what `budget` has left with 503.
pub async fn read_limited(
    req: hyper::Request<Incoming>,
    limit: usize,
    budget: &BodyBudget,
) -> Result<Bytes, ApiError> {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(ApiError::too_large(limit));
    }
    let busy = || {
        ApiError::unavailable(format!(
            "the server is receiving too many request bodies at once (server.max_body_memory_mb = {}); retry shortly",
            budget.max() >> 20
        ))
        .with_code("body_memory_exhausted")
    };
    // A declared length is taken whole before a byte is read; a chunked body as it arrives.
    let mut held = Held {
        budget,
        bytes: 0,
        read: false,
        on_heap: true,
    };
    let declared = declared.map(|n| usize::try_from(n).unwrap_or(usize::MAX));
    if let Some(n) = declared {
        if !budget.try_take(n) {
            return Err(busy());
        }
        held.bytes = n;
    }
    let Some(mut buf) = Receiving::new(declared) else {
        return Err(busy());
    };
    // A body promoted to a mapping later has used the heap: its abandonment still trims.
    held.on_heap = matches!(buf, Receiving::Heap(_));
    let mut body = req.into_body();
    while let Some(frame) = body.frame().await {
        let frame = match frame {
            Ok(f) => f,
            Err(e) if timed_out(&e) => return Err(ApiError::request_timeout()),
            Err(e) => {
                return Err(ApiError::bad_request(format!(
                    "reading the request body: {e}"
                )));
            }
        };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        let total = buf.len().saturating_add(data.len());
        if total > limit {
            return Err(ApiError::too_large(limit));
        }
        if total > held.bytes {
            let more = total - held.bytes;
            if !budget.try_take(more) {
                return Err(busy());
            }
            held.bytes = total;
        }
        buf.promote(total, limit);
        if !buf.extend(&data) {
            return Err(ApiError::bad_request(
                "the request body is longer than its Content-Length",
            ));
        }
    }
    held.read = true;
    Ok(buf.freeze())
}

/// Whether a body error comes from the connection's body timeout (`framing.rs`).
fn timed_out(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if err
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut)
            || err.is::<crate::framing::BodyTimeout>()
        {
            return true;
        }
        cur = err.source();
    }
    false
}

/// A streamed body: frames arrive on a bounded channel; it ends when the sender is dropped.
/// Dropping the body (the client went away) closes the channel, which the producer sees.
pub struct ChannelBody {
    rx: mpsc::Receiver<Bytes>,
}

impl ChannelBody {
    /// A body and the sender that feeds it (`depth` chunks may wait unsent).
    pub fn channel(depth: usize) -> (mpsc::Sender<Bytes>, HttpBody) {
        let (tx, rx) = mpsc::channel(depth.max(1));
        (tx, ChannelBody { rx }.boxed_unsync())
    }
}

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        self.rx.poll_recv(cx).map(|b| b.map(|b| Ok(Frame::data(b))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_declared_body_is_received_into_its_own_mapping_whole_and_no_further() {
        let n = MAP_FROM_BYTES + 3;
        let mut buf = Receiving::new(Some(n)).expect("an anonymous mapping");
        assert!(matches!(buf, Receiving::Mapped { .. }));
        let data: Vec<u8> = (0..n).map(|i| (i % 251) as u8).collect();
        for part in data.chunks(65_537) {
            assert!(buf.extend(part));
        }
        assert_eq!(buf.len(), n);
        assert!(!buf.extend(b"x"), "one byte past the declared length");
        assert_eq!(buf.freeze(), data);
    }

    #[test]
    fn a_chunked_body_moves_to_a_mapping_when_it_reaches_a_mebibyte() {
        let limit = 4 * MAP_FROM_BYTES;
        let mut buf = Receiving::new(None).expect("a buffer");
        let data: Vec<u8> = (0..2 * MAP_FROM_BYTES).map(|i| (i % 253) as u8).collect();
        let mut total = 0;
        for part in data.chunks(100_003) {
            total += part.len();
            buf.promote(total, limit);
            assert_eq!(
                matches!(buf, Receiving::Mapped { .. }),
                total >= MAP_FROM_BYTES,
                "at {total} bytes"
            );
            assert!(buf.extend(part));
        }
        assert_eq!(buf.freeze(), data);
    }

    #[test]
    fn small_bodies_stay_on_the_heap() {
        for declared in [Some(MAP_FROM_BYTES - 1), None] {
            let mut buf = Receiving::new(declared).expect("a buffer");
            assert!(matches!(buf, Receiving::Heap(_)));
            assert!(buf.extend(b"{}"));
            assert_eq!(buf.freeze(), &b"{}"[..]);
        }
    }
}
