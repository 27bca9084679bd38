//! llama-server's response pieces shared by its native endpoints: `generation_settings`, the
//! stop type, `completion_probabilities`, and `response_fields` (a chosen subset of the answer,
//! nested keys named with `/`).

use memoria_model::tokenizer::Tokenizer;
use memoria_sched::StopReason;
use memoria_sched::sampling::{SamplingParams, TokenLogprobs};
use serde_json::{Map, Value, json};

/// The `generation_settings` object of an answer: what the request ran with.
pub fn generation_settings(
    p: &SamplingParams,
    n_predict: Option<usize>,
    stop: &[String],
    ignore_eos: bool,
    stream: bool,
    tok: &Tokenizer,
) -> Value {
    let mut bias: Vec<Value> = p
        .logit_bias
        .iter()
        .map(|&(id, b)| json!({"token": id, "bias": b}))
        .collect();
    if ignore_eos {
        // llama.cpp bans end-of-generation tokens with a bias of -inf (JSON null).
        bias.extend(
            tok.eog_ids()
                .iter()
                .map(|&id| json!({"token": id, "bias": null})),
        );
    }
    let n = n_predict.map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX));
    json!({
        "seed": p.seed,
        "temperature": p.temperature,
        "top_k": p.top_k,
        "top_p": p.top_p,
        "min_p": p.min_p,
        "repeat_last_n": p.repeat_last_n,
        "repeat_penalty": p.repeat_penalty,
        "presence_penalty": p.presence_penalty,
        "frequency_penalty": p.frequency_penalty,
        "stop": stop,
        "max_tokens": n,
        "n_predict": n,
        "ignore_eos": ignore_eos,
        "stream": stream,
        "logit_bias": bias,
        "n_probs": p.logprobs.unwrap_or(0),
        "post_sampling_probs": p.post_sampling_probs,
        "samplers": ["penalties", "top_k", "top_p", "min_p", "temperature"],
        // llama.cpp's adaptive-p sampler, which memoria does not have: disabled (a negative
        // target) at llama.cpp's default decay.
        "adaptive_target": -1.0,
        "adaptive_decay": 0.9,
    })
}

/// llama-server's `stop_type`: `eos`, `word` (a stop string), `limit` (`n_predict` or the
/// context).
pub fn stop_type(reason: StopReason) -> &'static str {
    match reason {
        StopReason::Eog => "eos",
        StopReason::StopString => "word",
        StopReason::Length | StopReason::ContextFull => "limit",
    }
}

/// One entry of `completion_probabilities` (llama-server's shape, log-probabilities).
pub fn probabilities(tok: &Tokenizer, lps: &[TokenLogprobs], post_sampling: bool) -> Vec<Value> {
    let entry = |id: u32, logprob: f32| {
        let bytes = tok.token_to_piece(id, true);
        let mut e = json!({
            "id": id,
            "token": String::from_utf8_lossy(&bytes),
            "bytes": bytes,
        });
        e[if post_sampling { "prob" } else { "logprob" }] = match (post_sampling, logprob) {
            (true, l) => json!(f64::from(l).exp()),
            (false, l) if l.is_finite() => json!(l),
            (false, _) => json!(-9999.0),
        };
        e
    };
    let top_key = if post_sampling {
        "top_probs"
    } else {
        "top_logprobs"
    };
    lps.iter()
        .map(|lp| {
            let mut e = entry(lp.sampled.id, lp.sampled.logprob);
            e[top_key] = lp
                .top()
                .iter()
                .map(|t| entry(t.id, t.logprob))
                .collect::<Vec<_>>()
                .into();
            e
        })
        .collect()
}

/// The fields `response_fields` names (`generation_settings/n_predict` reaches into an object;
/// the answer's key is the name as given). Names that match nothing are left out.
pub fn pick_fields(full: &Value, fields: &[String]) -> Value {
    let mut out = Map::new();
    for name in fields.iter().take(64) {
        let mut at = Some(full);
        for part in name.split('/') {
            at = at.and_then(|v| v.get(part));
        }
        if let Some(v) = at {
            out.insert(name.clone(), v.clone());
        }
    }
    Value::Object(out)
}
