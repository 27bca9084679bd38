//! Routing: method and path to a handler, with the namespace resolved first (route or key) and
//! every failure turned into an OpenAI-format error. Counts each response by route and status,
//! answers browsers' CORS preflights and adds the CORS headers (`cors.rs`).
//!
//! Routes: `GET /health`, `GET /metrics`, `GET /stats`, `GET /ui` (the status page), the API
//! endpoints of `routes.rs` (OpenAI's with and without `/v1`, llama-server's own), `/admin/...`
//! (admin key), and `/ns/{namespace}/...` (the namespace's component, or the API endpoints
//! in that namespace).

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
use crate::routes::{self, Api};
use crate::state::AppState;

type Request = hyper::Request<Incoming>;

/// Serves one request; never fails (errors become responses).
pub async fn handle(state: Arc<AppState>, req: Request) -> Result<Response, Infallible> {
    let started = Instant::now();
    let origin = crate::cors::allowed_origin(&state.config.cors_origins, req.headers());
    if req.method() == Method::OPTIONS {
        let resp = crate::cors::preflight(origin, req.headers());
        state.metrics.response("preflight", resp.status().as_u16());
        return Ok(resp);
    }
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let (route, result) = dispatch(state.clone(), req, started).await;
    let mut resp = result.unwrap_or_else(ApiError::into_response);
    crate::cors::decorate(&mut resp, origin);
    state.metrics.response(route, resp.status().as_u16());
    crate::access_log::log(&state, &method, &path, resp.status(), started);
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
            Ok(()) => {
                match read_limited(req, admin_body_limit(&state, &method, rest), &state.bodies)
                    .await
                {
                    Ok(body) => crate::admin::handle(state.clone(), &method, rest, body).await,
                    Err(e) => Err(e),
                }
            }
            Err(e) => Err(e),
        };
        return ("admin", r);
    }
    match path.as_str() {
        "/health" | "/v1/health" => (
            "health",
            only(&method, &Method::GET, &path).map(|()| health(&state)),
        ),
        "/metrics" => (
            "metrics",
            observe(&state, &method, &path, req.headers()).map(|()| {
                let mut r = bytes_response(
                    StatusCode::OK,
                    "text/plain; version=0.0.4; charset=utf-8",
                    metrics::render(&state),
                );
                // llama-server's header: when this process started, in Unix seconds.
                r.headers_mut().insert(
                    "process-start-time-unix",
                    http::HeaderValue::from(state.started_unix),
                );
                r
            }),
        ),
        "/stats" => (
            "stats",
            observe(&state, &method, &path, req.headers())
                .map(|()| ok_json(&metrics::stats_json(&state))),
        ),
        "/tools" | "/tools/" => ("tools", Ok(crate::tools::handle(state, req).await)),
        "/cors-proxy" => ("cors_proxy", crate::cors_proxy::handle(state, req).await),
        "/" | "/ui" | "/ui/" if state.config.status_page => (
            "ui",
            only(&method, &Method::GET, &path).map(|()| crate::ui::page()),
        ),
        _ => match routes::lookup(&path).or_else(|| {
            (state.config.predict_route.as_deref() == Some(path.as_str()))
                .then_some((Api::Predict, ""))
        }) {
            Some((api, rest)) => {
                let ns = match auth::namespace_for_key(&state, req.headers()) {
                    Ok(ns) => ns,
                    Err(e) => return (api.label(), Err(e)),
                };
                let r = api_route(state, ns, req, (api, rest, ""), started).await;
                (api.label(), r)
            }
            None => (
                "unknown",
                Err(ApiError::not_found(format!("no route {method} {path}"))),
            ),
        },
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

/// The API endpoint `api` in namespace `ns`; `rest` is what follows the endpoint's prefix (a
/// model id, a slot id), `label` the route label (`""`, or the namespace of
/// `/ns/{namespace}/...`). llama-server's own endpoints answer errors in its shape.
async fn api_route(
    state: Arc<AppState>,
    ns: Arc<Namespace>,
    req: Request,
    (api, rest, label): (Api, &str, &str),
    started: Instant,
) -> Result<Response, ApiError> {
    let r = endpoint(state, ns, req, (api, rest, label), started).await;
    match r {
        Err(e) if api.native() => Ok(crate::llama::error_response(e)),
        Err(e) if api.anthropic() => Ok(crate::anthropic::error_response(e)),
        r => r,
    }
}

async fn endpoint(
    state: Arc<AppState>,
    ns: Arc<Namespace>,
    req: Request,
    (api, rest, label): (Api, &str, &str),
    started: Instant,
) -> Result<Response, ApiError> {
    let method = req.method().clone();
    if !api.takes(&method) {
        return Err(ApiError::method_not_allowed(&method, req.uri().path()));
    }
    match api {
        Api::Models => {
            return match rest {
                "" => Ok(openai::models::list(&state)),
                id => openai::models::get(&state, id),
            };
        }
        Api::Props => return Ok(crate::llama::props::get(&state)),
        Api::Slots => return crate::llama::slots::list(&state, &ns),
        _ => {}
    }
    let query = req.uri().query().map(str::to_string);
    let body = read_limited(req, state.config.max_body_bytes, &state.bodies).await?;
    with_body(
        state,
        ns,
        (api, rest, label),
        query.as_deref(),
        body,
        started,
    )
    .await
}

/// An API endpoint's answer to a request whose body has been read (`query`: the URL's query).
pub(crate) async fn with_body(
    state: Arc<AppState>,
    ns: Arc<Namespace>,
    (api, rest, label): (Api, &str, &str),
    query: Option<&str>,
    body: bytes::Bytes,
    started: Instant,
) -> Result<Response, ApiError> {
    match api {
        Api::Tokenize => return crate::llama::tokenize::tokenize(&state, &body),
        Api::Detokenize => return crate::llama::tokenize::detokenize(&state, &body),
        Api::ApplyTemplate => return crate::llama::template::apply(&state, &body),
        Api::SlotAction => {
            return crate::llama::slots::action(&state, &ns, rest, query, &body).await;
        }
        _ => {}
    }
    let observer = state.observer.clone();
    let mut ctx = Ctx::new(state.clone(), ns.clone(), started);
    // The prompts the routing keys cover (`memoria_http::request_tokens`): chat and completions.
    let slot = (observer.is_some() && matches!(api, Api::Chat | Api::Completions))
        .then(|| Arc::new(crate::observe::ServedSlot::default()));
    ctx.served = slot.clone();
    let r = match api {
        Api::Chat => openai::chat::handle(ctx, body).await,
        Api::ChatInputTokens => openai::chat::input_tokens(ctx, body).await,
        Api::Completions => openai::completions::handle(ctx, body).await,
        Api::Completion => crate::llama::completion::handle(ctx, body).await,
        Api::Infill => crate::llama::infill::handle(ctx, body).await,
        Api::Embedding => crate::llama::embedding::handle(ctx, body).await,
        Api::Messages => crate::anthropic::messages(ctx, body).await,
        Api::CountTokens => crate::anthropic::count_tokens(ctx, body).await,
        Api::Responses => crate::responses::handle(ctx, body).await,
        Api::Predict => crate::predict::handle(ctx, body).await,
        _ => openai::embeddings::handle(ctx, body).await,
    };
    if let (Some(o), Ok(resp)) = (observer, &r)
        && resp.status().is_success()
        && let Some(prompt) = slot.and_then(|s| s.take())
    {
        o.served(&ns, label, prompt);
    }
    r
}

/// `/ns/{namespace}/...`: the namespace's component, else its API endpoints.
async fn tenant(
    state: Arc<AppState>,
    req: Request,
    rest: &str,
    started: Instant,
) -> Result<Response, ApiError> {
    let (name, sub) = rest.split_once('/').unwrap_or((rest, ""));
    let sub = format!("/{sub}");
    let ns = auth::namespace_for_route(&state, name, req.headers())?;
    let req = match &state.router {
        Some(router) => match router.route(&ns, &sub, req) {
            Ok(served) => return Ok(served.await),
            Err(req) => req,
        },
        None => req,
    };
    if let Some((api, id)) = routes::lookup(&sub) {
        return api_route(state, ns, req, (api, id, name), started).await;
    }
    Err(ApiError::not_found(format!(
        "namespace {name:?} has no component for {sub}; its API is under /ns/{name}/v1/"
    )))
}
