//! Anthropic's Messages API: `POST /v1/messages` (whole or streamed as Anthropic's named
//! events, tools as `tool_use` blocks) and `POST /v1/messages/count_tokens`, on the chat path
//! every conversation takes (`openai::chat_run`, `openai::run`). `cache_control` breakpoints
//! become pins of the conversation's prefix up to each marked block, in the caller's namespace
//! only, for the breakpoint's TTL (`5m` or `1h`), evicted after other blocks rather than never
//! (a tenant cannot hold the pool); usage reports what the request found cached
//! (`cache_read_input_tokens`) and what it computed to cache (`cache_creation_input_tokens`),
//! except in a padded namespace, where hits are not told. Errors take Anthropic's shape.

mod convert;
mod events;

use std::time::Duration;

use bytes::Bytes;
use memoria_kv::PinLevel;
use memoria_sched::StopReason;
use serde_json::{Value, json};

use crate::body::{Response, bytes_response, json_response, ok_json};
use crate::error::ApiError;
use crate::openai::chat_run::{Prepared, prepare};
use crate::openai::prompt::{Render, chat_tokens_as};
use crate::openai::run;
use crate::openai::tools::Answer;
use crate::openai::{Ctx, response_id};

/// The eviction priority of breakpoint pins: after every namespace's ordinary blocks.
const PIN_PRIORITY: i32 = 1 << 20;

/// An error in Anthropic's shape.
pub fn error_response(e: ApiError) -> Response {
    let kind = match e.status.as_u16() {
        400 | 405 | 408 | 413 | 415 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        429 => "rate_limit_error",
        503 | 529 => "overloaded_error",
        _ => "api_error",
    };
    let mut resp = json_response(
        e.status,
        &json!({"type": "error", "error": {"type": kind, "message": e.message}}),
    );
    if let Some(s) = e.retry_after
        && let Ok(v) = http::HeaderValue::from_str(&s.to_string())
    {
        resp.headers_mut().insert(http::header::RETRY_AFTER, v);
    }
    resp
}

/// What the breakpoints cost and found: tokens read from the cache, tokens computed to cache
/// them, and the longest cached prefix.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct CacheUse {
    pub read: usize,
    pub created: usize,
    pub prefix: usize,
}

/// Usage in Anthropic's shape: `input_tokens` are the prompt tokens after the last breakpoint.
pub(crate) fn usage_json(prompt: usize, output: usize, c: CacheUse) -> Value {
    json!({
        "input_tokens": prompt.saturating_sub(c.read + c.created),
        "output_tokens": output,
        "cache_read_input_tokens": c.read,
        "cache_creation_input_tokens": c.created,
    })
}

/// `POST /v1/messages`.
pub async fn messages(ctx: Ctx, body: Bytes) -> Result<Response, ApiError> {
    let v: Value = crate::openai::parse_json(&body)?;
    let conv = convert::convert(&v)?;
    ctx.check_model(conv.chat.model.as_deref())?;
    let stop_sequences: Vec<String> = match &conv.chat.stop {
        Some(crate::openai::schema::Stop::Many(v)) => v.clone(),
        Some(crate::openai::schema::Stop::One(s)) => vec![s.clone()],
        None => Vec::new(),
    };
    let prepared = prepare(&ctx, conv.chat).await?;
    let prompt_len = prepared.plan.prompts.first().map_or(0, |(p, _)| p.len());
    let permit = ctx.admit().await?;
    let cache = pin_breakpoints(&ctx, &prepared, &conv.breakpoints, conv.messages).await?;
    let Prepared {
        plan,
        tool_plan,
        syntax,
        stream,
        ..
    } = prepared;
    let running = run::start(&ctx, "messages", plan, stream).await?;
    let head = events::Head {
        id: response_id("msg"),
        model: ctx.model_id().to_string(),
        prompt: prompt_len,
        cache,
        stop_sequences,
    };
    if stream && tool_plan.is_none() {
        return Ok(running.sse(Box::new(events::MessageEvents::new(head)), false, permit));
    }
    let (done, usage, _) = running.collect().await?;
    drop(permit);
    let Some(f) = done.into_iter().next() else {
        return Err(ApiError::internal("the generation produced no answer"));
    };
    let (content, stop_reason) = match tool_plan
        .is_some()
        .then(|| {
            crate::openai::tools::parse_answer(&f.text, head.id.trim_start_matches("msg-"), syntax)
        })
        .flatten()
    {
        Some(Answer::Calls(calls)) => (tool_blocks(&calls), "tool_use"),
        Some(Answer::Text(t)) => (
            vec![json!({"type": "text", "text": t})],
            head.stop_reason(f.reason),
        ),
        None => (
            vec![json!({"type": "text", "text": f.text})],
            head.stop_reason(f.reason),
        ),
    };
    let message = json!({
        "id": head.id,
        "type": "message",
        "role": "assistant",
        "model": head.model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": head.stop_sequence(f.reason, stop_reason),
        "usage": usage_json(prompt_len, usage.completion_tokens, head.cache),
    });
    if stream {
        // With tools the answer's form is known only at its end: its events go out at once.
        let text = run::events(true, events::whole(&message));
        let mut r = bytes_response(http::StatusCode::OK, "text/event-stream", text);
        r.headers_mut().insert(
            http::header::CACHE_CONTROL,
            http::HeaderValue::from_static("no-cache"),
        );
        return Ok(r);
    }
    Ok(ok_json(&message))
}

