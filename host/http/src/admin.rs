//! The admin API under `/admin/`, behind the admin key: live sessions (list, inspect, cancel),
//! saving a prefix as a named session and restoring it into the hot cache (engines started with
//! a store), warming and pinning a prefix, namespaces and their admission state, config reload
//! (namespaces and their configured components), and the component routes (`components.rs`).
//! Invariant: nothing here runs before `check_admin` passed.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use bytes::Bytes;
use http::Method;
use memoria_kv::PinLevel;
use memoria_model::chat::ChatMessage;
use memoria_sched::SessionId;
use serde::Deserialize;
use serde_json::json;

use crate::body::{Response, ok_json};
use crate::error::ApiError;
use crate::state::AppState;

/// `POST /admin/warm`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WarmRequest {
    namespace: Option<String>,
    /// Text, tokenized with BOS and special tokens parsed.
    text: Option<String>,
    /// A conversation prefix rendered with the chat template (no generation prompt).
    messages: Option<Vec<ChatMessage>>,
    /// Pin with this eviction priority instead of pinning outright.
    priority: Option<i32>,
    /// Unpin after this many seconds.
    ttl_s: Option<u64>,
}

/// `POST /admin/sessions/save` and `/admin/sessions/restore`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SessionRequest {
    namespace: Option<String>,
    name: String,
    text: Option<String>,
    messages: Option<Vec<ChatMessage>>,
}

/// Dispatches an admin request (`rest` is the path after `/admin/`).
pub async fn handle(
    state: Arc<AppState>,
    method: &Method,
    rest: &str,
    body: Bytes,
) -> Result<Response, ApiError> {
    let parts: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    match (method, parts.as_slice()) {
        (&Method::GET, ["sessions"]) => Ok(list_sessions(&state)),
        (&Method::GET, ["sessions", id]) => inspect_session(&state, id).await,
        (&Method::DELETE, ["sessions", id]) => close_session(&state, id).await,
        (&Method::POST, ["sessions", "save"]) => save(&state, &body).await,
        (&Method::POST, ["sessions", "restore"]) => restore(&state, &body).await,
        (&Method::POST, ["warm"]) => warm(&state, &body).await,
        (&Method::GET, ["namespaces"]) => Ok(namespaces(&state)),
        (&Method::POST, ["reload"]) => reload(&state).await,
        (_, ["namespaces", ns, tail @ ..]) if !tail.is_empty() => {
            crate::components::handle(&state, method, ns, tail, body).await
        }
        (_, ["sessions"] | ["sessions", _] | ["warm"] | ["namespaces"] | ["reload"]) => Err(
            ApiError::method_not_allowed(method, &format!("/admin/{rest}")),
        ),
        _ => Err(ApiError::not_found(format!("no admin route /admin/{rest}"))),
    }
}

fn parse_id(id: &str) -> Result<SessionId, ApiError> {
    id.parse::<u64>()
        .map(SessionId)
        .map_err(|_| ApiError::invalid("id", format!("session id {id:?} is not a number")))
}

fn list_sessions(state: &AppState) -> Response {
    let data: Vec<_> = state
        .sessions
        .list()
        .iter()
        .map(|(id, e)| e.to_json(*id))
        .collect();
    ok_json(&json!({"object": "list", "data": data}))
}

async fn inspect_session(state: &AppState, id: &str) -> Result<Response, ApiError> {
    let id = parse_id(id)?;
    let entry = state
        .sessions
        .get(id)
        .ok_or_else(|| ApiError::not_found(format!("session {} is not live", id.0)))?;
    let info = state.engine.info(entry.ns_id, id).await?;
    let mut v = entry.to_json(id);
    v["context_tokens"] = json!(info.len);
    v["pending_tokens"] = json!(info.pending);
    v["busy"] = json!(info.busy);
    Ok(ok_json(&v))
}

async fn close_session(state: &AppState, id: &str) -> Result<Response, ApiError> {
    let id = parse_id(id)?;
    let entry = state
        .sessions
        .get(id)
        .ok_or_else(|| ApiError::not_found(format!("session {} is not live", id.0)))?;
    state.engine.close(entry.ns_id, id).await?;
    Ok(ok_json(&json!({"id": id.0, "closed": true})))
}

/// The longest pin `POST /admin/warm` accepts: one year.
const MAX_WARM_TTL_S: u64 = 365 * 24 * 3600;

async fn warm(state: &AppState, body: &Bytes) -> Result<Response, ApiError> {
    let req: WarmRequest = crate::openai::parse_json(body)?;
    if req.ttl_s.is_some_and(|t| t > MAX_WARM_TTL_S) {
        return Err(ApiError::invalid(
            "ttl_s",
            format!(
                "ttl_s must be at most {MAX_WARM_TTL_S} seconds (one year); omit it to pin without expiry"
            ),
        ));
    }
    let ns = named_namespace(state, req.namespace)?;
    let tokens = prefix_tokens(state, req.text, req.messages)?;
    let pin = req.priority.map_or(PinLevel::Pinned, PinLevel::Priority);
    let info = state
        .engine
        .warm(ns.id, tokens, pin, req.ttl_s.map(Duration::from_secs))
        .await?;
    Ok(ok_json(&json!({
        "namespace": ns.name,
        "tokens": info.tokens,
        "cached_tokens": info.cached_tokens,
        "blocks_pinned": info.blocks_pinned,
    })))
}

