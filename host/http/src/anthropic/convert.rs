//! An Anthropic Messages request (`POST /v1/messages`) as the chat request it means: `system`
//! (text or text blocks) first, `text` blocks as text, an assistant's `tool_use` blocks as tool
//! calls and a user's `tool_result` blocks as tool messages, `tools` with their
//! `input_schema`, `tool_choice`, `stop_sequences`, sampling and `max_tokens`. The chat checks
//! then apply unchanged. Blocks marked `cache_control` are cache breakpoints: the conversation
//! up to the end of that block is kept (see `mod.rs`). Unknown fields are ignored.

use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::error::ApiError;
use crate::openai::schema::ChatRequest;

/// The most cache breakpoints one request may mark (Anthropic's limit).
pub const MAX_BREAKPOINTS: usize = 4;

/// A converted request.
pub struct Converted {
    pub chat: ChatRequest,
    /// Chat messages, counted from the first, that each breakpoint's prefix covers, with the
    /// breakpoint's TTL.
    pub breakpoints: Vec<(usize, Duration)>,
    /// The chat messages the request became (tool instructions may add one more).
    pub messages: usize,
}

fn bad(field: impl Into<String>, why: impl Into<String>) -> ApiError {
    ApiError::invalid(field, why)
}

/// The TTL of a `cache_control` marker (`5m` by default, or `1h`), None when absent.
fn breakpoint(block: &Value, field: &str) -> Result<Option<Duration>, ApiError> {
    let Some(cc) = block.get("cache_control").filter(|c| !c.is_null()) else {
        return Ok(None);
    };
    match cc.get("ttl").and_then(Value::as_str) {
        None | Some("5m") => Ok(Some(Duration::from_secs(300))),
        Some("1h") => Ok(Some(Duration::from_secs(3600))),
        Some(other) => Err(bad(
            format!("{field}.cache_control.ttl"),
            format!("cache_control ttl {other:?}: use \"5m\" or \"1h\""),
        )),
    }
}

/// What an image block gets: memoria's models read text only (llama-server's answer to an image
/// for a model without a vision projector).
fn no_images() -> ApiError {
    ApiError::internal("image input is not supported: this model reads text only")
}

/// The text of a `content` that is a string or text blocks (for `system` and tool results).
fn text_of(content: &Value, field: &str) -> Result<(String, Option<Duration>), ApiError> {
    match content {
        Value::String(s) => Ok((s.clone(), None)),
        Value::Array(blocks) => {
            let mut text = String::new();
            let mut ttl = None;
            for (j, b) in blocks.iter().enumerate() {
                let f = format!("{field}[{j}]");
                match (
                    b.get("type").and_then(Value::as_str),
                    b.get("text").and_then(Value::as_str),
                ) {
                    (Some("text"), Some(t)) => {
                        if !text.is_empty() {
                            text.push('\n');
                        }
                        text.push_str(t);
                        ttl = breakpoint(b, &f)?.or(ttl);
                    }
                    (Some("image"), _) => return Err(no_images()),
                    (kind, _) => {
                        return Err(bad(
                            f,
                            format!(
                                "content blocks of type {kind:?} are not supported here (text blocks with `text`)"
                            ),
                        ));
                    }
                }
            }
            Ok((text, ttl))
        }
        Value::Null => Ok((String::new(), None)),
        other => Err(bad(
            field,
            format!("{other} is not a text or a list of blocks"),
        )),
    }
}

