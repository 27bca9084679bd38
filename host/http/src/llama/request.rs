//! A llama-server completion request (`/completion`, `/infill`): its field names and types,
//! unknown fields ignored, and their translation into the engine's settings through the same
//! checks as the OpenAI routes (`openai::params`): sampling ranges, `stop`, the token budget.
//! Prompts are text, token ids, or a mix of both (`[12, " world", 34]`), one or several.

use memoria_constrain::ResponseFormat;
use memoria_model::tokenizer::Tokenizer;
use memoria_sched::sampling::SamplingParams;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::openai::params::{self, SamplingFields};
use crate::state::RequestDefaults;

/// The fields memoria reads; any other is ignored.
#[derive(Debug, Default, Deserialize)]
pub struct NativeRequest {
    pub model: Option<String>,
    pub prompt: Option<Value>,
    pub n_predict: Option<i64>,
    pub max_tokens: Option<i64>,
    pub temperature: Option<f64>,
    pub top_k: Option<i64>,
    pub top_p: Option<f64>,
    pub min_p: Option<f64>,
    pub repeat_penalty: Option<f64>,
    pub repeat_last_n: Option<i64>,
    pub presence_penalty: Option<f64>,
    pub frequency_penalty: Option<f64>,
    pub seed: Option<i64>,
    pub stop: Option<Vec<String>>,
    pub stream: Option<bool>,
    pub n_probs: Option<u64>,
    pub post_sampling_probs: Option<bool>,
    pub ignore_eos: Option<bool>,
    pub logit_bias: Option<Value>,
    pub json_schema: Option<Value>,
    pub grammar: Option<String>,
    pub response_format: Option<ResponseFormat>,
    pub response_fields: Option<Vec<String>>,
    pub return_tokens: Option<bool>,
    pub id_slot: Option<i64>,
    pub input_prefix: Option<String>,
    pub input_suffix: Option<String>,
    pub input_extra: Option<Vec<Value>>,
    /// memoria's: `off` turns speculative decoding off for this request.
    pub speculation: Option<crate::openai::params::SpeculationField>,
}

/// What a native request asks the engine for.
pub struct Settings {
    pub sampling: SamplingParams,
    pub stop: Vec<String>,
    pub ignore_eos: bool,
    /// `n_predict` when positive (None: the server's default or what the context leaves).
    pub n_predict: Option<u64>,
    pub stream: bool,
    pub format: Option<ResponseFormat>,
    pub speculation: Option<crate::openai::params::SpeculationField>,
}

/// Checks the generation fields of `r`.
pub fn settings(
    r: &mut NativeRequest,
    tok: &Tokenizer,
    d: &RequestDefaults,
) -> Result<Settings, ApiError> {
    let fields = SamplingFields {
        // llama.cpp samples greedily at any temperature <= 0.
        temperature: r.temperature.map(|t| t.max(0.0)),
        top_p: r.top_p,
        top_k: r.top_k.map(|k| u64::try_from(k).unwrap_or(0)),
        min_p: r.min_p,
        repeat_penalty: r.repeat_penalty,
        presence_penalty: r.presence_penalty,
        frequency_penalty: r.frequency_penalty,
        seed: r.seed.filter(|s| *s >= 0),
    };
    let random = RequestDefaults {
        random_seed: d.random_seed || r.seed.is_some_and(|s| s < 0),
        ..d.clone()
    };
    let mut sampling = params::sampling(&fields, &random)?;
    if let Some(n) = r.repeat_last_n {
        // -1: the whole context, as llama.cpp.
        sampling.repeat_last_n = usize::try_from(n).unwrap_or(1 << 20);
    }
    sampling.logit_bias = logit_bias(r.logit_bias.as_ref(), tok)?;
    if let Some(k) = r.n_probs.filter(|k| *k > 0) {
        sampling.logprobs = Some(usize::try_from(k.min(20)).unwrap_or(20));
        sampling.post_sampling_probs = r.post_sampling_probs.unwrap_or(false);
    }
    let stop = r.stop.take().unwrap_or_default();
    let stop =
        params::stops((!stop.is_empty()).then_some(crate::openai::schema::Stop::Many(stop)))?;
    let n_predict = match r.n_predict.or(r.max_tokens) {
        Some(n) if n > 0 => Some(n.unsigned_abs()),
        _ => None,
    };
    let format = crate::openai::chat_check::llama_format(
        r.response_format.take(),
        r.json_schema.take(),
        r.grammar.take(),
    )?;
    Ok(Settings {
        sampling,
        stop,
        ignore_eos: r.ignore_eos.unwrap_or(false),
        speculation: r.speculation,
        n_predict,
        stream: r.stream.unwrap_or(false),
        format,
    })
}

/// The largest bias accepted; `false` (llama.cpp's ban) becomes its negative.
const BAN: f32 = -100.0;

