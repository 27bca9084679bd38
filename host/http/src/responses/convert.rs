//! A Responses API request as the chat request it means: `instructions` as the system message,
//! the stored conversation of `previous_response_id` (looked up by the caller), then `input` (a
//! text, or items: messages with `input_text`/`output_text` parts, `function_call` and
//! `function_call_output`), `tools` (flat function definitions), `tool_choice`,
//! `max_output_tokens`, sampling, and `text.format` as `response_format`. Unknown fields are
//! ignored.

use serde_json::{Map, Value, json};

use crate::error::ApiError;

fn bad(field: impl Into<String>, why: impl Into<String>) -> ApiError {
    ApiError::invalid(field, why)
}

/// The text of a message's `content`: a string or a list of text parts.
fn content_text(c: &Value, field: &str) -> Result<String, ApiError> {
    match c {
        Value::String(s) => Ok(s.clone()),
        Value::Array(parts) => {
            let mut out = String::new();
            for (j, p) in parts.iter().enumerate() {
                match (
                    p.get("type").and_then(Value::as_str),
                    p.get("text").and_then(Value::as_str),
                ) {
                    (Some("input_text" | "output_text" | "text"), Some(t)) => out.push_str(t),
                    (kind, _) => {
                        return Err(bad(
                            format!("{field}[{j}]"),
                            format!(
                                "content parts of type {kind:?} are not supported (input_text, output_text)"
                            ),
                        ));
                    }
                }
            }
            Ok(out)
        }
        other => Err(bad(
            field,
            format!("{other} is not a text or a list of parts"),
        )),
    }
}

/// The chat messages of `input`.
pub fn input_messages(input: Option<&Value>) -> Result<Vec<Value>, ApiError> {
    let items = match input {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::String(s)) => return Ok(vec![json!({"role": "user", "content": s})]),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(bad("input", "`input` must be a text or a list of items")),
    };
    let mut out: Vec<Value> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let field = format!("input[{i}]");
        let kind = item
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("message");
        match kind {
            "message" => {
                let role = item.get("role").and_then(Value::as_str).unwrap_or("user");
                if !matches!(role, "user" | "assistant" | "system" | "developer") {
                    return Err(bad(
                        format!("{field}.role"),
                        format!("role {role:?} is not user, assistant, system or developer"),
                    ));
                }
                let text = content_text(
                    item.get("content").unwrap_or(&Value::Null),
                    &format!("{field}.content"),
                )?;
                out.push(json!({"role": role, "content": text}));
            }
            "function_call" => {
                let call = json!({
                    "id": item.get("call_id").cloned().unwrap_or(json!("")),
                    "type": "function",
                    "function": {
                        "name": item.get("name").cloned().unwrap_or(json!("")),
                        "arguments": item.get("arguments").cloned().unwrap_or(json!("{}")),
                    },
                });
                // Consecutive calls belong to one assistant turn.
                match out.last_mut() {
                    Some(last)
                        if last["role"] == "assistant" && last.get("tool_calls").is_some() =>
                    {
                        if let Some(calls) = last["tool_calls"].as_array_mut() {
                            calls.push(call);
                        }
                    }
                    _ => out
                        .push(json!({"role": "assistant", "content": null, "tool_calls": [call]})),
                }
            }
            "function_call_output" => {
                let output = match item.get("output") {
                    Some(Value::String(s)) => s.clone(),
                    Some(v) => content_text(v, &format!("{field}.output"))?,
                    None => String::new(),
                };
                out.push(json!({
                    "role": "tool",
                    "tool_call_id": item.get("call_id").cloned().unwrap_or(json!("")),
                    "content": output,
                }));
            }
            "reasoning" => {}
            other => {
                return Err(bad(
                    format!("{field}.type"),
                    format!("input items of type {other:?} are not supported"),
                ));
            }
        }
    }
    Ok(out)
}

/// The chat request body for `messages` with the generation fields of the Responses request
/// `r`.
pub fn chat_body(r: &Map<String, Value>, messages: Vec<Value>) -> Result<Value, ApiError> {
    let mut chat = Map::new();
    chat.insert("messages".into(), Value::Array(messages));
    for (from, to) in [
        ("model", "model"),
        ("temperature", "temperature"),
        ("top_p", "top_p"),
        ("max_output_tokens", "max_tokens"),
        ("stream", "stream"),
        ("parallel_tool_calls", "parallel_tool_calls"),
        ("speculation", "speculation"),
    ] {
        if let Some(x) = r.get(from).filter(|x| !x.is_null()) {
            chat.insert(to.into(), x.clone());
        }
    }
    if let Some(tools) = r
        .get("tools")
        .and_then(Value::as_array)
        .filter(|t| !t.is_empty())
    {
        let mut converted = Vec::new();
        for (i, t) in tools.iter().enumerate() {
            if t.get("type").and_then(Value::as_str) != Some("function") {
                return Err(bad(
                    format!("tools[{i}].type"),
                    "only function tools are supported",
                ));
            }
            converted.push(json!({"type": "function", "function": {
                "name": t.get("name").cloned().unwrap_or(Value::Null),
                "description": t.get("description").cloned().unwrap_or(json!("")),
                "parameters": t.get("parameters").cloned().unwrap_or(json!({"type": "object"})),
            }}));
        }
        chat.insert("tools".into(), Value::Array(converted));
        if let Some(choice) = r.get("tool_choice").filter(|c| !c.is_null()) {
            let c = match choice {
                Value::String(_) => choice.clone(),
                Value::Object(o) if o.get("type").and_then(Value::as_str) == Some("function") => {
                    json!({"type": "function", "function": {"name": o.get("name").cloned().unwrap_or(Value::Null)}})
                }
                other => {
                    return Err(bad(
                        "tool_choice",
                        format!("tool_choice {other} is not supported"),
                    ));
                }
            };
            chat.insert("tool_choice".into(), c);
        }
    }
    if let Some(format) = r
        .get("text")
        .and_then(|t| t.get("format"))
        .filter(|f| !f.is_null())
    {
        let rf = match format.get("type").and_then(Value::as_str) {
            Some("json_schema") => json!({"type": "json_schema", "json_schema": {
                "name": format.get("name").cloned().unwrap_or(json!("response")),
                "schema": format.get("schema").cloned().unwrap_or(Value::Null),
                "strict": format.get("strict").cloned().unwrap_or(json!(false)),
            }}),
            Some(t @ ("text" | "json_object")) => json!({"type": t}),
            other => {
                return Err(bad(
                    "text.format.type",
                    format!("{other:?}: use text, json_object or json_schema"),
                ));
            }
        };
        chat.insert("response_format".into(), rf);
    }
    Ok(Value::Object(chat))
}
