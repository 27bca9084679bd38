//! Validation of generation parameters shared by chat and completions: sampling ranges (as
//! OpenAI documents them, plus llama-server's top_k/min_p/repeat_penalty), `n`/`best_of`, `stop`,
//! `logit_bias`, `stream_options`, `tools`, unsupported features, and the token budget against
//! the namespace's limit and the context.
//! Invariant: a request that passes is one the engine accepts; each refusal names its field.

use memoria_sched::GenerateParams;
use memoria_sched::sampling::SamplingParams;
use serde_json::Value;

use super::schema::{Stop, StreamOptions};
use crate::error::ApiError;
use crate::state::RequestDefaults;

/// A seed no earlier request of this process got (for `--seed -1`).
fn fresh_seed() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let n = NEXT.fetch_add(1, Relaxed);
    let h = blake3::hash(&[nanos.to_le_bytes(), n.to_le_bytes()].concat());
    let mut b = [0u8; 8];
    b.copy_from_slice(&h.as_bytes()[..8]);
    u64::from_le_bytes(b)
}

/// The sampling fields of a request.
#[derive(Debug, Default)]
pub struct SamplingFields {
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub top_k: Option<u64>,
    pub min_p: Option<f64>,
    pub repeat_penalty: Option<f64>,
    pub presence_penalty: Option<f64>,
    pub frequency_penalty: Option<f64>,
    pub seed: Option<i64>,
}

/// The [`SamplingFields`] of a request type that names them alike (chat and completions).
macro_rules! sampling_fields_of {
    ($req:expr) => {
        $crate::openai::params::SamplingFields {
            temperature: $req.temperature,
            top_p: $req.top_p,
            top_k: $req.top_k,
            min_p: $req.min_p,
            repeat_penalty: $req.repeat_penalty,
            presence_penalty: $req.presence_penalty,
            frequency_penalty: $req.frequency_penalty,
            seed: $req.seed,
        }
    };
}
pub(crate) use sampling_fields_of;

fn in_range(field: &str, v: Option<f64>, lo: f64, hi: f64) -> Result<Option<f32>, ApiError> {
    match v {
        None => Ok(None),
        Some(x) if x.is_finite() && (lo..=hi).contains(&x) => Ok(Some(x as f32)),
        Some(x) => Err(ApiError::invalid(
            field,
            format!("`{field}` = {x} is out of range: use a number in [{lo}, {hi}]"),
        )),
    }
}

/// The server's sampling defaults (llama.cpp's unless `--temp`, `--top-k`, ... changed them)
/// overridden by the request's fields.
pub fn sampling(f: &SamplingFields, d: &RequestDefaults) -> Result<SamplingParams, ApiError> {
    let mut p = d.sampling.clone();
    if f.seed.is_none() && d.random_seed {
        p.seed = fresh_seed();
    }
    if let Some(t) = in_range("temperature", f.temperature, 0.0, 2.0)? {
        p.temperature = t;
    }
    if let Some(v) = in_range("top_p", f.top_p, 0.0, 1.0)? {
        p.top_p = v;
    }
    if let Some(v) = in_range("min_p", f.min_p, 0.0, 1.0)? {
        p.min_p = v;
    }
    if let Some(v) = in_range("presence_penalty", f.presence_penalty, -2.0, 2.0)? {
        p.presence_penalty = v;
    }
    if let Some(v) = in_range("frequency_penalty", f.frequency_penalty, -2.0, 2.0)? {
        p.frequency_penalty = v;
    }
    if let Some(v) = in_range("repeat_penalty", f.repeat_penalty, 0.0, 10.0)? {
        if v <= 0.0 {
            return Err(ApiError::invalid(
                "repeat_penalty",
                "`repeat_penalty` must be > 0",
            ));
        }
        p.repeat_penalty = v;
    }
    if let Some(k) = f.top_k {
        p.top_k = usize::try_from(k.min(1 << 20)).unwrap_or(0);
    }
    if let Some(s) = f.seed {
        p.seed = s as u64;
    }
    p.validate()
        .map_err(|e| ApiError::invalid(e.field, e.to_string()))?;
    Ok(p)
}

