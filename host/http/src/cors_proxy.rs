//! `GET|POST /cors-proxy?url=...`: llama-server's CORS proxy, which its web UI uses to reach
//! MCP servers a browser page cannot call directly. It makes the host fetch any URL it is given,
//! so it is off unless the operator passes `--ui-mcp-proxy` (403 `feature_disabled` otherwise)
//! and, on a keyed host, needs an API key like every API route.
//!
//! What goes out: the request's method and body, and only the headers the client names with the
//! `x-llama-server-proxy-header-` prefix (its own `Authorization`, cookies and keys are never
//! forwarded). Only `http` and `https` URLs without credentials; redirects are followed without
//! passing the forwarded `Authorization` on to another host. What comes back: the upstream's
//! status, headers (less hop-by-hop ones, its CORS headers, which this host sets itself, and
//! `Set-Cookie`, which would land on this host's origin) and body, streamed, cut off past
//! [`MAX_RESPONSE_BYTES`]; connecting is bounded by [`CONNECT_TIMEOUT`], each read by
//! [`READ_TIMEOUT`].

use std::io::Read;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use hyper::body::Incoming;
use ureq::config::RedirectAuthHeaders;

use crate::body::{ChannelBody, Response, read_limited};
use crate::error::ApiError;
use crate::state::AppState;

/// The prefix that marks a request header to forward (the rest of its name is the header sent).
const FORWARD_PREFIX: &str = "x-llama-server-proxy-header-";
/// How long connecting to the target may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the target may leave the response (its head, then each read of its body) waiting,
/// as llama-server's 10 minutes.
pub const READ_TIMEOUT: Duration = Duration::from_secs(600);
/// Largest response body passed on; the stream ends there.
pub const MAX_RESPONSE_BYTES: u64 = 64 << 20;
/// Bytes read from the target at a time.
const CHUNK: usize = 16 << 10;

/// Serves `/cors-proxy`.
pub async fn handle(
    state: Arc<AppState>,
    req: hyper::Request<Incoming>,
) -> Result<Response, ApiError> {
    if !state.config.cors_proxy {
        let mut e = ApiError::forbidden(
            "this feature is disabled (start the server with --ui-mcp-proxy to turn the CORS proxy on)",
        );
        e.kind = "feature_disabled";
        return Err(e);
    }
    crate::auth::check_host_key(&state, req.headers())?;
    let method = req.method().clone();
    if method != Method::GET && method != Method::POST {
        return Err(ApiError::method_not_allowed(&method, "/cors-proxy"));
    }
    let target = target_url(req.uri().query())?;
    let headers = forwarded_headers(req.headers());
    let payload = read_limited(req, state.config.max_body_bytes, &state.bodies).await?;
    let (head_tx, head_rx) = tokio::sync::oneshot::channel();
    let (body_tx, body) = ChannelBody::channel(8);
    tokio::task::spawn_blocking(move || {
        fetch(method, &target, &headers, &payload, head_tx, &body_tx);
    });
    let (status, headers) = head_rx
        .await
        .map_err(|_| ApiError::internal("the CORS proxy stopped before the target answered"))??;
    let mut resp = hyper::Response::new(body);
    *resp.status_mut() = status;
    *resp.headers_mut() = headers;
    Ok(resp)
}

/// The `url` query parameter, checked: `http` or `https`, a host, no user or password.
pub fn target_url(query: Option<&str>) -> Result<String, ApiError> {
    let raw = query
        .unwrap_or("")
        .split('&')
        .find_map(|pair| pair.strip_prefix("url="))
        .ok_or_else(|| ApiError::invalid("url", "missing the `url` query parameter"))?;
    let url = percent_decode(raw)
        .ok_or_else(|| ApiError::invalid("url", "`url` is not valid percent-encoded UTF-8"))?;
    let uri: http::Uri = url
        .parse()
        .map_err(|e| ApiError::invalid("url", format!("invalid target URL: {e}")))?;
    match uri.scheme_str() {
        Some("http" | "https") => {}
        Some(s) => {
            return Err(ApiError::invalid(
                "url",
                format!("unsupported URL scheme in target URL: {s} (http and https only)"),
            ));
        }
        None => {
            return Err(ApiError::invalid(
                "url",
                "invalid target URL: missing scheme",
            ));
        }
    }
    let Some(authority) = uri.authority() else {
        return Err(ApiError::invalid("url", "invalid target URL: missing host"));
    };
    if authority.as_str().contains('@') {
        return Err(ApiError::invalid(
            "url",
            "authentication in target URL is not supported",
        ));
    }
    if authority.host().is_empty() {
        return Err(ApiError::invalid("url", "invalid target URL: missing host"));
    }
    Ok(url)
}

