//! OpenAI's Responses API, `POST /v1/responses` (and `/responses`): whole or streamed
//! (`response.*` events), function tools, `text.format`, on the chat path every conversation
//! takes (`openai::chat_run`, `openai::run`). A stored response (`store`, the default) keeps its
//! conversation (`store.rs`) and its context's K/V: the blocks of its prompt and answer are
//! pinned for an hour (evicted after ordinary blocks, never held against the pool) and, with
//! `--store`, saved as a session, so a request with `previous_response_id` finds its whole
//! earlier context cached, after a restart too (`usage.input_tokens_details.cached_tokens`).

mod convert;
mod events;
pub mod store;

use std::time::Duration;

use bytes::Bytes;
use memoria_kv::PinLevel;
use memoria_sched::StopReason;
use serde_json::{Map, Value, json};

use crate::body::{Response, bytes_response, ok_json};
use crate::error::ApiError;
use crate::openai::chat_run::{Prepared, prepare};
use crate::openai::run;
use crate::openai::schema::ChatRequest;
use crate::openai::tools::Answer;
use crate::openai::{Ctx, unix_now};
use crate::state::AppState;
use events::Head;
use store::Record;

/// How long a stored response's blocks stay pinned.
const KEEP: Duration = Duration::from_secs(3600);
/// Their eviction priority: after every namespace's ordinary blocks.
const KEEP_PRIORITY: i32 = 1 << 20;

/// Handles one request.
pub async fn handle(ctx: Ctx, body: Bytes) -> Result<Response, ApiError> {
    let v: Value = crate::openai::parse_json(&body)?;
    let r = v
        .as_object()
        .ok_or_else(|| ApiError::bad_request("the body must be a JSON object"))?;
    let store = match r.get("store") {
        None | Some(Value::Null) => true,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(ApiError::invalid("store", "`store` must be a boolean")),
    };
    let previous = match r.get("previous_response_id") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => {
            return Err(ApiError::invalid(
                "previous_response_id",
                "`previous_response_id` must be a string",
            ));
        }
    };
    let mut conversation = match &previous {
        Some(id) => {
            ctx.state
                .responses
                .get(&ctx.ns.name, id)
                .ok_or_else(|| {
                    ApiError::not_found(format!("Previous response with id '{id}' not found."))
                        .with_param("previous_response_id")
                })?
                .messages
        }
        None => Vec::new(),
    };
    conversation.extend(convert::input_messages(r.get("input"))?);
    if conversation.is_empty() {
        return Err(ApiError::invalid("input", "`input` is required"));
    }
    let instructions = match r.get("instructions") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => {
            return Err(ApiError::invalid(
                "instructions",
                "`instructions` must be a string",
            ));
        }
    };
    let mut messages = Vec::with_capacity(conversation.len() + 1);
    if let Some(i) = &instructions {
        messages.push(json!({"role": "system", "content": i}));
    }
    messages.extend(conversation.iter().cloned());
    let chat: ChatRequest =
        crate::openai::parse_json(convert::chat_body(r, messages)?.to_string().as_bytes())?;
    ctx.check_model(chat.model.as_deref())?;
    let prepared = prepare(&ctx, chat).await?;
    let prompt = prepared
        .plan
        .prompts
        .first()
        .map(|(p, _)| p.clone())
        .unwrap_or_default();
    let Prepared {
        plan,
        tool_plan,
        syntax,
        stream,
        ..
    } = prepared;
    let permit = ctx.admit().await?;
    let running = run::start(&ctx, "responses", plan, stream).await?;
    let head = Head::new(&ctx, r, previous, instructions, store);
    let keeper = Keeper {
        state: ctx.state.clone(),
        ns: ctx.ns.clone(),
        id: head.id.clone(),
        conversation,
        prompt,
        store,
    };
    if stream && tool_plan.is_none() {
        let fmt = events::ResponseEvents::new(head, keeper);
        return Ok(running.sse(Box::new(fmt), false, permit));
    }
    let (done, usage, _) = running.collect().await?;
    drop(permit);
    let Some(f) = done.into_iter().next() else {
        return Err(ApiError::internal("the generation produced no answer"));
    };
    let answer = match tool_plan.is_some() {
        true => {
            crate::openai::tools::parse_answer(&f.text, head.id.trim_start_matches("resp_"), syntax)
        }
        false => None,
    };
    let (output, assistant) = match answer {
        Some(Answer::Calls(calls)) => head.calls(&calls),
        Some(Answer::Text(t)) => head.text(&t),
        None => head.text(&f.text),
    };
    let response = head.response(&output, Some(&usage), f.reason);
    keeper.keep(assistant, &f.tokens).await;
    if stream {
        let text = run::events(true, events::whole(&head, &response));
        let mut resp = bytes_response(http::StatusCode::OK, "text/event-stream", text);
        resp.headers_mut().insert(
            http::header::CACHE_CONTROL,
            http::HeaderValue::from_static("no-cache"),
        );
        return Ok(resp);
    }
    Ok(ok_json(&response))
}

/// Keeps a stored response: its record, and its context's blocks pinned (and saved with a
/// durable store).
pub(crate) struct Keeper {
    state: std::sync::Arc<AppState>,
    ns: std::sync::Arc<memoria_tenant::Namespace>,
    id: String,
    conversation: Vec<Value>,
    prompt: Vec<u32>,
    store: bool,
}

impl Keeper {
    /// Stores the conversation with `assistant` (the answer as a chat message) and keeps the K/V
    /// of the prompt and `generated` tokens. Failures cost only the cache: they are logged.
    pub async fn keep(self, assistant: Value, generated: &[u32]) {
        if !self.store {
            return;
        }
        let mut messages = self.conversation;
        messages.push(assistant);
        let mut tokens = self.prompt;
        tokens.extend_from_slice(generated);
        let rec = Record {
            id: self.id.clone(),
            messages,
            tokens: tokens.clone(),
        };
        if let Err(e) = self.state.responses.put(&self.ns.name, rec) {
            eprintln!("memoria: response {} not stored: {e}", self.id);
        }
        let engine = &self.state.engine;
        let ns = self.ns.id;
        if let Err(e) = engine
            .warm(
                ns,
                tokens.clone(),
                PinLevel::Priority(KEEP_PRIORITY),
                Some(KEEP),
            )
            .await
        {
            eprintln!(
                "memoria: response {}: its context was not pinned: {e}",
                self.id
            );
        }
        if self.state.responses.durable() {
            let saved = async {
                let s = engine.open(ns).await?;
                let r = async {
                    engine.append(ns, s, tokens).await?;
                    engine.prefill(ns, s).await?;
                    engine.save(ns, s, &format!("resp:{}", self.id)).await
                }
                .await;
                let _ = engine.close(ns, s).await;
                r
            }
            .await;
            if let Err(e) = saved {
                eprintln!(
                    "memoria: response {}: its context was not saved: {e}",
                    self.id
                );
            }
        }
    }
}

/// The `status` of a response that ended for `reason`, with its `incomplete_details`.
fn status(reason: StopReason) -> (&'static str, Value) {
    match reason {
        StopReason::Length | StopReason::ContextFull => {
            ("incomplete", json!({"reason": "max_output_tokens"}))
        }
        _ => ("completed", Value::Null),
    }
}

/// The request fields a response echoes.
fn echoed(r: &Map<String, Value>, key: &str, default: Value) -> Value {
    r.get(key)
        .filter(|v| !v.is_null())
        .cloned()
        .unwrap_or(default)
}

/// Seconds since the epoch, for `created_at`.
fn now() -> u64 {
    unix_now()
}
