//! `POST /v1/chat/completions`: validates the conversation, renders it with the model's chat
//! template (ChatML when the model has none), tokenizes the result as llama-server does (BOS
//! unless the template already wrote it, special tokens parsed) and generates.

use bytes::Bytes;
use memoria_model::chat::ChatMessage;
use memoria_sched::Usage;
use serde_json::{Value, json};

use super::params;
use super::run::{self, SseFormat};
use super::schema::{ChatRequest, Content, Message};
use super::{Ctx, response_id, unix_now, usage_json};
use crate::body::{Response, ok_json};
use crate::error::ApiError;

const SYSTEM_FINGERPRINT: &str = "memoria";

/// Handles one request.
pub async fn handle(ctx: Ctx, body: Bytes) -> Result<Response, ApiError> {
    let req: ChatRequest = super::json::parse(&body)?;
    params::check_n("n", req.n)?;
    params::unsupported("logprobs", req.logprobs == Some(true), "logprobs")?;
    params::unsupported(
        "top_logprobs",
        req.top_logprobs.is_some_and(|n| n > 0),
        "top_logprobs",
    )?;
    params::unsupported(
        "logit_bias",
        req.logit_bias.as_ref().is_some_and(|m| !m.is_empty()),
        "logit_bias",
    )?;
    params::unsupported(
        "tools",
        req.tools.as_ref().is_some_and(|t| !t.is_empty()),
        "tool calling",
    )?;
    params::unsupported(
        "tool_choice",
        req.tool_choice
            .as_ref()
            .is_some_and(|v| v != "none" && v != "auto"),
        "tool calling",
    )?;
    params::check_response_format(req.response_format.as_ref())?;
    let sampling = params::sampling(&params::sampling_fields_of!(req))?;
    let stop = params::stops(req.stop)?;
    let ignore_eos = req.ignore_eos.unwrap_or(false);
    let messages = messages(req.messages)?;
    let state = &ctx.state;
    let text = state.chat.render(&messages, true).map_err(|e| {
        ApiError::invalid(
            "messages",
            format!("the chat template refused the conversation: {e}"),
        )
    })?;
    let tok = state.engine.tokenizer();
    let bos_written = tok
        .bos()
        .and_then(|b| tok.token_text(b))
        .is_some_and(|b| !b.is_empty() && text.starts_with(b));
    let prompt = tok.encode(&text, !bos_written, true);
    let (field, requested) = match (req.max_completion_tokens, req.max_tokens) {
        (Some(m), _) => ("max_completion_tokens", Some(m)),
        (None, m) => ("max_tokens", m),
    };
    let budget = params::token_budget(
        field,
        requested,
        prompt.len(),
        ctx.max_context(),
        ctx.ns.spec.limits.max_tokens_per_request,
    )?;
    let stream = req.stream.unwrap_or(false);
    let include_usage = req
        .stream_options
        .as_ref()
        .and_then(|o| o.include_usage)
        .unwrap_or(false);
    let permit = ctx.admit().await?;
    let gen_params = params::generate_params(sampling, budget, stop, ignore_eos);
    let running = run::start(&ctx, "chat", prompt, gen_params, stream).await?;
    let id = response_id("chatcmpl");
    let created = unix_now();
    let model = ctx.model_id().to_string();
    if stream {
        let fmt = ChatChunks { id, created, model };
        return Ok(running.sse(Box::new(fmt), include_usage, permit));
    }
    let done = running.collect().await?;
    drop(permit);
    Ok(ok_json(&json!({
        "id": id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "system_fingerprint": SYSTEM_FINGERPRINT,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": done.text, "refusal": null},
            "logprobs": null,
            "finish_reason": done.reason.as_str(),
        }],
        "usage": usage_json(&done.usage),
    })))
}

/// Validates roles and flattens content parts to text.
fn messages(msgs: Vec<Message>) -> Result<Vec<ChatMessage>, ApiError> {
    if msgs.is_empty() {
        return Err(ApiError::invalid(
            "messages",
            "`messages` must contain at least one message",
        ));
    }
    let mut out = Vec::with_capacity(msgs.len());
    for (i, m) in msgs.into_iter().enumerate() {
        let role = match m.role.as_str() {
            "system" | "user" | "assistant" | "tool" => m.role.clone(),
            "developer" => "system".to_string(),
            other => {
                return Err(ApiError::invalid(
                    format!("messages[{i}].role"),
                    format!(
                        "`messages[{i}].role` {other:?} is not one of system, developer, user, assistant, tool"
                    ),
                ));
            }
        };
        let content = match m.content {
            Some(Content::Text(t)) => t,
            Some(Content::Parts(parts)) => {
                let mut text = String::new();
                for (j, p) in parts.into_iter().enumerate() {
                    match (p.kind.as_str(), p.text) {
                        ("text", Some(t)) => text.push_str(&t),
                        (kind, _) => {
                            return Err(ApiError::invalid(
                                format!("messages[{i}].content[{j}]"),
                                format!(
                                    "content parts of type {kind:?} are not supported (only text parts with `text`)"
                                ),
                            ));
                        }
                    }
                }
                text
            }
            None if role == "assistant" => String::new(),
            None => {
                return Err(ApiError::invalid(
                    format!("messages[{i}].content"),
                    format!("`messages[{i}].content` is required for role {role:?}"),
                ));
            }
        };
        out.push(ChatMessage::new(role, content));
    }
    Ok(out)
}

/// Chunks of a streamed chat completion.
struct ChatChunks {
    id: String,
    created: u64,
    model: String,
}

impl ChatChunks {
    fn chunk(&self, delta: Value, finish: Value) -> Value {
        json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": SYSTEM_FINGERPRINT,
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
        })
    }
}

impl SseFormat for ChatChunks {
    fn first(&self) -> Option<Value> {
        Some(self.chunk(json!({"role": "assistant", "content": ""}), Value::Null))
    }

    fn delta(&self, text: &str) -> Value {
        self.chunk(json!({"content": text}), Value::Null)
    }

    fn finish(&self, reason: &str) -> Value {
        self.chunk(json!({}), json!(reason))
    }

    fn usage(&self, usage: &Usage) -> Value {
        json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": SYSTEM_FINGERPRINT,
            "choices": [],
            "usage": usage_json(usage),
        })
    }
}