/// `stop` as a list (at most 4 non-empty strings of at most 256 bytes).
pub fn stops(stop: Option<Stop>) -> Result<Vec<String>, ApiError> {
    let v = match stop {
        None => Vec::new(),
        Some(Stop::One(s)) => vec![s],
        Some(Stop::Many(v)) => v,
    };
    if v.len() > 4 {
        return Err(ApiError::invalid(
            "stop",
            format!("`stop` has {} strings; at most 4 are allowed", v.len()),
        ));
    }
    if v.iter().any(|s| s.is_empty() || s.len() > 256) {
        return Err(ApiError::invalid(
            "stop",
            "each `stop` string needs 1-256 bytes",
        ));
    }
    Ok(v)
}

/// The most choices (prompts × `n`, or × `best_of`) one request may ask for.
pub const MAX_CHOICES: usize = 64;

/// `n` (or `best_of`): 1 when absent, else 1..=128 as OpenAI allows, and at most
/// [`MAX_CHOICES`] generations over `prompts` prompts.
pub fn choices(field: &str, n: Option<u64>, prompts: usize) -> Result<usize, ApiError> {
    let n = n.unwrap_or(1);
    if !(1..=128).contains(&n) {
        return Err(ApiError::invalid(
            field,
            format!("`{field}` = {n} is out of range: use 1 to 128"),
        ));
    }
    let n = usize::try_from(n).unwrap_or(usize::MAX);
    if n.saturating_mul(prompts.max(1)) > MAX_CHOICES {
        return Err(ApiError::invalid(
            field,
            format!(
                "`{field}` = {n} over {} prompt(s) asks for more than {MAX_CHOICES} generations in one request",
                prompts.max(1)
            ),
        ));
    }
    Ok(n)
}

/// Whether usage goes in a last chunk: `stream_options` is only valid with `stream: true`
/// (OpenAI answers 400 otherwise).
pub fn include_usage(stream: bool, opts: Option<&StreamOptions>) -> Result<bool, ApiError> {
    match opts {
        Some(_) if !stream => Err(ApiError::invalid(
            "stream_options",
            "`stream_options` is only allowed when `stream` is true",
        )),
        Some(o) => Ok(o.include_usage.unwrap_or(false)),
        None => Ok(false),
    }
}

/// The most `logit_bias` entries one request may give.
pub const MAX_LOGIT_BIAS_ENTRIES: usize = 1024;

/// `logit_bias`: decimal token ids (each < `n_vocab`) mapped to numbers in [-100, 100], as
/// `(id, bias)` in id order.
pub fn logit_bias(
    map: Option<&serde_json::Map<String, Value>>,
    n_vocab: usize,
) -> Result<Vec<(u32, f32)>, ApiError> {
    let Some(map) = map else {
        return Ok(Vec::new());
    };
    if map.len() > MAX_LOGIT_BIAS_ENTRIES {
        return Err(ApiError::invalid(
            "logit_bias",
            format!(
                "`logit_bias` has {} entries; at most {MAX_LOGIT_BIAS_ENTRIES} are allowed",
                map.len()
            ),
        ));
    }
    let mut out = Vec::with_capacity(map.len());
    for (key, v) in map {
        let id = key
            .parse::<u32>()
            .ok()
            .filter(|_| key.bytes().all(|b| b.is_ascii_digit()));
        let Some(id) = id else {
            return Err(ApiError::invalid(
                "logit_bias",
                format!("`logit_bias` key {key:?} is not a token id (a decimal integer)"),
            ));
        };
        if id as usize >= n_vocab {
            return Err(ApiError::invalid(
                "logit_bias",
                format!("`logit_bias`: token id {id} is not in the vocabulary ({n_vocab} tokens)"),
            ));
        }
        match v.as_f64() {
            Some(b) if (-100.0..=100.0).contains(&b) => out.push((id, b as f32)),
            _ => {
                return Err(ApiError::invalid(
                    "logit_bias",
                    format!("`logit_bias` of token {id} = {v}: use a number in [-100, 100]"),
                ));
            }
        }
    }
    out.sort_by_key(|&(id, _)| id);
    out.dedup_by_key(|&mut (id, _)| id);
    Ok(out)
}

