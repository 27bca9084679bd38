//! One request through the router: its own `/health` and `/metrics`, everything else proxied.
//! The body is read whole (under the limit), its prompt tokenized and keyed, the backends
//! ranked, and the request sent to the best one that accepts a connection (an idle pooled one
//! first, see `pool`); a refused (or timed out) connection marks that backend down and moves
//! on, which is safe because nothing was sent on it. The response streams back unchanged, with `x-memoria-backend` and
//! `x-memoria-prefix-blocks` added.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use memoria_model::chat::ChatTemplate;
use memoria_model::tokenizer::Tokenizer;
use serde_json::json;

use super::body::{self, RouteBody, Tracked};
use super::key;
use super::metrics::{self, Counters};
use super::table::{Inflight, Table};
use super::upstream::{self, SendError};

/// Limits on what the router accepts and waits for.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_body_bytes: usize,
    pub body_timeout: Duration,
    pub connect_timeout: Duration,
    pub response_timeout: Duration,
}

/// Everything a request needs.
pub struct Route {
    pub table: Arc<Table>,
    pub tokenizer: Arc<Tokenizer>,
    pub chat: Arc<ChatTemplate>,
    pub block_tokens: usize,
    pub limits: Limits,
    pub counters: Counters,
    /// With `--events`: the follower's counters.
    pub events: Option<Arc<super::events::EventCounters>>,
}

/// Serves one request; never fails (errors become responses).
pub async fn handle(
    route: Arc<Route>,
    req: Request<Incoming>,
) -> Result<Response<RouteBody>, Infallible> {
    let resp = match req.uri().path() {
        "/health" => health(&route),
        "/metrics" => body::whole(
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            metrics::render(&route.table, &route.counters, route.events.as_deref()),
        ),
        _ => proxy(route, req).await,
    };
    Ok(resp)
}

