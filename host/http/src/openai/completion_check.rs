//! The checks of a completion request that need no engine: `suffix`, `stream_options`,
//! `logprobs` and `echo`, the prompts (tokenized; each non-empty, ids in the vocabulary, at most
//! [`MAX_PROMPTS`]), `n` and `best_of`, sampling ranges, `logit_bias` and `stop`. The constraint
//! compiler and the context budget follow in the handler. Invariant: every refusal is a 400
//! naming its field.
//!
//! A non-empty `suffix` makes each prompt an insertion, laid out as llama-server's `/infill`
//! does (prefix-suffix-middle): `[BOS] FIM_PRE prefix FIM_SUF suffix FIM_MID`, the texts
//! tokenized without special tokens (so a prompt cannot smuggle in FIM markers); the answer is
//! the middle. It needs a model with the three FIM tokens and refuses `echo`.

use memoria_constrain::ResponseFormat;
use memoria_model::tokenizer::{Fim, Tokenizer};
use memoria_sched::sampling::SamplingParams;

use super::params;
use super::schema::{CompletionRequest, Prompt};
use crate::error::ApiError;
use crate::state::RequestDefaults;

/// The most prompts one request may list.
const MAX_PROMPTS: usize = params::MAX_CHOICES;

/// A completion request that passed [`check`].
pub(crate) struct Checked {
    pub stream: bool,
    pub include_usage: bool,
    /// `logprobs`: how many alternatives per token.
    pub k: Option<usize>,
    pub echo: bool,
    /// Each prompt's token ids and text.
    pub prompts: Vec<(Vec<u32>, String)>,
    pub n: usize,
    pub best_of: usize,
    pub sampling: SamplingParams,
    pub stop: Vec<String>,
    pub ignore_eos: bool,
    pub response_format: Option<ResponseFormat>,
    pub max_tokens: Option<u64>,
}

/// Checks `req`, tokenizing its prompts with `tok`; fields the request leaves out take the
/// server's `defaults`.
pub(crate) fn check(
    req: CompletionRequest,
    tok: &Tokenizer,
    defaults: &RequestDefaults,
) -> Result<Checked, ApiError> {
    let suffix = req.suffix.filter(|s| !s.is_empty());
    let fim = match &suffix {
        None => None,
        Some(_) => Some(tok.fim().ok_or_else(|| {
            ApiError::invalid(
                "suffix",
                "`suffix` (insertion) needs a model with fill-in-the-middle tokens \
                 (FIM prefix, suffix and middle), and this model has none",
            )
        })?),
    };
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
    if echo && suffix.is_some() {
        return Err(ApiError::invalid(
            "echo",
            "`echo` cannot be combined with `suffix`",
        ));
    }
    let prompts = match (fim, suffix) {
        (Some(fim), Some(suffix)) => infill_prompts(tok, fim, req.prompt, &suffix)?,
        _ => prompts(tok, req.prompt)?,
    };
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
    let mut sampling = params::sampling(&params::sampling_fields_of!(req), defaults)?;
    sampling.logit_bias = params::logit_bias(req.logit_bias.as_ref(), tok.n_vocab())?;
    // Choosing the best of several needs every token's log-prob.
    sampling.logprobs = k.or((best_of > n).then_some(0));
    let stop = params::stops(req.stop)?;
    Ok(Checked {
        stream,
        include_usage,
        k,
        echo,
        prompts,
        n,
        best_of,
        sampling,
        stop,
        ignore_eos: req.ignore_eos.unwrap_or(false),
        response_format: req.response_format,
        max_tokens: req.max_tokens,
    })
}

/// The insertion prompts for `suffix`: each prompt (text, or ids taken as they are) is the
/// prefix, laid out by [`infill`]; the text kept is the prompt's own.
fn infill_prompts(
    tok: &Tokenizer,
    fim: Fim,
    prompt: Prompt,
    suffix: &str,
) -> Result<Vec<(Vec<u32>, String)>, ApiError> {
    let suffix_ids = tok.encode(suffix, false, false);
    let text = |t: String| (tok.encode(&t, false, false), t);
    let ids = |ids: Vec<u32>| {
        let t = tok.decode(&ids, false, true);
        (ids, t)
    };
    let prefixes: Vec<(Vec<u32>, String)> = match prompt {
        Prompt::Text(t) => vec![text(t)],
        Prompt::Texts(v) => v.into_iter().map(text).collect(),
        Prompt::Tokens(v) => vec![ids(v)],
        Prompt::TokenLists(v) => v.into_iter().map(ids).collect(),
    };
    let laid_out: Vec<(Vec<u32>, String)> = prefixes
        .into_iter()
        .map(|(p, t)| (infill(tok, fim, &p, &suffix_ids), t))
        .collect();
    check_prompts(tok, laid_out)
}

/// llama-server's infill layout (PSM): `[BOS] FIM_PRE prefix FIM_SUF suffix FIM_MID`, BOS when
/// the model adds one.
pub(crate) fn infill(tok: &Tokenizer, fim: Fim, prefix: &[u32], suffix: &[u32]) -> Vec<u32> {
    let mut out = Vec::with_capacity(prefix.len() + suffix.len() + 4);
    if tok.add_bos()
        && let Some(bos) = tok.bos()
    {
        out.push(bos);
    }
    out.push(fim.prefix);
    out.extend_from_slice(prefix);
    out.push(fim.suffix);
    out.extend_from_slice(suffix);
    out.push(fim.middle);
    out
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
    check_prompts(tok, out)
}

/// Each prompt non-empty with ids in the vocabulary, and at most [`MAX_PROMPTS`] of them.
fn check_prompts(
    tok: &Tokenizer,
    out: Vec<(Vec<u32>, String)>,
) -> Result<Vec<(Vec<u32>, String)>, ApiError> {
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