/// `%XX` escapes decoded (None: a bad escape or bytes that are not UTF-8).
fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The headers the client asked to forward (`x-llama-server-proxy-header-NAME: V` → `NAME: V`),
/// less those the proxy sets itself (framing, `Host`, `Accept-Encoding`: bodies pass through
/// undecoded).
pub fn forwarded_headers(headers: &HeaderMap) -> Vec<(HeaderName, HeaderValue)> {
    headers
        .iter()
        .filter_map(|(name, value)| {
            let inner = name.as_str().strip_prefix(FORWARD_PREFIX)?;
            let inner = HeaderName::from_bytes(inner.as_bytes()).ok()?;
            let skip = matches!(
                inner.as_str(),
                "host" | "content-length" | "transfer-encoding" | "accept-encoding" | "connection"
            );
            (!skip).then(|| (inner, value.clone()))
        })
        .collect()
}

/// Whether a response header of the target is passed back to the client.
fn passed_back(name: &HeaderName) -> bool {
    let n = name.as_str();
    !(matches!(
        n,
        "server"
            | "transfer-encoding"
            | "content-length"
            | "keep-alive"
            | "connection"
            | "proxy-authenticate"
            | "trailer"
            | "upgrade"
            | "set-cookie"
    ) || n.starts_with("access-control-"))
}

type Head = Result<(StatusCode, HeaderMap), ApiError>;

/// Makes the request (on a blocking thread), sends its status and headers to `head`, then
/// streams its body into `body` until the end, an error, [`MAX_RESPONSE_BYTES`], or the client
/// going away.
fn fetch(
    method: Method,
    url: &str,
    headers: &[(HeaderName, HeaderValue)],
    payload: &[u8],
    head: tokio::sync::oneshot::Sender<Head>,
    body: &tokio::sync::mpsc::Sender<Bytes>,
) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .redirect_auth_headers(RedirectAuthHeaders::SameHost)
        .timeout_connect(Some(CONNECT_TIMEOUT))
        .timeout_recv_response(Some(READ_TIMEOUT))
        .timeout_per_read(Some(READ_TIMEOUT))
        .user_agent(concat!("memoria/", env!("CARGO_PKG_VERSION")))
        .build()
        .into();
    let result = if method == Method::POST {
        let mut rb = agent.post(url);
        for (k, v) in headers {
            rb = rb.header(k, v);
        }
        rb.send(payload)
    } else {
        let mut rb = agent.get(url);
        for (k, v) in headers {
            rb = rb.header(k, v);
        }
        rb.call()
    };
    let resp = match result {
        Ok(r) => r,
        Err(e) => {
            let mut err = ApiError::internal(format!("proxy error: {e}"));
            err.status = StatusCode::BAD_GATEWAY;
            let _ = head.send(Err(err));
            return;
        }
    };
    let mut out = HeaderMap::new();
    for (k, v) in resp.headers() {
        if passed_back(k) {
            out.append(k.clone(), v.clone());
        }
    }
    if head.send(Ok((resp.status(), out))).is_err() {
        return;
    }
    let mut reader = resp
        .into_body()
        .into_with_config()
        .limit(MAX_RESPONSE_BYTES)
        .reader();
    let mut buf = vec![0u8; CHUNK];
    loop {
        match reader.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if body
                    .blocking_send(Bytes::copy_from_slice(&buf[..n]))
                    .is_err()
                {
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked() {
        assert_eq!(
            target_url(Some("url=http://127.0.0.1:8080/models")).unwrap(),
            "http://127.0.0.1:8080/models"
        );
        assert_eq!(
            target_url(Some("x=1&url=https%3A%2F%2Fexample.com%2Fa%3Fb%3D1")).unwrap(),
            "https://example.com/a?b=1"
        );
        for bad in [
            None,
            Some("url=file:///etc/passwd"),
            Some("url=ftp://example.com/"),
            Some("url=http://user:pw@example.com/"),
            Some("url=/relative"),
            Some("url=%zz"),
        ] {
            assert_eq!(target_url(bad).unwrap_err().status, StatusCode::BAD_REQUEST);
        }
    }

    #[test]
    fn only_prefixed_headers_go_out() {
        let mut h = HeaderMap::new();
        h.insert("authorization", HeaderValue::from_static("Bearer k"));
        h.insert("cookie", HeaderValue::from_static("s=1"));
        h.insert(
            "x-llama-server-proxy-header-authorization",
            HeaderValue::from_static("Bearer explicit"),
        );
        h.insert(
            "x-llama-server-proxy-header-host",
            HeaderValue::from_static("evil"),
        );
        let out = forwarded_headers(&h);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].0.as_str(), "authorization");
        assert_eq!(out[0].1, "Bearer explicit");
    }
}
