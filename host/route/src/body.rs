//! Bodies: the router's own whole responses, a proxied response body that streams through frame
//! by frame while counting the request as in flight, and reading a request body under a byte
//! limit and a deadline.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::header::{self, HeaderValue};
use hyper::{HeaderMap, Response, StatusCode};
use serde_json::json;

use super::table::Inflight;
use super::upstream::Sender;

/// Every response body the router sends.
pub type RouteBody = BoxBody<Bytes, hyper::Error>;

/// A whole response with a content type.
pub fn whole(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<RouteBody> {
    let mut r = Response::new(
        Full::new(body.into())
            .map_err(|never| match never {})
            .boxed(),
    );
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

/// An OpenAI-format error object.
pub fn error(status: StatusCode, kind: &str, code: &str, message: &str) -> Response<RouteBody> {
    let v = json!({"error": {"message": message, "type": kind, "param": null, "code": code}});
    whole(status, "application/json", v.to_string())
}

/// A host's response body, passed on as it arrives; the request stays in flight until the body
/// is done or the client goes away. A body read to the end gives its connection back to the
/// host's pool; one the client abandons takes the connection with it.
pub struct Tracked {
    inner: Incoming,
    inflight: Inflight,
    connection: Option<Sender>,
}

impl Tracked {
    pub fn new(inner: Incoming, inflight: Inflight, connection: Sender) -> Tracked {
        Tracked {
            inner,
            inflight,
            connection: Some(connection),
        }
    }
}

impl Body for Tracked {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        // The server may stop polling once `is_end_stream` says so, before a final `None`.
        let done = match &polled {
            Poll::Ready(None) => true,
            Poll::Ready(Some(Ok(_))) => this.inner.is_end_stream(),
            Poll::Ready(Some(Err(_))) => {
                this.connection = None;
                false
            }
            Poll::Pending => false,
        };
        if done && let Some(c) = this.connection.take() {
            this.inflight.give_back(c);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Why a request body was not read.
#[derive(Debug)]
pub enum ReadError {
    TooLarge,
    TimedOut,
    Broken,
}

impl ReadError {
    /// The answer to the client.
    pub fn response(&self, limit: usize) -> Response<RouteBody> {
        match self {
            ReadError::TooLarge => error(
                StatusCode::PAYLOAD_TOO_LARGE,
                "invalid_request_error",
                "body_too_large",
                &format!("the request body is larger than {limit} bytes"),
            ),
            ReadError::TimedOut => error(
                StatusCode::REQUEST_TIMEOUT,
                "invalid_request_error",
                "body_timeout",
                "the request body did not arrive in time",
            ),
            ReadError::Broken => error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "bad_body",
                "the request body could not be read",
            ),
        }
    }
}

/// Reads a whole request body: at most `limit` bytes (a larger Content-Length is refused
/// before reading), within `timeout`.
pub async fn read(
    headers: &HeaderMap,
    body: Incoming,
    limit: usize,
    timeout: Duration,
) -> Result<Bytes, ReadError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > u64::try_from(limit).unwrap_or(u64::MAX)) {
        return Err(ReadError::TooLarge);
    }
    match tokio::time::timeout(timeout, Limited::new(body, limit).collect()).await {
        Err(_) => Err(ReadError::TimedOut),
        Ok(Ok(c)) => Ok(c.to_bytes()),
        Ok(Err(e))
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            Err(ReadError::TooLarge)
        }
        Ok(Err(_)) => Err(ReadError::Broken),
    }
}
