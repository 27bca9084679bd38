//! The router's side towards the hosts: HTTP/1.1 connections (hyper's client connection, driven
//! by its own task, reused through `pool`), a bounded connect, a bounded wait for the response
//! head, and the response body handed on as it arrives, chunk by chunk.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// A connection ready for one request.
pub type Sender = SendRequest<Full<Bytes>>;

/// Connects to `authority` (`host:port`) within `timeout`. An error means nothing was sent, so
/// the caller may try another host.
pub async fn connect(authority: &str, timeout: Duration) -> Result<Sender, String> {
    let stream = match tokio::time::timeout(timeout, TcpStream::connect(authority)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return Err(format!("connecting to {authority}: {e}")),
        Err(_) => return Err(format!("connecting to {authority}: timed out")),
    };
    let _ = stream.set_nodelay(true);
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| format!("{authority}: {e}"))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(sender)
}

/// Sends `req` and waits up to `timeout` for the response head.
pub async fn send(
    sender: &mut Sender,
    req: Request<Full<Bytes>>,
    timeout: Duration,
) -> Result<Response<Incoming>, SendError> {
    match tokio::time::timeout(timeout, sender.send_request(req)).await {
        Ok(Ok(r)) => Ok(r),
        Ok(Err(e)) => Err(SendError::Failed(e.to_string())),
        Err(_) => Err(SendError::TimedOut),
    }
}

/// Why an exchange gave no response head.
#[derive(Debug)]
pub enum SendError {
    Failed(String),
    TimedOut,
}

/// The most bytes a poll reads from a host (`/stats` is a few KiB).
const MAX_POLL_BYTES: usize = 1 << 20;

/// `GET path` on `authority`, with an optional bearer key, the whole exchange within `timeout`.
pub async fn get(
    authority: &str,
    path: &str,
    bearer: Option<&str>,
    timeout: Duration,
) -> Result<(StatusCode, Bytes), String> {
    let exchange = async {
        let mut sender = connect(authority, timeout).await?;
        let mut req = Request::get(path).header(hyper::header::HOST, authority);
        if let Some(k) = bearer {
            req = req.header(hyper::header::AUTHORIZATION, format!("Bearer {k}"));
        }
        let req = req
            .body(Full::new(Bytes::new()))
            .map_err(|e| e.to_string())?;
        let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
        let status = resp.status();
        let body = Limited::new(resp.into_body(), MAX_POLL_BYTES)
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        Ok((status, body))
    };
    match tokio::time::timeout(timeout, exchange).await {
        Ok(r) => r,
        Err(_) => Err(format!("GET {path} on {authority}: timed out")),
    }
}
