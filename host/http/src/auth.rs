//! Who a request is: the namespace comes from the route (`/ns/{name}/...`) or from the bearer
//! key, never from the body. A host with no keys at all is open (llama-server style): key-less
//! `/v1` requests go to the default namespace. Admin requests need the admin key, compared in
//! constant time. Invariant: an unknown key is 401, a known key used outside its namespace 403.

use std::sync::Arc;

use http::HeaderMap;
use memoria_tenant::Namespace;

use crate::error::ApiError;
use crate::state::AppState;

/// The key a request carries, if any: `Authorization: Bearer KEY` (the scheme in any case,
/// surrounding spaces trimmed), else Anthropic's `X-Api-Key: KEY`.
pub fn bearer(headers: &HeaderMap) -> Result<Option<&str>, ApiError> {
    let Some(v) = headers.get(http::header::AUTHORIZATION) else {
        return api_key_header(headers);
    };
    let v = v
        .to_str()
        .map_err(|_| ApiError::unauthorized("the Authorization header is not valid text"))?;
    match v.split_once(' ') {
        Some((scheme, key)) if scheme.eq_ignore_ascii_case("bearer") && !key.trim().is_empty() => {
            Ok(Some(key.trim()))
        }
        _ => Err(ApiError::unauthorized(
            "the Authorization header must be `Bearer KEY`",
        )),
    }
}

/// `X-Api-Key: KEY` (the Anthropic SDK's header), surrounding spaces trimmed.
fn api_key_header(headers: &HeaderMap) -> Result<Option<&str>, ApiError> {
    let Some(v) = headers.get("x-api-key") else {
        return Ok(None);
    };
    let key = v
        .to_str()
        .map_err(|_| ApiError::unauthorized("the X-Api-Key header is not valid text"))?
        .trim();
    if key.is_empty() {
        return Err(ApiError::unauthorized("the X-Api-Key header is empty"));
    }
    Ok(Some(key))
}

/// The namespace of an OpenAI-route request without a namespace in its path.
pub fn namespace_for_key(
    state: &AppState,
    headers: &HeaderMap,
) -> Result<Arc<Namespace>, ApiError> {
    let tenants = state.tenants();
    if !state.auth_required() {
        // An open host ignores whatever key a client sends (clients always send one).
        return state.default_namespace().ok_or_else(|| {
            ApiError::forbidden(format!(
                "the default namespace {:?} is not configured",
                state.config.default_namespace
            ))
        });
    }
    match bearer(headers)? {
        Some(key) => tenants
            .by_key(key)
            .cloned()
            .ok_or_else(|| ApiError::unauthorized("invalid API key")),
        None => Err(ApiError::unauthorized(
            "missing API key: send `Authorization: Bearer KEY` (or `X-Api-Key: KEY`)",
        )),
    }
}

/// Host features that act on the machine itself (server tools, the CORS proxy): on a keyed
/// host only the host's own keys open them, the admin key or a key of the default namespace
/// (`--api-key`), never a tenant namespace's key. An open host is the operator's choice.
pub fn check_host_key(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    if !state.auth_required() {
        return Ok(());
    }
    let Some(key) = bearer(headers)? else {
        return Err(ApiError::unauthorized(
            "missing API key: send `Authorization: Bearer KEY` (or `X-Api-Key: KEY`)",
        ));
    };
    let admin = state.config.admin_key.as_deref();
    if admin.is_some_and(|a| constant_time_eq(key.as_bytes(), a.as_bytes())) {
        return Ok(());
    }
    match state.tenants().by_key(key) {
        Some(ns) if ns.name == state.config.default_namespace => Ok(()),
        Some(_) => Err(ApiError::forbidden(
            "this endpoint acts on the host: it needs the host's --api-key or the admin key, \
             not a namespace's key",
        )),
        None => Err(ApiError::unauthorized("invalid API key")),
    }
}

/// The namespace named in a `/ns/{name}/...` path, checking the caller's key against it. On a
/// keyed host an unknown namespace, a missing key, an unknown key and another namespace's key
/// all get the same 401, so namespace names cannot be probed; an open host answers 404 for an
/// unknown namespace.
pub fn namespace_for_route(
    state: &AppState,
    name: &str,
    headers: &HeaderMap,
) -> Result<Arc<Namespace>, ApiError> {
    let tenants = state.tenants();
    let key = bearer(headers)?;
    let ns = tenants.get(name).cloned();
    if !state.auth_required() {
        return match ns {
            Some(ns) if ns.spec.api_keys.is_empty() => Ok(ns),
            Some(_) => Err(denied(name)),
            None => Err(ApiError::not_found(format!("unknown namespace {name:?}"))),
        };
    }
    match (ns, key) {
        (Some(ns), Some(k)) if ns.accepts_key(k) => Ok(ns),
        _ => Err(denied(name)),
    }
}

/// The one refusal of a `/ns/{name}/...` request without a key of that namespace.
fn denied(name: &str) -> ApiError {
    ApiError::unauthorized(format!(
        "namespace {name:?} needs one of its API keys: send `Authorization: Bearer KEY`"
    ))
}

/// Checks the admin key.
pub fn check_admin(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(admin) = state.config.admin_key.as_deref() else {
        return Err(ApiError::forbidden(
            "the admin API is off: start the server with --admin-key KEY (or [server] admin_key)",
        ));
    };
    match bearer(headers)? {
        Some(k) if constant_time_eq(k.as_bytes(), admin.as_bytes()) => Ok(()),
        Some(_) => Err(ApiError::forbidden("this key is not the admin key")),
        None => Err(ApiError::unauthorized(
            "the admin API needs the admin key: send `Authorization: Bearer ADMIN_KEY`",
        )),
    }
}

/// Compares digests, so the time taken does not depend on where the inputs differ.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    blake3::hash(a) == blake3::hash(b)
}
