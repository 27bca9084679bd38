//! `POST /v1/completions`: a text prompt (tokenized as llama-server does: BOS per the model,
//! special tokens parsed) or token ids, or a list of either (each prompt its own choices, in
//! order); `n` choices per prompt, or the `n` best of `best_of` by cumulative log-prob; `echo`
//! prepends the prompt text; `logprobs: k` answers OpenAI's legacy log-probs object.

use std::sync::Arc;

use bytes::Bytes;
use memoria_model::tokenizer::Tokenizer;
use memoria_sched::sampling::TokenLogprobs;
use memoria_sched::{GenerateParams, Usage};
use serde_json::{Value, json};

use super::logprobs::Legacy;
use super::run::{self, Finished, Plan, SseFormat};
use super::schema::{CompletionRequest, Prompt};
use super::{Ctx, response_id, unix_now, usage_json};
use super::{params, structured};
use crate::body::{Response, ok_json};
use crate::error::ApiError;

/// The most prompts one request may list.
const MAX_PROMPTS: usize = params::MAX_CHOICES;

/// Handles one request.
pub async fn handle(ctx: Ctx, body: Bytes) -> Result<Response, ApiError> {
    let mut req: CompletionRequest = super::json::parse(&body)?;
    ctx.check_model(req.model.as_deref())?;
    params::unsupported(
        "suffix",
        req.suffix.as_ref().is_some_and(|s| !s.is_empty()),
        "suffix (insertion)",
    )?;
    let stream = req.stream.unwrap_or(false);
    let include_usage = params::include_usage(stream, req.stream_options.as_ref())?;
    let k = match req.logprobs {
        Some(k) if k > 5 => {
            return Err(ApiError::invalid(
                "logprobs",
                format!("`logprobs` = {k} is out of range: use 0 to 5"),
            ));
        }
        k => k.map(|k| usize::try_from(k).unwrap_or(0)),
    };
    let echo = req.echo.unwrap_or(false);
    if echo && k.is_some() {
        return Err(ApiError::invalid(
            "echo",
            "`echo` with `logprobs` (log-probs of the prompt) is not supported",
        ));
    }
    let tok = ctx.state.engine.tokenizer().clone();
    let prompts = prompts(&tok, req.prompt)?;
    let n = params::choices("n", req.n, prompts.len())?;
    let best_of = params::choices("best_of", req.best_of.or(req.n), prompts.len())?;
    if best_of < n {
        return Err(ApiError::invalid(
            "best_of",
            format!("`best_of` = {best_of} must be at least `n` = {n}"),
        ));
    }
    if stream && best_of > n {
        return Err(ApiError::invalid(
            "best_of",
            "`best_of` above `n` cannot be streamed (the best choices are known only at the end)",
        ));
    }
    let mut sampling = params::sampling(&params::sampling_fields_of!(req))?;
    sampling.logit_bias = params::logit_bias(req.logit_bias.as_ref(), tok.n_vocab())?;
    // Choosing the best of several needs every token's log-prob.
    sampling.logprobs = k.or((best_of > n).then_some(0));
    let stop = params::stops(req.stop)?;
    let ignore_eos = req.ignore_eos.unwrap_or(false);
    let constraint = structured::constraint(&ctx.state, req.response_format.take()).await?;
    let mut planned = Vec::with_capacity(prompts.len());
    let mut echoes = Vec::with_capacity(prompts.len());
    for (ids, text) in prompts {
        let budget = params::token_budget(
            "max_tokens",
            req.max_tokens,
            ids.len(),
            ctx.max_context(),
            ctx.ns.spec.limits.max_tokens_per_request,
        )
        .map_err(|mut e| {
            if e.param.as_deref() == Some("messages") {
                e.param = Some("prompt".into());
            }
            e
        })?;
        planned.push((ids, budget));
        echoes.push(echo.then_some(text));
    }
    let lens: Vec<usize> = planned.iter().map(|(ids, _)| ids.len()).collect();
    let mut budgets: Vec<usize> = planned.iter().map(|&(_, b)| b).collect();
    params::share_budgets(
        "max_tokens",
        req.max_tokens,
        &lens,
        best_of,
        &mut budgets,
        ctx.max_context(),
    )?;
    for ((_, b), share) in planned.iter_mut().zip(budgets) {
        *b = share;
    }
    let permit = ctx.admit().await?;
    let plan = Plan {
        prompts: planned,
        n: best_of,
        params: GenerateParams {
            constraint,
            ..params::generate_params(sampling, 0, stop, ignore_eos)
        },
    };
    let running = run::start(&ctx, "completions", plan, stream).await?;
    let mut fmt = CompletionChunks {
        id: response_id("cmpl"),
        created: unix_now(),
        model: ctx.model_id().to_string(),
        echoes,
        per_prompt: best_of,
        tok,
        k,
        offsets: Vec::new(),
    };
    if stream {
        fmt.offsets = (0..fmt.echoes.len() * best_of)
            .map(|i| Legacy::after(fmt.echo(i)))
            .collect();
        return Ok(running.sse(Box::new(fmt), include_usage, permit));
    }
    let (done, usage) = running.collect().await?;
    drop(permit);
    let mut choices = Vec::with_capacity(fmt.echoes.len() * n);
    for (p, group) in chunks(done, best_of).into_iter().enumerate() {
        for f in best(group, n) {
            let index = choices.len();
            let echo = fmt.echoes.get(p).cloned().flatten().unwrap_or_default();
            let lp = match k {
                Some(k) => Legacy::after(&echo).block(&fmt.tok, &f.logprobs, k),
                None => Value::Null,
            };
            choices.push(json!({
                "text": format!("{echo}{}", f.text),
                "index": index,
                "logprobs": lp,
                "finish_reason": f.reason.as_str(),
            }));
        }
    }
    Ok(ok_json(&json!({
        "id": fmt.id,
        "object": "text_completion",
        "created": fmt.created,
        "model": fmt.model,
        "system_fingerprint": "memoria",
        "choices": choices,
        "usage": usage_json(&usage),
    })))
}

