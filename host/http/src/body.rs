//! Request and response bodies: reading a request body under a byte limit (413 past it, checked
//! against Content-Length first so nothing is read), whole JSON/text responses, and a streamed
//! body fed by a bounded channel (SSE). Invariant: no body is buffered past the limit.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderValue, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
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

/// Reads the whole request body, refusing more than `limit` bytes with 413.
pub async fn read_limited(req: hyper::Request<Incoming>, limit: usize) -> Result<Bytes, ApiError> {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(ApiError::too_large(limit));
    }
    match Limited::new(req.into_body(), limit).collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(ApiError::too_large(limit)),
        Err(e) if timed_out(e.as_ref()) => Err(ApiError::request_timeout()),
        Err(e) => Err(ApiError::bad_request(format!(
            "reading the request body: {e}"
        ))),
    }
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