/// llama.cpp's `logit_bias`: `[[id, bias], ...]`, `[["text", bias], ...]` (every token of the
/// text), or an object `{"id": bias, "text": bias}`; a bias of `false` bans the token.
fn logit_bias(v: Option<&Value>, tok: &Tokenizer) -> Result<Vec<(u32, f32)>, ApiError> {
    let n_vocab = tok.n_vocab();
    let bad = |why: String| ApiError::invalid("logit_bias", why);
    let bias_of = |b: &Value| -> Result<f32, ApiError> {
        match b {
            Value::Bool(false) => Ok(BAN),
            Value::Number(n) => {
                let x = n.as_f64().unwrap_or(f64::NAN);
                if x.is_finite() {
                    Ok(x.clamp(-100.0, 100.0) as f32)
                } else {
                    Err(bad(format!("bias {b} is not a finite number")))
                }
            }
            other => Err(bad(format!("bias {other} is not a number or false"))),
        }
    };
    // `[[token, bias], ...]` or `{"token": bias}`; a token is an id or a text (each of its
    // tokens gets the bias). An object's keys are ids when decimal, texts otherwise.
    let pairs: Vec<(Value, &Value)> = match v {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(k, b)| {
                let key = k.parse::<u64>().map_or_else(|_| json!(k), |id| json!(id));
                (key, b)
            })
            .collect(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item.as_array().map(Vec::as_slice) {
                Some([key, b]) => Ok((key.clone(), b)),
                _ => Err(bad(format!("entry {item} is not [token, bias]"))),
            })
            .collect::<Result<_, _>>()?,
        Some(other) => {
            return Err(bad(format!(
                "`logit_bias` {other} is not a list or an object"
            )));
        }
    };
    if pairs.len() > params::MAX_LOGIT_BIAS_ENTRIES {
        return Err(bad(format!(
            "`logit_bias` has {} entries; at most {} are allowed",
            pairs.len(),
            params::MAX_LOGIT_BIAS_ENTRIES
        )));
    }
    let mut out = Vec::new();
    for (key, b) in pairs {
        let bias = bias_of(b)?;
        match key {
            Value::Number(n) => {
                let id = n
                    .as_u64()
                    .and_then(|i| u32::try_from(i).ok())
                    .filter(|&i| (i as usize) < n_vocab)
                    .ok_or_else(|| {
                        bad(format!(
                            "token {n} is not in the vocabulary ({n_vocab} tokens)"
                        ))
                    })?;
                out.push((id, bias));
            }
            Value::String(text) => {
                for id in tok.encode(&text, false, false) {
                    out.push((id, bias));
                }
            }
            other => return Err(bad(format!("token {other} is not an id or a text"))),
        }
    }
    out.sort_by_key(|&(id, _)| id);
    out.dedup_by_key(|&mut (id, _)| id);
    Ok(out)
}

/// The most prompts one request may give.
const MAX_PROMPTS: usize = params::MAX_CHOICES;

/// The prompts of `prompt`: a text, token ids, a mix (`[12, " world"]`, one prompt), or a list
/// of texts and id lists (one prompt each). Texts are encoded with BOS and special tokens.
pub fn prompts(prompt: Option<&Value>, tok: &Tokenizer) -> Result<Vec<Vec<u32>>, ApiError> {
    let bad = |why: String| ApiError::invalid("prompt", why);
    let one = |v: &Value, first: bool| -> Result<Vec<u32>, ApiError> {
        match v {
            Value::String(s) => Ok(tok.encode(s, true, true)),
            Value::Array(items) => {
                let mut ids = Vec::new();
                for (i, item) in items.iter().enumerate() {
                    match item {
                        Value::Number(n) => ids.push(
                            n.as_u64()
                                .and_then(|t| u32::try_from(t).ok())
                                .ok_or_else(|| bad(format!("{n} is not a token id")))?,
                        ),
                        Value::String(s) => ids.extend(tok.encode(s, first && i == 0, true)),
                        other => {
                            return Err(bad(format!("{other} is neither a token id nor a text")));
                        }
                    }
                }
                Ok(ids)
            }
            // llama-server's multimodal form, `{"prompt_string", "multimodal_data"}`: its text
            // alone is a prompt; media need a projector this server does not have.
            Value::Object(o) => {
                let media = o
                    .get("multimodal_data")
                    .is_some_and(|m| !m.is_null() && m.as_array().is_none_or(|a| !a.is_empty()));
                match o.get("prompt_string") {
                    _ if media => Err(bad(
                        "`multimodal_data` is not supported: this server has no multimodal projector".into(),
                    )),
                    Some(Value::String(s)) => Ok(tok.encode(s, true, true)),
                    _ => Err(bad(
                        "a prompt object needs `prompt_string` (a text)".into(),
                    )),
                }
            }
            other => Err(bad(format!("{other} is not a text or a list of tokens"))),
        }
    };
    let list: Vec<Vec<u32>> = match prompt {
        None | Some(Value::Null) => return Err(bad("`prompt` is required".into())),
        Some(Value::Array(items))
            if !items.is_empty()
                && items.iter().all(|i| {
                    matches!(i, Value::String(_) | Value::Array(_) | Value::Object(_))
                })
                && items.iter().any(|i| !matches!(i, Value::String(_)))
                || items.len() > 1 && items.iter().all(|i| matches!(i, Value::String(_))) =>
        {
            items
                .iter()
                .map(|v| one(v, true))
                .collect::<Result<_, _>>()?
        }
        Some(v) => vec![one(v, true)?],
    };
    if list.len() > MAX_PROMPTS {
        return Err(bad(format!(
            "{} prompts; at most {MAX_PROMPTS} are allowed",
            list.len()
        )));
    }
    let n_vocab = tok.n_vocab();
    for (i, ids) in list.iter().enumerate() {
        if ids.is_empty() {
            return Err(bad(format!("prompt {i} is empty")));
        }
        if let Some(t) = ids.iter().find(|&&t| t as usize >= n_vocab) {
            return Err(bad(format!(
                "token id {t} is not in the vocabulary ({n_vocab} tokens)"
            )));
        }
    }
    Ok(list)
}