fn health(route: &Route) -> Response<RouteBody> {
    let up = route.table.up_count();
    let status = if up > 0 {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let v = json!({"status": if up > 0 { "ok" } else { "no backend up" },
                   "backends_up": up, "backends": route.table.backends.len()});
    body::whole(status, "application/json", v.to_string())
}

async fn proxy(route: Arc<Route>, req: Request<Incoming>) -> Response<RouteBody> {
    let (parts, incoming) = req.into_parts();
    let limits = route.limits;
    let bytes = match body::read(
        &parts.headers,
        incoming,
        limits.max_body_bytes,
        limits.body_timeout,
    )
    .await
    {
        Ok(b) => b,
        Err(e) => return e.response(limits.max_body_bytes),
    };
    let (routing_key, first_blocks, chain, prompt_blocks) =
        routing_key(&route, &parts.method, parts.uri.path(), &bytes).await;
    let Ok(uri) = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .parse::<hyper::Uri>()
    else {
        return bad_gateway(&route, "the request path cannot be forwarded");
    };
    let forwarded = super::headers::end_to_end(&parts.headers, true);
    let table = &route.table;
    let (order, matched) = table.rank_by_prefix(&routing_key, &chain);
    for (attempt, i) in order.into_iter().enumerate() {
        let Some(b) = table.backends.get(i) else {
            continue;
        };
        // With events: the blocks this backend announced (or was sent lately); without: the
        // rendezvous key's.
        let held = matched.get(i).copied().unwrap_or(0);
        let prefix_blocks = if route.events.is_some() {
            held
        } else {
            first_blocks
        };
        if attempt > 0 {
            route.counters.retries.fetch_add(1, Relaxed);
        }
        let build = || {
            let mut up = Request::new(Full::new(bytes.clone()));
            *up.method_mut() = parts.method.clone();
            *up.uri_mut() = uri.clone();
            *up.headers_mut() = forwarded.clone();
            if let Ok(h) = HeaderValue::from_str(&b.authority) {
                up.headers_mut().insert(header::HOST, h);
            }
            if !bytes.is_empty() || !matches!(parts.method, Method::GET | Method::HEAD) {
                up.headers_mut()
                    .insert(header::CONTENT_LENGTH, HeaderValue::from(bytes.len()));
            }
            up
        };
        // Open from here while the host works on it (ranking weighs it).
        let inflight = Inflight::start(table.clone(), i);
        // Held there from now on for the requests that follow (before the answer: a burst
        // sharing the prefix must see it).
        if first_blocks > 0
            && let Ok(mut r) = b.recent.lock()
        {
            r.note(routing_key, prompt_blocks, std::time::Instant::now());
        }
        // A pooled connection first. One the host closed meanwhile fails without an answer
        // (before or while the request is written): the request goes again on a fresh one.
        let mut sent = None;
        if let Some(mut pooled) = b.pool.take() {
            match upstream::send(&mut pooled, build(), limits.response_timeout).await {
                Err(SendError::Failed(_)) => {
                    b.pool.stale.fetch_add(1, Relaxed);
                }
                r => {
                    b.pool.reuses.fetch_add(1, Relaxed);
                    sent = Some((r, pooled));
                }
            }
        }
        let (result, sender) = match sent {
            Some(s) => s,
            None => {
                let mut fresh = match upstream::connect(&b.authority, limits.connect_timeout).await
                {
                    Ok(s) => s,
                    Err(e) => {
                        b.up.store(false, Relaxed);
                        b.refused.fetch_add(1, Relaxed);
                        eprintln!("memoria route: {} is out of the table: {e}", b.url);
                        continue;
                    }
                };
                b.pool.connects.fetch_add(1, Relaxed);
                let r = upstream::send(&mut fresh, build(), limits.response_timeout).await;
                (r, fresh)
            }
        };
        b.requests.fetch_add(1, Relaxed);
        let by_prefix = held > 0;
        let reason = if by_prefix {
            &route.counters.by_prefix
        } else {
            &route.counters.by_rendezvous
        };
        reason.fetch_add(1, Relaxed);
        return match result {
            Ok(resp) => respond(resp, &b.url, prefix_blocks, inflight, sender),
            Err(SendError::Failed(e)) => bad_gateway(&route, &format!("{}: {e}", b.url)),
            Err(SendError::TimedOut) => {
                route.counters.upstream_errors.fetch_add(1, Relaxed);
                body::error(
                    StatusCode::GATEWAY_TIMEOUT,
                    "server_error",
                    "backend_timeout",
                    &format!("{} did not answer in time", b.url),
                )
            }
        };
    }
    route.counters.unavailable.fetch_add(1, Relaxed);
    let mut r = body::error(
        StatusCode::SERVICE_UNAVAILABLE,
        "server_error",
        "no_backend",
        "no backend accepted the connection; retry shortly",
    );
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    r
}

/// The key and prefix-block count of a request (see `key::routing_key`), with `--events` its
/// whole routing chain, and its full blocks; tokenizing runs off the async workers.
async fn routing_key(
    route: &Arc<Route>,
    method: &Method,
    path: &str,
    bytes: &Bytes,
) -> (
    memoria_kv::BlockHash,
    usize,
    Vec<memoria_kv::BlockHash>,
    usize,
) {
    let (label, api_path) = key::label_and_path(path);
    let tokens = if method == Method::POST {
        let (r, p, b) = (route.clone(), api_path.to_string(), bytes.clone());
        tokio::task::spawn_blocking(move || {
            memoria_http::request_tokens(&r.chat, &r.tokenizer, &p, &b)
        })
        .await
        .ok()
        .flatten()
    } else {
        None
    };
    let (k, n) = key::routing_key(label, route.block_tokens, tokens.as_deref());
    let chain = match (&route.events, tokens.as_deref()) {
        (Some(_), Some(t)) => key::routing_chain(label, route.block_tokens, t),
        _ => Vec::new(),
    };
    let blocks = tokens
        .as_deref()
        .map_or(0, |t| t.len() / route.block_tokens.max(1));
    (k, n, chain, blocks)
}

fn bad_gateway(route: &Route, message: &str) -> Response<RouteBody> {
    route.counters.upstream_errors.fetch_add(1, Relaxed);
    body::error(
        StatusCode::BAD_GATEWAY,
        "server_error",
        "backend_failed",
        message,
    )
}

/// The host's response with the router's headers, its body streaming through.
fn respond(
    resp: Response<Incoming>,
    backend: &str,
    prefix_blocks: usize,
    inflight: Inflight,
    connection: upstream::Sender,
) -> Response<RouteBody> {
    let (parts, incoming) = resp.into_parts();
    let mut out = Response::new(Tracked::new(incoming, inflight, connection).boxed());
    *out.status_mut() = parts.status;
    *out.headers_mut() = super::headers::end_to_end(&parts.headers, false);
    if let Ok(v) = HeaderValue::from_str(backend) {
        out.headers_mut().insert("x-memoria-backend", v);
    }
    out.headers_mut()
        .insert("x-memoria-prefix-blocks", HeaderValue::from(prefix_blocks));
    out
}
