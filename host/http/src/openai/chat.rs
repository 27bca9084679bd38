//! `POST /v1/chat/completions`: validates the conversation, renders it with the model's chat
//! template (ChatML when the model has none), tokenizes the result as llama-server does (BOS
//! unless the template already wrote it, special tokens parsed) and generates `n` choices, with
//! `logit_bias` and `logprobs`/`top_logprobs` in OpenAI's shapes (streamed too); a reasoning
//! model's reasoning is answered apart, as `reasoning_content` (`reasoning`).

use std::sync::Arc;

use bytes::Bytes;
use memoria_model::tokenizer::Tokenizer;
use memoria_sched::StopReason;
use memoria_sched::Usage;
use memoria_sched::sampling::TokenLogprobs;
use serde_json::{Value, json};

use super::chat_run::{Prepared, prepare};
use super::reasoning::ReasoningSyntax;
use super::reasoning_stream::ReasoningChunks;
use super::run::{self, End, SseFormat};
use super::schema::ChatRequest;
use super::tool_stream::ToolChunks;
use super::tool_syntax::ToolSyntax;
use super::{Ctx, response_id, unix_now, usage_json};
use super::{logprobs, tools};
use crate::body::{Response, ok_json};
use crate::error::ApiError;

const SYSTEM_FINGERPRINT: &str = "memoria";

/// `POST /v1/chat/completions/input_tokens` (llama-server's): the tokens the conversation's
/// prompt takes, rendered and checked as a chat request but not run, `{"input_tokens": N}`.
pub async fn input_tokens(ctx: Ctx, body: Bytes) -> Result<Response, ApiError> {
    let mut req: ChatRequest = super::json::parse(&body)?;
    ctx.check_model(req.model.as_deref())?;
    // Only the prompt is counted: one choice, one token of budget, nothing streamed.
    req.max_tokens = Some(1);
    req.max_completion_tokens = None;
    req.n = None;
    req.stream = None;
    let prepared = prepare(&ctx, req).await?;
    let n = prepared.plan.prompts.first().map_or(0, |(p, _)| p.len());
    Ok(ok_json(&json!({"input_tokens": n})))
}

/// Handles one request.
pub async fn handle(ctx: Ctx, body: Bytes) -> Result<Response, ApiError> {
    let req: ChatRequest = super::json::parse(&body)?;
    ctx.check_model(req.model.as_deref())?;
    let verbose = req
        .verbose
        .unwrap_or(ctx.state.config.log_level >= crate::access_log::LogLevel::Debug);
    let prepared = prepare(&ctx, req).await?;
    let tok = ctx.state.engine.tokenizer().clone();
    // llama-server's debugging aid: the prompt as the model sees it, special tokens written.
    let verbose = verbose.then(|| {
        let prompt = prepared.plan.prompts.first().map(|(p, _)| p.as_slice());
        json!({"prompt": tok.decode(prompt.unwrap_or_default(), false, true)})
    });
    let Prepared {
        plan,
        tool_plan,
        syntax,
        top_logprobs,
        stream,
        include_usage,
        ..
    } = prepared;
    let permit = ctx.admit().await?;
    let running = run::start(&ctx, "chat", plan, stream).await?;
    let id = response_id("chatcmpl");
    let created = unix_now();
    let model = ctx.model_id().to_string();
    let fmt = ChatChunks::new(&id, created, &model, tok.clone(), top_logprobs);
    let reasoning = ReasoningSyntax::detect(&ctx.state.chat);
    if stream {
        let choices = running.choices();
        // Calls stream as they are written: a call's name once whole, its arguments piece by piece.
        let inner: Box<dyn SseFormat> = match tool_plan {
            Some(_) => Box::new(ToolChunks::new(fmt.clone(), choices, syntax)),
            None => Box::new(fmt.clone()),
        };
        let sse: Box<dyn SseFormat> = match reasoning {
            ReasoningSyntax::None => inner,
            r => Box::new(ReasoningChunks::new(inner, fmt, choices, r)),
        };
        return Ok(running.sse(sse, include_usage, permit));
    }
    let (done, usage, timings) = running.collect().await?;
    drop(permit);
    if tool_plan.is_some() {
        let choices: Vec<Value> = tool_answers(&id, done, syntax, reasoning)
            .into_iter()
            .enumerate()
            .map(|(i, (message, finish))| {
                json!({"index": i, "message": message, "logprobs": null, "finish_reason": finish})
            })
            .collect();
        return Ok(completion(
            &id,
            created,
            &model,
            choices,
            (&usage, &timings),
            verbose,
        ));
    }
    let choices: Vec<Value> = done
        .into_iter()
        .enumerate()
        .map(|(i, f)| {
            let logprobs = match top_logprobs {
                Some(k) => json!({
                    "content": logprobs::chat_content(&tok, &f.logprobs, k),
                    "refusal": null,
                }),
                None => Value::Null,
            };
            let split = reasoning.split(&f.text, true);
            let mut message =
                json!({"role": "assistant", "content": split.content, "refusal": null});
            with_reasoning(&mut message, split.reasoning);
            json!({
                "index": i,
                "message": message,
                "logprobs": logprobs,
                "finish_reason": f.reason.as_str(),
            })
        })
        .collect();
    Ok(completion(
        &id,
        created,
        &model,
        choices,
        (&usage, &timings),
        verbose,
    ))
}

