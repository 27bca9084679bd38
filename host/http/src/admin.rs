//! The admin API under `/admin/`, behind the admin key: live sessions (list, inspect, cancel),
//! warming and pinning a prefix, namespaces and their admission state, config reload, and the
//! routes whose backing features are not in this build yet (session save/restore needs the
//! persistent store, component deploy/replace/delete the wasm runtime): those answer 501 with
//! what is missing. Invariant: nothing here runs before `check_admin` passed.

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

/// Dispatches an admin request (`rest` is the path after `/admin/`).
pub async fn handle(state: Arc<AppState>, method: &Method, rest: &str, body: Bytes) -> Result<Response, ApiError> {
    let parts: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    match (method, parts.as_slice()) {
        (&Method::GET, ["sessions"]) => Ok(list_sessions(&state)),
        (&Method::GET, ["sessions", id]) => inspect_session(&state, id).await,
        (&Method::DELETE, ["sessions", id]) => close_session(&state, id).await,
        (&Method::POST, ["sessions", _, "save"]) | (&Method::POST, ["sessions", "restore"]) => {
            Err(ApiError::not_implemented(
                "session save/restore needs the persistent state store, which this build does not include yet",
            ))
        }
        (&Method::POST, ["warm"]) => warm(&state, &body).await,
        (&Method::GET, ["namespaces"]) => Ok(namespaces(&state)),
        (&Method::POST, ["reload"]) => reload(&state),
        (&Method::PUT | &Method::DELETE, ["namespaces", ns, "component"]) => {
            if state.tenants().get(ns).is_none() {
                return Err(ApiError::not_found(format!("unknown namespace {ns:?}")));
            }
            Err(ApiError::not_implemented(
                "deploying, replacing and deleting components needs the wasm runtime (memoria-runtime), which this build does not include yet",
            ))
        }
        (_, ["sessions"] | ["sessions", _] | ["warm"] | ["namespaces"] | ["reload"]) => {
            Err(ApiError::method_not_allowed(method, &format!("/admin/{rest}")))
        }
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

async fn warm(state: &AppState, body: &Bytes) -> Result<Response, ApiError> {
    let req: WarmRequest = crate::openai::parse_json(body)?;
    let tenants = state.tenants();
    let name = req
        .namespace
        .unwrap_or_else(|| state.config.default_namespace.clone());
    let ns = tenants
        .get(&name)
        .ok_or_else(|| ApiError::invalid("namespace", format!("unknown namespace {name:?}")))?;
    let tok = state.engine.tokenizer();
    let tokens = match (req.text, req.messages) {
        (Some(t), None) => tok.encode(&t, true, true),
        (None, Some(m)) => {
            let text = state
                .chat
                .render(&m, false)
                .map_err(|e| ApiError::invalid("messages", e.to_string()))?;
            let bos_written = tok
                .bos()
                .and_then(|b| tok.token_text(b))
                .is_some_and(|b| !b.is_empty() && text.starts_with(b));
            tok.encode(&text, !bos_written, true)
        }
        _ => return Err(ApiError::bad_request("give exactly one of `text` and `messages`")),
    };
    let pin = req.priority.map_or(PinLevel::Pinned, PinLevel::Priority);
    let info = state
        .engine
        .warm(ns.id, ns.salt, tokens, pin, req.ttl_s.map(Duration::from_secs))
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
                "component": ns.spec.component.as_ref().map(|p| p.display().to_string()),
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

fn reload(state: &AppState) -> Result<Response, ApiError> {
    let Some(reloader) = &state.reloader else {
        return Err(ApiError::bad_request(
            "this server was started without --config; there is nothing to reload",
        ));
    };
    let tenants = reloader().map_err(|e| ApiError::bad_request(format!("reload refused: {e}")))?;
    let n = tenants.len();
    state
        .replace_tenants(tenants)
        .map_err(|e| ApiError::bad_request(format!("reload refused: {e}")))?;
    Ok(ok_json(&json!({"reloaded": true, "namespaces": n})))
}
