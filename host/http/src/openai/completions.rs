//! `POST /v1/completions`: a text prompt (tokenized as llama-server does: BOS per the model,
//! special tokens parsed) or token ids, one prompt per request; `echo` prepends the prompt text.

use bytes::Bytes;
use memoria_sched::Usage;
use serde_json::{Value, json};

use super::params;
use super::run::{self, SseFormat};
use super::schema::{CompletionRequest, Prompt};
use super::{Ctx, response_id, unix_now, usage_json};
use crate::body::{Response, ok_json};
use crate::error::ApiError;

/// Handles one request.
pub async fn handle(ctx: Ctx, body: Bytes) -> Result<Response, ApiError> {
    let req: CompletionRequest = super::json::parse(&body)?;
    params::check_n("n", req.n)?;
    params::check_n("best_of", req.best_of)?;
    params::unsupported("logprobs", req.logprobs.is_some_and(|n| n > 0), "logprobs")?;
    params::unsupported(
        "logit_bias",
        req.logit_bias.as_ref().is_some_and(|m| !m.is_empty()),
        "logit_bias",
    )?;
    params::unsupported(
        "suffix",
        req.suffix.as_ref().is_some_and(|s| !s.is_empty()),
        "suffix (insertion)",
    )?;
    let sampling = params::sampling(&params::sampling_fields_of!(req))?;
    let stop = params::stops(req.stop)?;
    let ignore_eos = req.ignore_eos.unwrap_or(false);
    let tok = ctx.state.engine.tokenizer().clone();
    let one = |n: usize| {
        if n == 1 {
            Ok(())
        } else {
            Err(ApiError::invalid(
                "prompt",
                format!("`prompt` has {n} prompts; send one prompt per request"),
            ))
        }
    };
    let (prompt, prompt_text) = match req.prompt {
        Prompt::Text(t) => (tok.encode(&t, true, true), t),
        Prompt::Texts(mut v) => {
            one(v.len())?;
            let t = v.pop().unwrap_or_default();
            (tok.encode(&t, true, true), t)
        }
        Prompt::Tokens(ids) => {
            let t = tok.decode(&ids, false, true);
            (ids, t)
        }
        Prompt::TokenLists(mut v) => {
            one(v.len())?;
            let ids = v.pop().unwrap_or_default();
            let t = tok.decode(&ids, false, true);
            (ids, t)
        }
    };
    let n_vocab = tok.n_vocab();
    if let Some(bad) = prompt.iter().find(|&&t| t as usize >= n_vocab) {
        return Err(ApiError::invalid(
            "prompt",
            format!("token id {bad} is not in the vocabulary ({n_vocab} tokens)"),
        ));
    }
    let budget = params::token_budget(
        "max_tokens",
        req.max_tokens,
        prompt.len(),
        ctx.max_context(),
        ctx.ns.spec.limits.max_tokens_per_request,
    )
    .map_err(|mut e| {
        if e.param.as_deref() == Some("messages") {
            e.param = Some("prompt".into());
        }
        e
    })?;
    let echo = req.echo.unwrap_or(false).then_some(prompt_text);
    let stream = req.stream.unwrap_or(false);
    let include_usage = req
        .stream_options
        .as_ref()
        .and_then(|o| o.include_usage)
        .unwrap_or(false);
    let permit = ctx.admit().await?;
    let gen_params = params::generate_params(sampling, budget, stop, ignore_eos);
    let running = run::start(&ctx, "completions", prompt, gen_params, stream).await?;
    let fmt = CompletionChunks {
        id: response_id("cmpl"),
        created: unix_now(),
        model: ctx.model_id().to_string(),
        echo,
    };
    if stream {
        return Ok(running.sse(Box::new(fmt), include_usage, permit));
    }
    let done = running.collect().await?;
    drop(permit);
    let text = match &fmt.echo {
        Some(p) => format!("{p}{}", done.text),
        None => done.text,
    };
    Ok(ok_json(&json!({
        "id": fmt.id,
        "object": "text_completion",
        "created": fmt.created,
        "model": fmt.model,
        "system_fingerprint": "memoria",
        "choices": [{"text": text, "index": 0, "logprobs": null, "finish_reason": done.reason.as_str()}],
        "usage": usage_json(&done.usage),
    })))
}

/// Chunks of a streamed completion.
struct CompletionChunks {
    id: String,
    created: u64,
    model: String,
    echo: Option<String>,
}

impl CompletionChunks {
    fn chunk(&self, text: &str, finish: Value) -> Value {
        json!({
            "id": self.id,
            "object": "text_completion",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": "memoria",
            "choices": [{"text": text, "index": 0, "logprobs": null, "finish_reason": finish}],
        })
    }
}

impl SseFormat for CompletionChunks {
    fn first(&self) -> Option<Value> {
        self.echo.as_ref().map(|p| self.chunk(p, Value::Null))
    }

    fn delta(&self, text: &str) -> Value {
        self.chunk(text, Value::Null)
    }

    fn finish(&self, reason: &str) -> Value {
        self.chunk("", json!(reason))
    }

    fn usage(&self, usage: &Usage) -> Value {
        json!({
            "id": self.id,
            "object": "text_completion",
            "created": self.created,
            "model": self.model,
            "choices": [],
            "usage": usage_json(usage),
        })
    }
}