/// Converts the request body `v`.
pub fn convert(v: &Value) -> Result<Converted, ApiError> {
    let obj = v
        .as_object()
        .ok_or_else(|| ApiError::bad_request("the body must be a JSON object"))?;
    let max_tokens = obj
        .get("max_tokens")
        .ok_or_else(|| bad("max_tokens", "`max_tokens` is required"))?;
    let mut messages: Vec<Value> = Vec::new();
    let mut breakpoints = Vec::new();
    if let Some(system) = obj.get("system").filter(|s| !s.is_null()) {
        let (text, ttl) = text_of(system, "system")?;
        messages.push(json!({"role": "system", "content": text}));
        if let Some(ttl) = ttl {
            breakpoints.push((messages.len(), ttl));
        }
    }
    let list = obj
        .get("messages")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("messages", "`messages` must be a list"))?;
    for (i, m) in list.iter().enumerate() {
        let field = format!("messages[{i}]");
        let role = m.get("role").and_then(Value::as_str).unwrap_or("");
        if !matches!(role, "user" | "assistant") {
            return Err(bad(
                format!("{field}.role"),
                format!("role {role:?} is not user or assistant"),
            ));
        }
        let content = m.get("content").unwrap_or(&Value::Null);
        let blocks = match content {
            Value::String(s) => {
                messages.push(json!({"role": role, "content": s}));
                continue;
            }
            Value::Array(b) => b,
            _ => {
                return Err(bad(
                    format!("{field}.content"),
                    "`content` must be a text or a list of blocks",
                ));
            }
        };
        let mut text = String::new();
        let mut reasoning = String::new();
        let mut calls = Vec::new();
        let mut ttl = None;
        for (j, b) in blocks.iter().enumerate() {
            let f = format!("{field}.content[{j}]");
            let here = breakpoint(b, &f)?;
            match b.get("type").and_then(Value::as_str) {
                Some("text") => {
                    text.push_str(b.get("text").and_then(Value::as_str).unwrap_or(""));
                    ttl = here.or(ttl);
                }
                Some("tool_use") if role == "assistant" => {
                    let id = b.get("id").and_then(Value::as_str).unwrap_or("");
                    let name = b.get("name").and_then(Value::as_str).unwrap_or("");
                    let input = b.get("input").cloned().unwrap_or(json!({}));
                    calls.push(json!({
                        "id": id, "type": "function",
                        "function": {"name": name, "arguments": input.to_string()},
                    }));
                    ttl = here.or(ttl);
                }
                Some("tool_result") if role == "user" => {
                    if !text.is_empty() {
                        messages
                            .push(json!({"role": "user", "content": std::mem::take(&mut text)}));
                    }
                    let id = b.get("tool_use_id").and_then(Value::as_str).unwrap_or("");
                    let (out, t) = text_of(
                        b.get("content").unwrap_or(&Value::Null),
                        &format!("{f}.content"),
                    )?;
                    messages.push(json!({"role": "tool", "tool_call_id": id, "content": out}));
                    if let Some(t) = here.or(t) {
                        breakpoints.push((messages.len(), t));
                    }
                }
                // An assistant's earlier thinking goes to the template as `reasoning_content`.
                Some("thinking") if role == "assistant" => {
                    if let Some(t) = b.get("thinking").and_then(Value::as_str) {
                        if !reasoning.is_empty() {
                            reasoning.push('\n');
                        }
                        reasoning.push_str(t);
                    }
                }
                Some("thinking" | "redacted_thinking") => {}
                Some("image") => return Err(no_images()),
                kind => {
                    return Err(bad(
                        f,
                        format!(
                            "content blocks of type {kind:?} are not supported (text, tool_use, tool_result)"
                        ),
                    ));
                }
            }
        }
        if !text.is_empty() || !calls.is_empty() || !reasoning.is_empty() {
            let mut msg = Map::new();
            msg.insert("role".into(), json!(role));
            msg.insert(
                "content".into(),
                if text.is_empty() && role == "assistant" {
                    Value::Null
                } else {
                    json!(text)
                },
            );
            if !calls.is_empty() {
                msg.insert("tool_calls".into(), Value::Array(calls));
            }
            if !reasoning.is_empty() {
                msg.insert("reasoning_content".into(), json!(reasoning));
            }
            messages.push(Value::Object(msg));
        }
        if let Some(t) = ttl {
            breakpoints.push((messages.len(), t));
        }
    }
    if breakpoints.len() > MAX_BREAKPOINTS {
        return Err(bad(
            "cache_control",
            format!(
                "{} cache_control breakpoints; at most {MAX_BREAKPOINTS} are allowed",
                breakpoints.len()
            ),
        ));
    }
    let mut chat = Map::new();
    chat.insert("messages".into(), Value::Array(messages));
    chat.insert("max_tokens".into(), max_tokens.clone());
    for (from, to) in [
        ("temperature", "temperature"),
        ("top_p", "top_p"),
        ("top_k", "top_k"),
        ("stop_sequences", "stop"),
        ("stream", "stream"),
        ("model", "model"),
        ("speculation", "speculation"),
    ] {
        if let Some(x) = obj.get(from).filter(|x| !x.is_null()) {
            chat.insert(to.into(), x.clone());
        }
    }
    if let Some(tools) = obj
        .get("tools")
        .and_then(Value::as_array)
        .filter(|t| !t.is_empty())
    {
        let converted: Vec<Value> = tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.get("name").cloned().unwrap_or(Value::Null),
                    "description": t.get("description").cloned().unwrap_or(json!("")),
                    "parameters": t.get("input_schema").cloned().unwrap_or(json!({"type": "object"})),
                }})
            })
            .collect();
        chat.insert("tools".into(), Value::Array(converted));
        if let Some(choice) = obj.get("tool_choice").filter(|c| !c.is_null()) {
            let kind = choice.get("type").and_then(Value::as_str).unwrap_or("auto");
            let c = match kind {
                "auto" => json!("auto"),
                "any" => json!("required"),
                "none" => json!("none"),
                "tool" => {
                    json!({"type": "function", "function": {"name": choice.get("name").cloned().unwrap_or(Value::Null)}})
                }
                other => {
                    return Err(bad(
                        "tool_choice.type",
                        format!("tool_choice {other:?}: use auto, any, tool or none"),
                    ));
                }
            };
            chat.insert("tool_choice".into(), c);
            if choice
                .get("disable_parallel_tool_use")
                .and_then(Value::as_bool)
                == Some(true)
            {
                chat.insert("parallel_tool_calls".into(), json!(false));
            }
        }
    }
    let n = chat
        .get("messages")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let mut chat: ChatRequest =
        crate::openai::parse_json(Value::Object(chat).to_string().as_bytes())?;
    chat.allow_empty_messages = true;
    Ok(Converted {
        chat,
        breakpoints,
        messages: n,
    })
}