/// Adds a message's `reasoning_content` when the answer reasoned.
fn with_reasoning(message: &mut Value, reasoning: String) {
    if !reasoning.is_empty() {
        message["reasoning_content"] = Value::String(reasoning);
    }
}

/// A whole (non-streamed) chat completion, with llama-server's `timings`.
fn completion(
    id: &str,
    created: u64,
    model: &str,
    choices: Vec<Value>,
    (usage, timings): (&Usage, &run::Timings),
    verbose: Option<Value>,
) -> Response {
    let mut answer = json!({
        "id": id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "system_fingerprint": SYSTEM_FINGERPRINT,
        "choices": choices,
        "usage": usage_json(usage),
        "timings": timings.to_json(),
    });
    if let Some(mut v) = verbose {
        v["content"] = answer["choices"][0]["message"]["content"].clone();
        answer["__verbose"] = v;
    }
    ok_json(&answer)
}

/// Each choice's message and finish reason under a tool plan: the reasoning split off first,
/// the content read in the tool syntax.
pub(crate) fn tool_answers(
    id: &str,
    done: Vec<run::Finished>,
    syntax: ToolSyntax,
    reasoning: ReasoningSyntax,
) -> Vec<(Value, &'static str)> {
    done.into_iter()
        .enumerate()
        .map(|(i, f)| {
            let base = format!("{}_{i}", id.trim_start_matches("chatcmpl-"));
            let split = reasoning.split(&f.text, true);
            let (mut message, finish) = match tools::parse_answer(&split.content, &base, syntax) {
                Some(tools::Answer::Calls(calls)) => (
                    json!({"role": "assistant", "content": null, "tool_calls": calls, "refusal": null}),
                    "tool_calls",
                ),
                Some(tools::Answer::Text(t)) => (
                    json!({"role": "assistant", "content": t, "refusal": null}),
                    f.reason.as_str(),
                ),
                None => (
                    json!({"role": "assistant", "content": split.content, "refusal": null}),
                    f.reason.as_str(),
                ),
            };
            with_reasoning(&mut message, split.reasoning);
            (message, finish)
        })
        .collect()
}

/// Chunks of a streamed chat completion.
#[derive(Clone)]
pub(super) struct ChatChunks {
    pub(super) id: String,
    created: u64,
    model: String,
    tok: Arc<Tokenizer>,
    top_logprobs: Option<usize>,
}

impl ChatChunks {
    pub(super) fn new(
        id: &str,
        created: u64,
        model: &str,
        tok: Arc<Tokenizer>,
        top_logprobs: Option<usize>,
    ) -> Self {
        Self {
            id: id.to_string(),
            created,
            model: model.to_string(),
            tok,
            top_logprobs,
        }
    }

    pub(super) fn chunk(
        &self,
        index: usize,
        delta: Value,
        logprobs: Value,
        finish: Value,
    ) -> Value {
        json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": SYSTEM_FINGERPRINT,
            "choices": [{"index": index, "delta": delta, "logprobs": logprobs, "finish_reason": finish}],
        })
    }
}

impl ChatChunks {
    /// llama-server's `timings` on a stream's last chunk.
    pub(super) fn add_timings(chunk: &mut Value, end: Option<&End>) {
        if let (Some(end), Some(obj)) = (end, chunk.as_object_mut()) {
            obj.insert("timings".into(), end.timings.to_json());
        }
    }
}

impl SseFormat for ChatChunks {
    fn first(&mut self, index: usize) -> Option<Value> {
        Some(self.chunk(
            index,
            json!({"role": "assistant", "content": null}),
            Value::Null,
            Value::Null,
        ))
    }

    fn delta(
        &mut self,
        index: usize,
        text: &str,
        _ids: &[u32],
        lps: &[TokenLogprobs],
    ) -> Option<Value> {
        let lp = match self.top_logprobs {
            Some(k) => {
                json!({"content": logprobs::chat_content(&self.tok, lps, k), "refusal": null})
            }
            None => Value::Null,
        };
        Some(self.chunk(index, json!({"content": text}), lp, Value::Null))
    }

    fn finish(&mut self, index: usize, reason: StopReason, end: Option<&End>) -> Value {
        let mut c = self.chunk(index, json!({}), Value::Null, json!(reason.as_str()));
        ChatChunks::add_timings(&mut c, end);
        c
    }

    fn usage(&self, end: &End) -> Value {
        json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": SYSTEM_FINGERPRINT,
            "choices": [],
            "usage": usage_json(&end.usage),
            "timings": end.timings.to_json(),
        })
    }
}
