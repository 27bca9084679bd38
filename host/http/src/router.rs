//! Routing: method and path to a handler, with the namespace resolved first (route or key) and
//! every failure turned into an OpenAI-format error. Counts each response by route and status.
//!
//! Routes: `GET /health`, `GET /metrics`, `GET /stats`, `GET /ui` (the status page),
//! `GET /v1/models[/{id}]`,
//! `POST /v1/chat/completions`, `POST /v1/completions`, `POST /v1/embeddings`,
//! `POST /tokenize`, `POST /detokenize`, `/admin/...` (admin key), and `/ns/{namespace}/...`
//! (the namespace's component, or the `/v1` routes above in that namespace).

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use http::{HeaderMap, Method, StatusCode};
use hyper::body::Incoming;
use memoria_tenant::Namespace;
use serde_json::json;

use crate::auth;
use crate::body::{Response, bytes_response, json_response, ok_json, read_limited};
use crate::error::ApiError;
use crate::metrics;
use crate::openai::{self, Ctx};
use crate::state::AppState;

type Request = hyper::Request<Incoming>;

/// Serves one request; never fails (errors become responses).
pub async fn handle(state: Arc<AppState>, req: Request) -> Result<Response, Infallible> {
    let started = Instant::now();
    let (route, result) = dispatch(state.clone(), req, started).await;
    let resp = result.unwrap_or_else(ApiError::into_response);
    state.metrics.response(route, resp.status().as_u16());
    Ok(resp)
}

async fn dispatch(
    state: Arc<AppState>,
    req: Request,
    started: Instant,
) -> (&'static str, Result<Response, ApiError>) {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    if let Some(rest) = path.strip_prefix("/ns/") {
        return ("tenant", tenant(state, req, rest, started).await);
    }
    if let Some(rest) = path.strip_prefix("/admin/") {
        let r = match auth::check_admin(&state, req.headers()) {
            Ok(()) => match read_limited(req, admin_body_limit(&state, &method, rest)).await {
                Ok(body) => crate::admin::handle(state.clone(), &method, rest, body).await,
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        };
        return ("admin", r);
    }
    match path.as_str() {
        "/health" => (
            "health",
            only(&method, &Method::GET, &path).map(|()| health(&state)),
        ),
        "/metrics" => (
            "metrics",
            observe(&state, &method, &path, req.headers()).map(|()| {
                bytes_response(
                    StatusCode::OK,
                    "text/plain; version=0.0.4; charset=utf-8",
                    metrics::render(&state),
                )
            }),
        ),
        "/stats" => (
            "stats",
            observe(&state, &method, &path, req.headers())
                .map(|()| ok_json(&metrics::stats_json(&state))),
        ),
        "/ui" | "/ui/" if state.config.status_page => (
            "ui",
            only(&method, &Method::GET, &path).map(|()| crate::ui::page()),
        ),
        _ if path == "/v1"
            || path.starts_with("/v1/")
            || path == "/tokenize"
            || path == "/detokenize" =>
        {
            let ns = match auth::namespace_for_key(&state, req.headers()) {
                Ok(ns) => ns,
                Err(e) => return (route_name(&path), Err(e)),
            };
            openai_route(state, ns, req, ("", &path), started).await
        }
        _ => (
            "unknown",
            Err(ApiError::not_found(format!("no route {method} {path}"))),
        ),
    }
}

/// Component uploads may be larger than API requests.
fn admin_body_limit(state: &AppState, method: &Method, rest: &str) -> usize {
    if crate::components::is_upload(method, rest) {
        state.config.max_component_bytes
    } else {
        state.config.max_body_bytes
    }
}

fn route_name(path: &str) -> &'static str {
    match path.trim_end_matches('/') {
        "/v1/chat/completions" => "chat",
        "/v1/completions" => "completions",
        "/v1/embeddings" => "embeddings",
        "/tokenize" => "tokenize",
        "/detokenize" => "detokenize",
        p if p == "/v1/models" || p.starts_with("/v1/models/") => "models",
        _ => "unknown",
    }
}