/// OpenAI-shaped tool calls as Anthropic `tool_use` blocks (`input` parsed from the arguments).
fn tool_blocks(calls: &[Value]) -> Vec<Value> {
    calls
        .iter()
        .map(|c| {
            let f = &c["function"];
            let args = f["arguments"].as_str().unwrap_or("{}");
            let input: Value = serde_json::from_str(args).unwrap_or(json!({}));
            let id = c["id"]
                .as_str()
                .unwrap_or("")
                .replacen("call_", "toolu_", 1);
            json!({"type": "tool_use", "id": id, "name": f["name"], "input": input})
        })
        .collect()
}

/// `POST /v1/messages/count_tokens`: the prompt's tokens as the chat template renders them.
pub async fn count_tokens(ctx: Ctx, body: Bytes) -> Result<Response, ApiError> {
    let mut v: Value = crate::openai::parse_json(&body)?;
    if let Some(obj) = v.as_object_mut() {
        obj.entry("max_tokens").or_insert(json!(1));
        obj.remove("stream");
    }
    let conv = convert::convert(&v)?;
    ctx.check_model(conv.chat.model.as_deref())?;
    let prepared = prepare(&ctx, conv.chat).await?;
    let n = prepared.plan.prompts.first().map_or(0, |(p, _)| p.len());
    Ok(ok_json(&json!({"input_tokens": n})))
}

/// Pins each breakpoint's prefix (the conversation up to its block, as the prompt's leading
/// tokens) for its TTL, shortest first; counts what was found and what was computed.
async fn pin_breakpoints(
    ctx: &Ctx,
    prepared: &Prepared,
    breakpoints: &[(usize, Duration)],
    converted: usize,
) -> Result<CacheUse, ApiError> {
    let Some((prompt, _)) = prepared.plan.prompts.first() else {
        return Ok(CacheUse::default());
    };
    if breakpoints.is_empty() {
        return Ok(CacheUse::default());
    }
    // Tool instructions may have added a system message in front.
    let shift = prepared.messages.len().saturating_sub(converted);
    let tok = ctx.state.engine.tokenizer();
    let tools = prepared.template_tools.as_deref();
    let closed = Render {
        generation_prompt: false,
        continue_final: false,
        ..Render::default()
    };
    let mut use_ = CacheUse::default();
    let mut last = 0;
    for &(k, ttl) in breakpoints {
        let upto = (k + shift).min(prepared.messages.len());
        let head = chat_tokens_as(
            &ctx.state.chat,
            tok,
            &prepared.messages[..upto],
            tools,
            &closed,
        )?;
        let common = head.iter().zip(prompt).take_while(|(a, b)| a == b).count();
        // The last token stays uncached, as every prompt's does.
        let len = common.min(prompt.len().saturating_sub(1));
        if len <= last {
            continue;
        }
        last = len;
        let info = ctx
            .state
            .engine
            .warm(
                ctx.ns.id,
                prompt[..len].to_vec(),
                PinLevel::Priority(PIN_PRIORITY),
                Some(ttl),
            )
            .await?;
        use_.created += info.tokens.saturating_sub(info.cached_tokens);
        use_.prefix = info.tokens;
    }
    use_.read = use_.prefix.saturating_sub(use_.created);
    if ctx.ns.spec.pads_hits() {
        // A padded namespace hides its hits: everything counts as written.
        use_.created = use_.prefix;
        use_.read = 0;
    }
    Ok(use_)
}

/// Anthropic's `stop_reason` of a generation that wrote text.
fn text_stop(reason: StopReason) -> &'static str {
    match reason {
        StopReason::Eog => "end_turn",
        StopReason::StopString => "stop_sequence",
        StopReason::Length | StopReason::ContextFull => "max_tokens",
    }
}