fn namespaces(state: &AppState) -> Response {
    let tenants = state.tenants();
    let data: Vec<_> = tenants
        .iter()
        .map(|ns| {
            let gate = state.admission.gate(&ns.name, &ns.spec.limits);
            let l = &ns.spec.limits;
            json!({
                "name": ns.name,
                "id": ns.id.0,
                "isolation": ns.spec.isolation.to_string(),
                "keys": ns.spec.api_keys.len(),
                "components": components_of(state, ns),
                "limits": {
                    "max_concurrent": l.max_concurrent,
                    "max_queue": l.max_queue,
                    "max_tokens_per_request": l.max_tokens_per_request,
                    "max_blocks": l.max_blocks,
                    "priority": l.priority,
                },
                "running": gate.running(),
                "queued": gate.queued(),
                "rejected": gate.rejected.load(Relaxed),
            })
        })
        .collect();
    ok_json(&json!({"object": "list", "data": data}))
}

/// A namespace's components: what the runtime serves, or what the config names without one.
fn components_of(state: &AppState, ns: &memoria_tenant::Namespace) -> serde_json::Value {
    match state.router.as_ref().and_then(|r| r.components(&ns.name)) {
        Some(list) => list.iter().map(crate::components::info_json).collect(),
        None => json!(ns.spec.component.as_ref().map(|p| p.display().to_string())),
    }
}

/// Re-reads the config: namespaces (keys, limits, new namespaces) and their configured
/// components; refused as a whole, with the reason, when any part is invalid.
async fn reload(state: &Arc<AppState>) -> Result<Response, ApiError> {
    let Some(reloader) = &state.reloader else {
        return Err(ApiError::bad_request(
            "this server was started without --config; there is nothing to reload",
        ));
    };
    let _serial = state.admin_lock.lock().await;
    let refused = |e: String| ApiError::bad_request(format!("reload refused: {e}"));
    let tenants = Arc::new(reloader(&state.tenants()).map_err(refused)?);
    state.check_tenants(&tenants).map_err(refused)?;
    if let Some(router) = state.router.clone() {
        let t = tenants.clone();
        tokio::task::spawn_blocking(move || router.reload(&t))
            .await
            .map_err(|e| ApiError::internal(format!("the reload task failed: {e}")))?
            .map_err(|e| refused(e.to_string()))?;
    }
    let n = tenants.len();
    state.replace_tenants(tenants).map_err(refused)?;
    Ok(ok_json(&json!({"reloaded": true, "namespaces": n})))
}

/// The tokens of a prefix given as `text` or as `messages` (chat template, no generation prompt).
fn prefix_tokens(
    state: &AppState,
    text: Option<String>,
    messages: Option<Vec<ChatMessage>>,
) -> Result<Vec<u32>, ApiError> {
    let tok = state.engine.tokenizer();
    match (text, messages) {
        (Some(t), None) => Ok(tok.encode(&t, true, true)),
        (None, Some(m)) => {
            let text = state
                .chat
                .render(&m, false)
                .map_err(|e| ApiError::invalid("messages", e.to_string()))?;
            let bos_written = tok
                .bos()
                .and_then(|b| tok.token_text(b))
                .is_some_and(|b| !b.is_empty() && text.starts_with(b));
            Ok(tok.encode(&text, !bos_written, true))
        }
        _ => Err(ApiError::bad_request(
            "give exactly one of `text` and `messages`",
        )),
    }
}

fn named_namespace(
    state: &AppState,
    name: Option<String>,
) -> Result<Arc<memoria_tenant::Namespace>, ApiError> {
    let name = name.unwrap_or_else(|| state.config.default_namespace.clone());
    state
        .tenants()
        .get(&name)
        .cloned()
        .ok_or_else(|| ApiError::invalid("namespace", format!("unknown namespace {name:?}")))
}

/// Computes a prefix and saves it durably under `name` (the engine needs a store).
async fn save(state: &AppState, body: &Bytes) -> Result<Response, ApiError> {
    let req: SessionRequest = crate::openai::parse_json(body)?;
    let ns = named_namespace(state, req.namespace)?;
    let tokens = prefix_tokens(state, req.text, req.messages)?;
    let n = tokens.len();
    let engine = &state.engine;
    let id = engine.open(ns.id).await?;
    let result = async {
        engine.append(ns.id, id, tokens).await?;
        engine.prefill(ns.id, id).await?;
        engine.save(ns.id, id, &req.name).await
    }
    .await;
    let _ = engine.close(ns.id, id).await;
    result?;
    Ok(ok_json(
        &json!({"namespace": ns.name, "name": req.name, "tokens": n, "saved": true}),
    ))
}

/// Restores a saved session into the hot cache (its blocks stay cached once it is closed).
async fn restore(state: &AppState, body: &Bytes) -> Result<Response, ApiError> {
    let req: SessionRequest = crate::openai::parse_json(body)?;
    if req.text.is_some() || req.messages.is_some() {
        return Err(ApiError::bad_request(
            "restore takes `namespace` and `name` only",
        ));
    }
    let ns = named_namespace(state, req.namespace)?;
    let engine = &state.engine;
    let id = engine.restore(ns.id, &req.name).await?;
    let result = async {
        engine.prefill(ns.id, id).await?;
        engine.info(ns.id, id).await
    }
    .await;
    let _ = engine.close(ns.id, id).await;
    let info = result?;
    Ok(ok_json(
        &json!({"namespace": ns.name, "name": req.name, "tokens": info.len, "restored": true}),
    ))
}
