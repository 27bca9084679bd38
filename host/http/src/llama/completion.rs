//! `POST /completion` (and `/completions`): llama-server's own completion, whole or streamed
//! (`data: {...}` events, the last with `"stop": true`), on the same engine path as the OpenAI
//! routes: the prompts (text, ids or a mix; several give an array of answers) run as one plan
//! of `openai::run`, each answer in llama-server's shape (`content`, `tokens`,
//! `generation_settings`, `stop_type`, `timings`, `completion_probabilities` with `n_probs`).

use std::sync::Arc;

use bytes::Bytes;
use memoria_model::tokenizer::Tokenizer;
use memoria_sched::GenerateParams;
use memoria_sched::StopReason;
use memoria_sched::sampling::TokenLogprobs;
use serde_json::{Value, json};

use super::format::{generation_settings, pick_fields, probabilities, stop_type};
use super::request::{self, NativeRequest};
use crate::body::{Response, ok_json};
use crate::error::ApiError;
use crate::openai::run::{self, End, Plan, SseFormat};
use crate::openai::{Ctx, params, structured};

/// Handles `/completion`.
pub async fn handle(ctx: Ctx, body: Bytes) -> Result<Response, ApiError> {
    let req: NativeRequest = crate::openai::parse_json(&body)?;
    ctx.check_model(req.model.as_deref())?;
    let tok = ctx.state.engine.tokenizer().clone();
    let prompts = request::prompts(req.prompt.as_ref(), &tok)?;
    generate(ctx, req, prompts, "completion").await
}

/// Runs `prompts` with the settings of `req` and answers in llama-server's shape (also the
/// body of `/infill`).
pub(super) async fn generate(
    ctx: Ctx,
    mut req: NativeRequest,
    prompts: Vec<Vec<u32>>,
    route: &'static str,
) -> Result<Response, ApiError> {
    let tok = ctx.state.engine.tokenizer().clone();
    let defaults = &ctx.state.config.defaults;
    let s = request::settings(&mut req, &tok, defaults)?;
    let constraint = structured::constraint(&ctx.state, s.format.clone()).await?;
    let limit = (
        ctx.ns.spec.limits.max_tokens_per_request,
        defaults.n_predict,
    );
    let mut planned = Vec::with_capacity(prompts.len());
    for ids in prompts {
        let budget = params::token_budget(
            "n_predict",
            s.n_predict,
            ids.len(),
            ctx.max_context(),
            limit,
        )
        .map_err(|mut e| {
            if e.param.as_deref() == Some("messages") {
                e.param = Some("prompt".into());
            }
            e
        })?;
        planned.push((ids, budget));
    }
    let lens: Vec<usize> = planned.iter().map(|(ids, _)| ids.len()).collect();
    let mut budgets: Vec<usize> = planned.iter().map(|&(_, b)| b).collect();
    params::share_budgets(
        "n_predict",
        s.n_predict,
        &lens,
        1,
        &mut budgets,
        ctx.max_context(),
    )?;
    for ((_, b), share) in planned.iter_mut().zip(&budgets) {
        *b = *share;
    }
    let shapes: Vec<Shape> = planned
        .iter()
        .map(|(ids, budget)| Shape {
            ids: ids.clone(),
            prompt: tok.decode(ids, false, true),
            prompt_n: ids.len(),
            settings: generation_settings(
                &s.sampling,
                Some(*budget),
                &s.stop,
                s.ignore_eos,
                s.stream,
                &tok,
            ),
        })
        .collect();
    let permit = ctx.admit().await?;
    let plan = Plan {
        prompts: planned,
        n: 1,
        params: GenerateParams {
            constraint,
            ..params::generate_params(s.sampling.clone(), 0, s.stop.clone(), s.ignore_eos)
        },
        score: None,
        speculation: s.speculation,
    };
    let running = run::start(&ctx, route, plan, s.stream).await?;
    let fmt = NativeChunks {
        tok: tok.clone(),
        model: ctx.model_id().to_string(),
        slot: req.id_slot.filter(|s| *s >= 0).unwrap_or(0),
        n_probs: s.sampling.logprobs.is_some(),
        post_sampling: s.sampling.post_sampling_probs,
        return_tokens: req.return_tokens.unwrap_or(false),
        predicted: vec![0; shapes.len()],
        shapes,
        n_ctx: ctx.max_context(),
    };
    if s.stream {
        return Ok(running.sse(Box::new(fmt), false, permit));
    }
    let (done, usage, timings) = running.collect().await?;
    drop(permit);
    let fields = req.response_fields.unwrap_or_default();
    if let Some(f) = done.first()
        && let Some(shape) = fmt.shapes.first()
    {
        let mut context = shape.ids.clone();
        context.extend_from_slice(&f.tokens);
        ctx.state
            .slots
            .record(usize::try_from(fmt.slot).unwrap_or(0), context);
    }
    let mut answers: Vec<Value> = done
        .into_iter()
        .enumerate()
        .map(|(i, f)| {
            let mut a = fmt.answer(i, &f.text, &f.tokens, f.reason);
            a["tokens_cached"] = json!(usage.cached_tokens);
            a["timings"] = timings.to_json();
            if fmt.n_probs {
                a["completion_probabilities"] =
                    probabilities(&tok, &f.logprobs, fmt.post_sampling).into();
            }
            if fields.is_empty() {
                a
            } else {
                pick_fields(&a, &fields)
            }
        })
        .collect();
    Ok(if answers.len() == 1 {
        ok_json(&answers.swap_remove(0))
    } else {
        ok_json(&Value::Array(answers))
    })
}

