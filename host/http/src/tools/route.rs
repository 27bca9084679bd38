//! `GET /tools` and `POST /tools {"tool", "params", "stream"}`: the caller's key checked as on
//! every API endpoint, the working directory taken from `x-tool-cwd` and the runtime from
//! `x-tool-runtime` (a model's own `cwd`/`runtime` arguments are dropped), then the tool run;
//! with `stream`, its output as SSE `{"chunk"}` events and a last `{"done": true}`. Errors in
//! llama-server's shape: 400 malformed, 404 unknown tool, 500 a runtime that cannot be used.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use bytes::Bytes;
use http::{HeaderMap, Method};
use serde_json::{Value, json};

use super::Tools;
use super::builtin::{self, Call};
use super::runtime::Runtime;
use crate::body::{ChannelBody, Response, ok_json, read_limited};
use crate::error::ApiError;
use crate::state::AppState;

/// Bytes of output one streamed call sends at most.
const STREAM_MAX: usize = 1 << 20;

/// Serves `/tools`.
pub(crate) async fn handle(
    state: Arc<AppState>,
    req: hyper::Request<hyper::body::Incoming>,
) -> Response {
    match serve(state, req).await {
        Ok(r) => r,
        Err(e) => crate::llama::error_response(e),
    }
}

async fn serve(
    state: Arc<AppState>,
    req: hyper::Request<hyper::body::Incoming>,
) -> Result<Response, ApiError> {
    crate::auth::check_host_key(&state, req.headers())?;
    let Some(tools) = state.config.tools.clone() else {
        return Err(ApiError::forbidden(
            "server tools are off: start the server with --tools (built-in tools) or --mcp-servers-config / --mcp-servers-json",
        ));
    };
    let method = req.method().clone();
    if method == Method::GET {
        return Ok(ok_json(&tools.list()));
    }
    if method != Method::POST {
        return Err(ApiError::method_not_allowed(&method, "/tools"));
    }
    let headers = req.headers().clone();
    let body = read_limited(req, state.config.max_body_bytes, &state.bodies).await?;
    let v: Value = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request(format!("the body is not valid JSON: {e}")))?;
    let Some(name) = v.get("tool").and_then(Value::as_str).map(str::to_string) else {
        return Err(ApiError::bad_request("\"tool\" (a tool name) is required"));
    };
    let mut params = match v.get("params") {
        None | Some(Value::Null) => json!({}),
        Some(p @ Value::Object(_)) => p.clone(),
        Some(_) => return Err(ApiError::bad_request("\"params\" must be an object")),
    };
    let stream = match v.get("stream") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(ApiError::bad_request("\"stream\" must be a boolean")),
    };
    if let Some(m) = params.as_object_mut() {
        m.remove("cwd");
        m.remove("runtime");
        m.remove("resp_type");
    }
    if let Some((server, tool)) = mcp_tool(&tools, &name) {
        if stream {
            return Err(unknown_stream(&name));
        }
        return Ok(ok_json(&tools.mcp.call(&server, &tool, params).await));
    }
    let Some(&name) = tools.builtin.iter().find(|n| **n == name) else {
        return Err(ApiError::not_found(format!("unknown tool \"{name}\"")));
    };
    if stream && !builtin::streams(name) {
        return Err(unknown_stream(name));
    }
    let call = Call {
        params,
        cwd: header_text(&headers, "x-tool-cwd")?,
        runtime: runtime_for(&tools, &headers)?,
    };
    if stream {
        return Ok(streamed(name, call));
    }
    let mut r = builtin::invoke(name, &call, |_| true).await?;
    if let (Some(tail), Some(text)) = (
        r.get("tail").and_then(Value::as_str).map(str::to_string),
        r.get("plain_text_response").and_then(Value::as_str),
    ) {
        r["plain_text_response"] = json!(format!("{text}{tail}"));
    }
    if let Some(m) = r.as_object_mut() {
        m.remove("tail");
    }
    Ok(ok_json(&r))
}

fn unknown_stream(name: &str) -> ApiError {
    ApiError::not_found(format!("tool \"{name}\" does not support stream = true"))
}

/// The (server, tool) of a listed MCP tool name.
fn mcp_tool(tools: &Tools, name: &str) -> Option<(String, String)> {
    let (_, i) = tools.mcp_names.iter().find(|(n, _)| n == name)?;
    let t = &tools.mcp.tools()[*i];
    Some((t.server.clone(), t.tool.clone()))
}

fn header_text(headers: &HeaderMap, name: &str) -> Result<Option<String>, ApiError> {
    match headers.get(name) {
        None => Ok(None),
        Some(v) => {
            let s = v
                .to_str()
                .map_err(|_| ApiError::bad_request(format!("{name} must be text")))?
                .trim();
            Ok((!s.is_empty()).then(|| s.to_string()))
        }
    }
}

/// The request's runtime (`x-tool-runtime`), else the host's (`--tools-runtime`), else the
/// host itself.
fn runtime_for(tools: &Tools, headers: &HeaderMap) -> Result<Runtime, ApiError> {
    match header_text(headers, "x-tool-runtime")? {
        Some(spec) => Runtime::parse(&spec).map_err(ApiError::internal),
        None => Ok(tools.runtime.clone().unwrap_or(Runtime::Host)),
    }
}

/// The tool's output as SSE, ended by `{"done": true}` (with `error` when it failed).
fn streamed(name: &'static str, call: Call) -> Response {
    let (tx, body) = ChannelBody::channel(64);
    let (chunks_tx, mut chunks_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let gone = Arc::new(AtomicBool::new(false));
    let forward = {
        let (tx, gone) = (tx.clone(), gone.clone());
        tokio::spawn(async move {
            while let Some(c) = chunks_rx.recv().await {
                if tx.send(event(&json!({ "chunk": c }))).await.is_err() {
                    gone.store(true, Relaxed);
                    return;
                }
            }
        })
    };
    tokio::spawn(async move {
        let mut sent = 0usize;
        let push = {
            let (chunks_tx, gone) = (chunks_tx.clone(), gone.clone());
            move |c: &str| {
                if sent < STREAM_MAX && !c.is_empty() {
                    sent += c.len();
                    let _ = chunks_tx.send(c.to_string());
                }
                !gone.load(Relaxed)
            }
        };
        let r = builtin::invoke(name, &call, push).await;
        let done = match r {
            Ok(v) => {
                if let Some(t) = v.get("tail").and_then(Value::as_str) {
                    let _ = chunks_tx.send(t.to_string());
                }
                match v.get("error") {
                    Some(e) => {
                        json!({"done": true, "error": e.as_str().map_or_else(|| e.to_string(), str::to_string)})
                    }
                    None => json!({"done": true}),
                }
            }
            Err(e) => json!({"done": true, "error": e.message}),
        };
        drop(chunks_tx);
        let _ = forward.await;
        let _ = tx.send(event(&done)).await;
    });
    crate::openai::run::event_stream(body)
}

fn event(v: &Value) -> Bytes {
    Bytes::from(format!("data: {v}\n\n"))
}
