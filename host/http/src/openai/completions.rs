//! `POST /v1/completions`: a text prompt (tokenized as llama-server does: BOS per the model,
//! special tokens parsed) or token ids, or a list of either (each prompt its own choices, in
//! order); `n` choices per prompt, or the `n` best of `best_of` by cumulative log-prob; `echo`
//! prepends the prompt text; `logprobs: k` answers OpenAI's legacy log-probs object (with
//! `echo`, the prompt's tokens too, computed whole: nothing of such a prompt comes from the
//! cache, since a cached token has no logits).

use std::sync::Arc;

use bytes::Bytes;
use memoria_model::tokenizer::Tokenizer;
use memoria_sched::GenerateParams;
use memoria_sched::StopReason;
use memoria_sched::sampling::TokenLogprobs;
use serde_json::{Value, json};

use super::completion_check::{Checked, check};
use super::logprobs::{Legacy, echoed_prompt, joined};
use super::run::{self, End, Finished, Plan, SseFormat};
use super::schema::CompletionRequest;
use super::{Ctx, response_id, unix_now, usage_json};
use super::{params, structured};
use crate::body::{Response, ok_json};
use crate::error::ApiError;

/// Handles one request.
pub async fn handle(ctx: Ctx, body: Bytes) -> Result<Response, ApiError> {
    let req: CompletionRequest = super::json::parse(&body)?;
    ctx.check_model(req.model.as_deref())?;
    let speculation = req.speculation;
    let Checked {
        stream,
        include_usage,
        k,
        echo,
        prompts,
        n,
        best_of,
        sampling,
        stop,
        ignore_eos,
        response_format,
        max_tokens,
    } = check(
        req,
        ctx.state.engine.tokenizer(),
        &ctx.state.config.defaults,
    )?;
    let tok = ctx.state.engine.tokenizer().clone();
    let constraint = structured::constraint(&ctx.state, response_format).await?;
    let mut planned = Vec::with_capacity(prompts.len());
    let mut echoes = Vec::with_capacity(prompts.len());
    for (ids, text) in prompts {
        let budget = params::token_budget(
            "max_tokens",
            max_tokens,
            ids.len(),
            ctx.max_context(),
            (
                ctx.ns.spec.limits.max_tokens_per_request,
                ctx.state.config.defaults.n_predict,
            ),
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
        max_tokens,
        &lens,
        best_of,
        &mut budgets,
        ctx.max_context(),
    )?;
    for ((_, b), share) in planned.iter_mut().zip(budgets) {
        *b = share;
    }
    let score = k.filter(|_| echo);
    let echoed_ids: Vec<Vec<u32>> = match score {
        Some(_) => planned.iter().map(|(ids, _)| ids.clone()).collect(),
        None => Vec::new(),
    };
    let permit = ctx.admit().await?;
    let plan = Plan {
        score,
        prompts: planned,
        n: best_of,
        params: GenerateParams {
            constraint,
            ..params::generate_params(sampling, 0, stop, ignore_eos)
        },
        speculation,
    };
    let running = run::start(&ctx, "completions", plan, stream).await?;
    let prompt_blocks: Vec<Value> = match score {
        Some(k) => echoed_ids
            .iter()
            .zip(&running.prompt_logprobs)
            .map(|(ids, lps)| echoed_prompt(&tok, ids, lps, k))
            .collect(),
        None => Vec::new(),
    };
    let mut fmt = CompletionChunks {
        prompt_blocks,
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
    let (done, usage, timings) = running.collect().await?;
    drop(permit);
    let mut choices = Vec::with_capacity(fmt.echoes.len() * n);
    for (p, group) in chunks(done, best_of).into_iter().enumerate() {
        for f in best(group, n) {
            let index = choices.len();
            let echo = fmt.echoes.get(p).cloned().flatten().unwrap_or_default();
            let lp = match k {
                Some(k) => {
                    let generated = Legacy::after(&echo).block(&fmt.tok, &f.logprobs, k);
                    match fmt.prompt_blocks.get(p) {
                        Some(prompt) => joined(prompt.clone(), generated),
                        None => generated,
                    }
                }
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
        "timings": timings.to_json(),
    })))
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
    /// Each prompt's log-probs object (`echo` with `logprobs`).
    prompt_blocks: Vec<Value>,
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
        let prompt = self
            .prompt_blocks
            .get(index / self.per_prompt.max(1))
            .cloned()
            .unwrap_or(Value::Null);
        (!echo.is_empty() || !prompt.is_null())
            .then(|| self.chunk(index, echo, prompt, Value::Null))
    }

    fn delta(
        &mut self,
        index: usize,
        text: &str,
        _ids: &[u32],
        lps: &[TokenLogprobs],
    ) -> Option<Value> {
        let lp = match (self.k, self.offsets.get_mut(index)) {
            (Some(k), Some(legacy)) => legacy.block(&self.tok, lps, k),
            _ => Value::Null,
        };
        Some(self.chunk(index, text, lp, Value::Null))
    }

    fn finish(&mut self, index: usize, reason: StopReason, end: Option<&End>) -> Value {
        let mut c = self.chunk(index, "", Value::Null, json!(reason.as_str()));
        super::chat::ChatChunks::add_timings(&mut c, end);
        c
    }

    fn usage(&self, end: &End) -> Value {
        json!({
            "id": self.id,
            "object": "text_completion",
            "created": self.created,
            "model": self.model,
            "choices": [],
            "usage": usage_json(&end.usage),
            "timings": end.timings.to_json(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finished(lp: f64) -> Finished {
        Finished {
            text: format!("{lp}"),
            tokens: Vec::new(),
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