/// What each prompt's answer repeats.
struct Shape {
    ids: Vec<u32>,
    prompt: String,
    prompt_n: usize,
    settings: Value,
}

/// Answers and stream events in llama-server's shape.
struct NativeChunks {
    tok: Arc<Tokenizer>,
    model: String,
    slot: i64,
    n_probs: bool,
    /// The probabilities are after the sampler chain (`prob`, `top_probs`).
    post_sampling: bool,
    return_tokens: bool,
    shapes: Vec<Shape>,
    /// Tokens streamed so far, per answer.
    predicted: Vec<usize>,
    /// The context one request may use: an answer that fills it is `truncated`.
    n_ctx: usize,
}

impl NativeChunks {
    /// A whole answer (the last event of a stream, with its content already sent).
    fn answer(&self, index: usize, content: &str, tokens: &[u32], reason: StopReason) -> Value {
        let shape = self.shapes.get(index);
        let prompt_n = shape.map_or(0, |s| s.prompt_n);
        json!({
            "index": index,
            "content": content,
            "tokens": if self.return_tokens { tokens.to_vec() } else { Vec::new() },
            "id_slot": self.slot,
            "stop": true,
            "model": self.model,
            "tokens_predicted": tokens.len(),
            "tokens_evaluated": shape.map_or(0, |s| s.prompt_n),
            "generation_settings": shape.map_or(Value::Null, |s| s.settings.clone()),
            "prompt": shape.map_or("", |s| s.prompt.as_str()),
            "has_new_line": content.contains('\n'),
            // Generation stopped because the context is full (there is no context shift).
            "truncated": prompt_n.saturating_add(tokens.len()) >= self.n_ctx,
            "stop_type": stop_type(reason),
            "stopping_word": "",
        })
    }
}

impl SseFormat for NativeChunks {
    fn first(&mut self, _index: usize) -> Option<Value> {
        None
    }

    fn delta(
        &mut self,
        index: usize,
        text: &str,
        ids: &[u32],
        lps: &[TokenLogprobs],
    ) -> Option<Value> {
        if let Some(n) = self.predicted.get_mut(index) {
            *n += ids.len();
        }
        let mut c = json!({
            "index": index,
            "content": text,
            "tokens": ids,
            "stop": false,
            "id_slot": self.slot,
            "tokens_predicted": self.predicted.get(index).copied().unwrap_or(0),
            "tokens_evaluated": self.shapes.get(index).map_or(0, |s| s.prompt_n),
        });
        if self.n_probs && !lps.is_empty() {
            c["completion_probabilities"] =
                probabilities(&self.tok, lps, self.post_sampling).into();
        }
        Some(c)
    }

    fn finish(&mut self, index: usize, reason: StopReason, end: Option<&End>) -> Value {
        let n = self.predicted.get(index).copied().unwrap_or(0);
        let mut a = self.answer(index, "", &[], reason);
        a["tokens_predicted"] = json!(n);
        let prompt_n = self.shapes.get(index).map_or(0, |s| s.prompt_n);
        a["truncated"] = json!(prompt_n.saturating_add(n) >= self.n_ctx);
        if let Some(end) = end {
            a["tokens_cached"] = json!(end.usage.cached_tokens);
            a["timings"] = end.timings.to_json();
        }
        a
    }

    fn usage(&self, end: &End) -> Value {
        json!({"timings": end.timings.to_json()})
    }

    fn done_marker(&self) -> bool {
        false
    }
}