/// The prompts as token ids with their text (for `echo`); each non-empty, ids in the vocabulary.
fn prompts(tok: &Tokenizer, prompt: Prompt) -> Result<Vec<(Vec<u32>, String)>, ApiError> {
    let text = |t: String| (tok.encode(&t, true, true), t);
    let ids = |ids: Vec<u32>| {
        let t = tok.decode(&ids, false, true);
        (ids, t)
    };
    let out: Vec<(Vec<u32>, String)> = match prompt {
        Prompt::Text(t) => vec![text(t)],
        Prompt::Texts(v) => v.into_iter().map(text).collect(),
        Prompt::Tokens(v) => vec![ids(v)],
        Prompt::TokenLists(v) => v.into_iter().map(ids).collect(),
    };
    if out.is_empty() {
        return Err(ApiError::invalid("prompt", "`prompt` is an empty list"));
    }
    if out.len() > MAX_PROMPTS {
        return Err(ApiError::invalid(
            "prompt",
            format!(
                "`prompt` lists {} prompts; at most {MAX_PROMPTS} are allowed",
                out.len()
            ),
        ));
    }
    let n_vocab = tok.n_vocab();
    for (i, (ids, _)) in out.iter().enumerate() {
        if let Some(bad) = ids.iter().find(|&&t| t as usize >= n_vocab) {
            return Err(ApiError::invalid(
                "prompt",
                format!("token id {bad} (prompt {i}) is not in the vocabulary ({n_vocab} tokens)"),
            ));
        }
        if ids.is_empty() {
            return Err(ApiError::invalid("prompt", format!("prompt {i} is empty")));
        }
    }
    Ok(out)
}

/// `v` cut into consecutive groups of `size`.
fn chunks<T>(v: Vec<T>, size: usize) -> Vec<Vec<T>> {
    let mut out = Vec::new();
    let mut it = v.into_iter().peekable();
    while it.peek().is_some() {
        out.push(it.by_ref().take(size.max(1)).collect());
    }
    out
}

/// The `n` choices of highest cumulative log-prob, best first (all of them, in order, when
/// `n` is the group's size).
fn best(mut group: Vec<Finished>, n: usize) -> Vec<Finished> {
    if n < group.len() {
        // A stable sort: equal sums keep the lower index first.
        group.sort_by(|a, b| b.cumulative_logprob.total_cmp(&a.cumulative_logprob));
        group.truncate(n);
    }
    group
}

/// Chunks of a streamed completion.
struct CompletionChunks {
    id: String,
    created: u64,
    model: String,
    /// Each prompt's echoed text.
    echoes: Vec<Option<String>>,
    per_prompt: usize,
    tok: Arc<Tokenizer>,
    k: Option<usize>,
    /// Each choice's `text_offset` state.
    offsets: Vec<Legacy>,
}

impl CompletionChunks {
    fn echo(&self, index: usize) -> &str {
        self.echoes
            .get(index / self.per_prompt.max(1))
            .and_then(Option::as_deref)
            .unwrap_or("")
    }

    fn chunk(&self, index: usize, text: &str, logprobs: Value, finish: Value) -> Value {
        json!({
            "id": self.id,
            "object": "text_completion",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": "memoria",
            "choices": [{"text": text, "index": index, "logprobs": logprobs, "finish_reason": finish}],
        })
    }
}

impl SseFormat for CompletionChunks {
    fn first(&mut self, index: usize) -> Option<Value> {
        let echo = self.echo(index);
        (!echo.is_empty()).then(|| self.chunk(index, echo, Value::Null, Value::Null))
    }

    fn delta(&mut self, index: usize, text: &str, lps: &[TokenLogprobs]) -> Value {
        let lp = match (self.k, self.offsets.get_mut(index)) {
            (Some(k), Some(legacy)) => legacy.block(&self.tok, lps, k),
            _ => Value::Null,
        };
        self.chunk(index, text, lp, Value::Null)
    }

    fn finish(&mut self, index: usize, reason: &str) -> Value {
        self.chunk(index, "", Value::Null, json!(reason))
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

#[cfg(test)]
mod tests {
    use super::*;
    use memoria_sched::generate::StopReason;

    fn finished(lp: f64) -> Finished {
        Finished {
            text: format!("{lp}"),
            reason: StopReason::Length,
            logprobs: Vec::new(),
            cumulative_logprob: lp,
        }
    }

    #[test]
    fn best_of_keeps_the_highest_cumulative_logprobs_in_order() {
        let group = vec![
            finished(-3.0),
            finished(-1.0),
            finished(-2.0),
            finished(-1.0),
        ];
        let kept: Vec<String> = best(group, 2).into_iter().map(|f| f.text).collect();
        assert_eq!(kept, ["-1", "-1"]);
        let group = vec![finished(-3.0), finished(-1.0)];
        let kept: Vec<String> = best(group, 2).into_iter().map(|f| f.text).collect();
        assert_eq!(kept, ["-3", "-1"], "n = best_of keeps the order");
        assert_eq!(
            chunks(vec![1, 2, 3, 4, 5, 6], 3),
            [vec![1, 2, 3], vec![4, 5, 6]]
        );
    }
}