fn only(method: &Method, want: &Method, path: &str) -> Result<(), ApiError> {
    if method == want {
        Ok(())
    } else {
        Err(ApiError::method_not_allowed(method, path))
    }
}

/// `/metrics` and `/stats`: open on an open host; with keys configured, the admin key.
fn observe(
    state: &AppState,
    method: &Method,
    path: &str,
    headers: &HeaderMap,
) -> Result<(), ApiError> {
    only(method, &Method::GET, path)?;
    if state.auth_required() {
        auth::check_admin(state, headers)?;
    }
    Ok(())
}

fn health(state: &AppState) -> Response {
    if state.shutting_down.load(Relaxed) {
        json_response(
            StatusCode::SERVICE_UNAVAILABLE,
            &json!({"status": "shutting down"}),
        )
    } else if !state.engine.is_up() {
        let mut r = json_response(
            StatusCode::SERVICE_UNAVAILABLE,
            &json!({"status": "engine restarting"}),
        );
        r.headers_mut().insert(
            http::header::RETRY_AFTER,
            http::HeaderValue::from_static("1"),
        );
        r
    } else {
        ok_json(&json!({"status": "ok"}))
    }
}

/// The OpenAI routes in namespace `ns`; `path` starts with `/v1/` (or is a tokenize route),
/// `label` is the route label (`""`, or the namespace of `/ns/{namespace}/...`).
async fn openai_route(
    state: Arc<AppState>,
    ns: Arc<Namespace>,
    req: Request,
    (label, path): (&str, &str),
    started: Instant,
) -> (&'static str, Result<Response, ApiError>) {
    let route = route_name(path);
    let method = req.method().clone();
    let get = method == Method::GET;
    let r = match (route, get) {
        ("models", true) => match path.trim_end_matches('/').strip_prefix("/v1/models/") {
            Some(id) => openai::models::get(&state, id),
            None => Ok(openai::models::list(&state)),
        },
        ("unknown", _) => Err(ApiError::not_found(format!("no route {method} {path}"))),
        ("models", false) | (_, true) => Err(ApiError::method_not_allowed(&method, path)),
        _ if method != Method::POST => Err(ApiError::method_not_allowed(&method, path)),
        _ => match read_limited(req, state.config.max_body_bytes).await {
            Err(e) => Err(e),
            Ok(body) => match route {
                "tokenize" => openai::tokenize::tokenize(&state, &body),
                "detokenize" => openai::tokenize::detokenize(&state, &body),
                _ => {
                    let observer = state.observer.clone();
                    let ctx = Ctx::new(state.clone(), ns.clone(), started);
                    let r = match route {
                        "chat" => openai::chat::handle(ctx, body.clone()).await,
                        "completions" => openai::completions::handle(ctx, body.clone()).await,
                        _ => openai::embeddings::handle(ctx, body.clone()).await,
                    };
                    if let (Some(o), Ok(resp)) = (observer, &r)
                        && matches!(route, "chat" | "completions")
                        && resp.status().is_success()
                    {
                        o.served(&ns, label, path, &body);
                    }
                    r
                }
            },
        },
    };
    (route, r)
}

/// `/ns/{namespace}/...`: the namespace's component, else its `/v1` routes.
async fn tenant(
    state: Arc<AppState>,
    req: Request,
    rest: &str,
    started: Instant,
) -> Result<Response, ApiError> {
    let (name, sub) = rest.split_once('/').unwrap_or((rest, ""));
    let sub = format!("/{sub}");
    let ns = auth::namespace_for_route(&state, name, req.headers())?;
    if let Some(router) = state.router.clone()
        && router.has_component(&ns, &sub)
    {
        return Ok(router.handle(ns, sub, req).await);
    }
    if sub.starts_with("/v1/") {
        return openai_route(state, ns, req, (name, &sub), started).await.1;
    }
    Err(ApiError::not_found(format!(
        "namespace {name:?} has no component for {sub}; its OpenAI routes are under /ns/{name}/v1/"
    )))
}
