//! The admin API's component routes: list a namespace's components, deploy or replace one
//! (`PUT`, the body is the component's bytes), delete one. `/admin/namespaces/{ns}/component`
//! is the namespace's default component, `/admin/namespaces/{ns}/components/{route}` the one
//! serving `/ns/{ns}/{route}/...`. Compiling runs on a blocking thread.
//! Invariant: only reached after the admin key was checked; a refused component changes nothing.

use std::sync::Arc;

use bytes::Bytes;
use http::{Method, StatusCode};
use memoria_runtime::{ComponentInfo, ComponentRouter, DeployError, Origin, Slot};
use serde_json::{Value, json};

use crate::body::{Response, json_response, ok_json};
use crate::error::ApiError;
use crate::state::AppState;

/// Whether an admin path (after `/admin/`) and method upload a component (these bodies get the
/// larger `max_component_bytes` limit).
pub fn is_upload(method: &Method, rest: &str) -> bool {
    let parts: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    method == Method::PUT
        && matches!(
            parts.as_slice(),
            ["namespaces", _, "component"] | ["namespaces", _, "components", _]
        )
}

/// Dispatches `/admin/namespaces/{ns}/component[s[/{route}]]`; `tail` is what follows `{ns}`.
pub async fn handle(
    state: &AppState,
    method: &Method,
    ns: &str,
    tail: &[&str],
    body: Bytes,
) -> Result<Response, ApiError> {
    if state.tenants().get(ns).is_none() {
        return Err(ApiError::not_found(format!("unknown namespace {ns:?}")));
    }
    let router = state.router.clone().ok_or_else(|| {
        ApiError::not_implemented(
            "this server runs without the component runtime; components cannot be managed",
        )
    })?;
    let slot = match tail {
        ["components"] if method == Method::GET => return list(router.as_ref(), ns),
        ["component"] => Slot::Default,
        ["components", route] => {
            Slot::route(route).map_err(|e| ApiError::invalid("route", e.to_string()))?
        }
        _ => {
            return Err(ApiError::not_found(format!(
                "no admin route /admin/namespaces/{ns}/{}",
                tail.join("/")
            )));
        }
    };
    match *method {
        Method::PUT => deploy(router, ns, slot, body).await,
        Method::DELETE => remove(router, ns, slot).await,
        _ => Err(ApiError::method_not_allowed(
            method,
            &format!("/admin/namespaces/{ns}/{}", tail.join("/")),
        )),
    }
}

fn list(router: &dyn ComponentRouter, ns: &str) -> Result<Response, ApiError> {
    let data: Vec<Value> = router
        .components(ns)
        .ok_or_else(|| ApiError::not_found(format!("unknown namespace {ns:?}")))?
        .iter()
        .map(info_json)
        .collect();
    Ok(ok_json(
        &json!({"object": "list", "namespace": ns, "data": data}),
    ))
}

/// One component as JSON.
pub fn info_json(c: &ComponentInfo) -> Value {
    let route = match &c.slot {
        Slot::Default => Value::Null,
        Slot::Route(r) => json!(r),
    };
    let (origin, path, persisted) = match &c.origin {
        Origin::Config(p) => ("config", json!(p.display().to_string()), true),
        Origin::Deployed { persisted } => ("deployed", Value::Null, *persisted),
    };
    json!({
        "route": route,
        "digest": c.digest,
        "bytes": c.bytes,
        "origin": origin,
        "path": path,
        "persisted": persisted,
    })
}

fn deploy_error(e: DeployError) -> ApiError {
    match e {
        DeployError::UnknownNamespace(ns) => {
            ApiError::not_found(format!("unknown namespace {ns:?}"))
        }
        DeployError::Invalid(e) => {
            ApiError::invalid("component", format!("component refused: {e}"))
        }
        e @ DeployError::Reserved(_) => ApiError::invalid("route", e.to_string()),
        e @ DeployError::Store { .. } => ApiError::internal(e.to_string()),
    }
}

async fn deploy(
    router: Arc<dyn ComponentRouter>,
    ns: &str,
    slot: Slot,
    body: Bytes,
) -> Result<Response, ApiError> {
    let name = ns.to_string();
    let done = tokio::task::spawn_blocking(move || router.deploy(&name, slot, &body))
        .await
        .map_err(|e| ApiError::internal(format!("the deploy task failed: {e}")))?
        .map_err(deploy_error)?;
    let status = if done.replaced {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    let mut v = info_json(&done.info);
    v["namespace"] = json!(ns);
    v["replaced"] = json!(done.replaced);
    if !v["persisted"].as_bool().unwrap_or(false) {
        v["warning"] = json!(
            "no components folder (server.components_dir or --store): this deployment lasts until the server stops"
        );
    }
    Ok(json_response(status, &v))
}

async fn remove(
    router: Arc<dyn ComponentRouter>,
    ns: &str,
    slot: Slot,
) -> Result<Response, ApiError> {
    let name = ns.to_string();
    let what = match &slot {
        Slot::Default => "default component".to_string(),
        Slot::Route(r) => format!("component for route {r:?}"),
    };
    let route = match &slot {
        Slot::Default => Value::Null,
        Slot::Route(r) => json!(r),
    };
    let removed = tokio::task::spawn_blocking(move || router.remove(&name, &slot))
        .await
        .map_err(|e| ApiError::internal(format!("the delete task failed: {e}")))?
        .map_err(deploy_error)?;
    if !removed {
        return Err(ApiError::not_found(format!(
            "namespace {ns:?} has no {what}"
        )));
    }
    Ok(ok_json(
        &json!({"namespace": ns, "route": route, "deleted": true}),
    ))
}