/// The completion budget: the request's `max_tokens` (≥ 1, within the namespace's limit) or,
/// without one, the server's default (`-n`) within what the context leaves; the prompt plus the
/// budget must fit the context.
pub fn token_budget(
    field: &str,
    requested: Option<u64>,
    prompt_tokens: usize,
    max_context: usize,
    (limit, default): (usize, Option<usize>),
) -> Result<usize, ApiError> {
    if prompt_tokens == 0 {
        return Err(ApiError::bad_request("the prompt is empty"));
    }
    if prompt_tokens >= max_context {
        return Err(ApiError::context_exceeded(
            "messages",
            prompt_tokens,
            max_context,
            format!(
                "the request ({prompt_tokens} prompt tokens) exceeds the available context size ({max_context} tokens), this model's maximum context length"
            ),
        ));
    }
    let room = max_context - prompt_tokens;
    match requested {
        None => Ok(room.min(limit).min(default.unwrap_or(usize::MAX))),
        Some(0) => Err(ApiError::invalid(
            field,
            format!("`{field}` must be at least 1"),
        )),
        Some(m) if m > limit as u64 => Err(ApiError::invalid(
            field,
            format!(
                "`{field}` = {m} is above this namespace's limit of {limit} tokens per request"
            ),
        )),
        Some(m) if usize::try_from(m).map_or(true, |m| m > room) => {
            let total = u64::try_from(prompt_tokens)
                .unwrap_or(u64::MAX)
                .saturating_add(m);
            Err(ApiError::context_exceeded(
                field,
                usize::try_from(total).unwrap_or(usize::MAX),
                max_context,
                format!(
                    "the request ({total} tokens: {prompt_tokens} in the prompt, {m} for the completion) exceeds the available context size ({max_context} tokens), this model's maximum context length"
                ),
            ))
        }
        Some(m) => Ok(usize::try_from(m).unwrap_or(room).min(room)),
    }
}

/// Fits a request of several generations (prompts × `n`) into one context's worth of K/V,
/// what the pool holds per admitted request: the prompts (shared by their forks) plus `n`
/// completions of each prompt's budget. With `max_tokens` given, a request past that is a 400
/// naming the figures; without it, the default budgets shrink to an equal share.
pub fn share_budgets(
    field: &str,
    requested: Option<u64>,
    prompts: &[usize],
    n: usize,
    budgets: &mut [usize],
    max_context: usize,
) -> Result<(), ApiError> {
    let generations = prompts.len().saturating_mul(n);
    if generations <= 1 {
        return Ok(());
    }
    let prompt_total: usize = prompts.iter().sum();
    let completion_total = budgets.iter().fold(0usize, |a, &b| a.saturating_add(b));
    let total = prompt_total.saturating_add(completion_total.saturating_mul(n));
    if total <= max_context {
        return Ok(());
    }
    let room = max_context.saturating_sub(prompt_total);
    let share = room / generations;
    if requested.is_some() || share == 0 {
        return Err(ApiError::invalid(
            field,
            format!(
                "{generations} generations of {} tokens each plus {prompt_total} prompt tokens need {total} tokens of K/V; one request may use this model's context length of {max_context} tokens (lower `{field}`, `n` or the number of prompts)",
                budgets.iter().max().copied().unwrap_or(0)
            ),
        )
        .with_code("context_length_exceeded"));
    }
    for b in budgets.iter_mut() {
        *b = (*b).min(share);
    }
    Ok(())
}

/// `speculation` on a generation request (a memoria extension): `off` decodes one token per
/// step; `auto` (the default) follows the namespace's setting. The text is the same either way.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SpeculationField {
    Auto,
    Off,
}

/// Engine parameters of a one-shot request.
pub fn generate_params(
    sampling: SamplingParams,
    max_tokens: usize,
    stop: Vec<String>,
    ignore_eos: bool,
) -> GenerateParams {
    let mut p = GenerateParams::greedy(max_tokens);
    p.sampling = sampling;
    p.stop = stop;
    p.close_when_done = true;
    p.ignore_eos = ignore_eos;
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_checks_name_counts() {
        assert_eq!(
            token_budget("max_tokens", None, 10, 100, (4096, None)).expect("fits"),
            90
        );
        assert_eq!(
            token_budget("max_tokens", None, 10, 100, (20, None)).expect("fits"),
            20
        );
        assert_eq!(
            token_budget("max_tokens", None, 10, 100, (4096, Some(16))).expect("-n"),
            16
        );
        let e = token_budget("max_tokens", Some(95), 10, 100, (4096, None)).expect_err("too long");
        assert!(
            e.message.contains("105") && e.message.contains("100"),
            "{}",
            e.message
        );
        assert!(token_budget("max_tokens", Some(0), 10, 100, (4096, None)).is_err());
        assert!(token_budget("max_tokens", Some(5), 100, 100, (4096, Some(3))).is_err());
    }

    #[test]
    fn a_prompt_past_the_context_names_both_figures_in_both_shapes() {
        let e = token_budget("messages", None, 301, 256, (4096, None)).expect_err("too long");
        assert_eq!(e.status, http::StatusCode::BAD_REQUEST);
        let body = e.to_json();
        assert_eq!(body["error"]["type"], "exceed_context_size_error");
        assert_eq!(body["error"]["code"], "context_length_exceeded");
        assert_eq!(body["error"]["n_prompt_tokens"], 301);
        assert_eq!(body["error"]["n_ctx"], 256);
        assert!(
            e.message.contains("exceeds the available context size"),
            "{}",
            e.message
        );
        let e = token_budget("n_predict", Some(64), 250, 256, (4096, None)).expect_err("too long");
        assert_eq!(e.exceeded.as_deref(), Some(&(314, 256)));
    }

    #[test]
    fn sampling_ranges_name_the_field() {
        let f = SamplingFields {
            temperature: Some(3.0),
            ..Default::default()
        };
        assert_eq!(
            sampling(&f, &RequestDefaults::default())
                .expect_err("hot")
                .param
                .as_deref(),
            Some("temperature")
        );
        let f = SamplingFields {
            top_p: Some(-0.1),
            ..Default::default()
        };
        assert_eq!(
            sampling(&f, &RequestDefaults::default())
                .expect_err("top_p")
                .param
                .as_deref(),
            Some("top_p")
        );
        assert!(sampling(&SamplingFields::default(), &RequestDefaults::default()).is_ok());
    }

    #[test]
    fn logit_bias_ids_and_values_are_checked() {
        let map = |v: serde_json::Value| v.as_object().cloned().expect("object");
        let ok = map(serde_json::json!({"7": 100, "3": -100, "5": 0.5}));
        assert_eq!(
            logit_bias(Some(&ok), 10).expect("valid"),
            [(3, -100.0), (5, 0.5), (7, 100.0)]
        );
        let e = logit_bias(Some(&map(serde_json::json!({"10": 1}))), 10).expect_err("id");
        assert!(e.message.contains("10"), "{}", e.message);
        assert_eq!(e.param.as_deref(), Some("logit_bias"));
        for bad in [
            serde_json::json!({"1": 100.5}),
            serde_json::json!({"1": "x"}),
            serde_json::json!({"-1": 1}),
            serde_json::json!({"+1": 1}),
            serde_json::json!({"a": 1}),
        ] {
            assert!(logit_bias(Some(&map(bad.clone())), 10).is_err(), "{bad}");
        }
        assert!(logit_bias(None, 10).expect("absent").is_empty());
    }

    #[test]
    fn choices_stream_options_and_tools_follow_openai() {
        assert_eq!(choices("n", None, 1).expect("default"), 1);
        assert_eq!(choices("n", Some(4), 2).expect("fits"), 4);
        assert!(choices("n", Some(0), 1).is_err());
        assert!(choices("n", Some(129), 1).is_err());
        assert!(
            choices("n", Some(40), 2).is_err(),
            "80 generations is above the cap"
        );
        let opts = StreamOptions {
            include_usage: Some(true),
        };
        assert!(include_usage(true, Some(&opts)).expect("streaming"));
        assert_eq!(
            include_usage(false, Some(&opts))
                .expect_err("not streaming")
                .param
                .as_deref(),
            Some("stream_options")
        );
        assert!(!include_usage(false, None).expect("absent"));
    }

    #[test]
    fn several_generations_share_one_context() {
        let mut b = [100, 100];
        share_budgets("max_tokens", Some(100), &[10, 20], 2, &mut b, 512).expect("fits");
        assert_eq!(b, [100, 100]);
        let e = share_budgets("max_tokens", Some(200), &[10, 20], 2, &mut [200, 200], 512)
            .expect_err("830 > 512");
        assert!(e.message.contains("830"), "{}", e.message);
        let mut b = [480, 470];
        share_budgets("max_tokens", None, &[12, 20], 2, &mut b, 512).expect("shrinks");
        assert_eq!(b, [120, 120]);
        let mut one = [500];
        share_budgets("max_tokens", None, &[12], 1, &mut one, 512).expect("one generation");
        assert_eq!(one, [500]);
    }
}
