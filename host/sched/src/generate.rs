//! Single-sequence generation: prefill a prompt in chunks, then sample token by token with stop
//! strings, end-of-generation tokens and a token limit, streaming text as it becomes complete
//! UTF-8. The batched multi-session engine builds on the same pieces.

use std::time::Instant;

use memoria_model::llama::{BatchToken, KvDtype, Model, ModelError, Scratch};
use memoria_model::tokenizer::{StreamDecoder, Tokenizer};

use crate::sampling::{Sampler, SamplingParams};
use crate::stop::StopMatcher;

/// What to generate.
#[derive(Clone, Debug)]
pub struct GenerateRequest {
    pub prompt: Vec<u32>,
    pub max_tokens: usize,
    pub sampling: SamplingParams,
    pub stop: Vec<String>,
    pub kv_dtype: KvDtype,
    /// Context size (positions); 0 means prompt + max_tokens.
    pub n_ctx: usize,
    /// Tokens per prefill forward pass.
    pub n_batch: usize,
}

/// Why generation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// An end-of-generation token was sampled (not included in the output).
    Eog,
    /// `max_tokens` were generated.
    Length,
    /// A stop string matched (the text ends before it).
    StopString,
    /// The context is full.
    ContextFull,
}

impl StopReason {
    /// OpenAI-style `finish_reason`.
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Eog | StopReason::StopString => "stop",
            StopReason::Length | StopReason::ContextFull => "length",
        }
    }
}

/// Wall-clock timings of one generation.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Timings {
    pub prompt_tokens: usize,
    pub prompt_ms: f64,
    pub generated_tokens: usize,
    pub generate_ms: f64,
}

impl Timings {
    /// Prompt tokens per second.
    pub fn prompt_per_s(&self) -> f64 {
        rate(self.prompt_tokens, self.prompt_ms)
    }
    /// Generated tokens per second (the first sampled token comes from the prefill).
    pub fn generate_per_s(&self) -> f64 {
        rate(self.generated_tokens.saturating_sub(1), self.generate_ms)
    }
}

fn rate(n: usize, ms: f64) -> f64 {
    if ms > 0.0 {
        n as f64 * 1000.0 / ms
    } else {
        0.0
    }
}

/// Result of [`generate`].
#[derive(Clone, Debug)]
pub struct GenerateOutput {
    pub tokens: Vec<u32>,
    pub text: String,
    /// Logits after the last prompt token, `[n_vocab]`.
    pub prompt_logits: Vec<f32>,
    pub stop_reason: StopReason,
    pub timings: Timings,
}

/// Errors of a generation request.
#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    #[error("the prompt is empty")]
    EmptyPrompt,
    #[error("prompt of {prompt} tokens does not fit a context of {n_ctx}")]
    PromptTooLong { prompt: usize, n_ctx: usize },
    #[error(transparent)]
    Model(#[from] ModelError),
}

/// Runs one request to completion; `on_text` receives text as it is finalised.
pub fn generate(
    model: &Model,
    tok: &Tokenizer,
    req: &GenerateRequest,
    mut on_text: impl FnMut(&str),
) -> Result<GenerateOutput, GenerateError> {
    let n_prompt = req.prompt.len();
    if n_prompt == 0 {
        return Err(GenerateError::EmptyPrompt);
    }
    let n_ctx = if req.n_ctx == 0 {
        n_prompt + req.max_tokens
    } else {
        req.n_ctx
    };
    if n_prompt > n_ctx {
        return Err(GenerateError::PromptTooLong {
            prompt: n_prompt,
            n_ctx,
        });
    }
    let mut kv = model.new_contiguous_kv(req.kv_dtype, 1, n_ctx);
    let mut scratch = Scratch::default();
    let mut sampler = Sampler::new(req.sampling.clone(), model.hparams().n_vocab);
    for &t in &req.prompt {
        sampler.accept(t);
    }

    let started = Instant::now();
    let n_batch = req.n_batch.max(1);
    let mut batch = Vec::with_capacity(n_batch.min(n_prompt));
    let mut logits = Vec::new();
    for (c, chunk) in req.prompt.chunks(n_batch).enumerate() {
        batch.clear();
        batch.extend(chunk.iter().enumerate().map(|(i, &token)| {
            let pos = c * n_batch + i;
            BatchToken {
                token,
                pos,
                seq: 0,
                logits: pos + 1 == n_prompt,
            }
        }));
        let out = model.forward(&batch, &mut kv, &mut scratch)?;
        if !out.is_empty() {
            logits.clear();
            logits.extend_from_slice(out);
        }
    }
    let prompt_ms = started.elapsed().as_secs_f64() * 1000.0;
    let prompt_logits = logits.clone();

    let started = Instant::now();
    let mut tokens = Vec::new();
    let mut text = String::new();
    let mut decoder = StreamDecoder::new(tok);
    let mut stops = StopMatcher::new(req.stop.clone());
    let mut pos = n_prompt;
    let stop_reason = loop {
        if tokens.len() >= req.max_tokens {
            break StopReason::Length;
        }
        let token = sampler.sample(&logits);
        sampler.accept(token);
        if tok.is_eog(token) {
            break StopReason::Eog;
        }
        tokens.push(token);
        let out = stops.push(&decoder.push(token));
        text.push_str(&out.emit);
        on_text(&out.emit);
        if out.stopped {
            break StopReason::StopString;
        }
        if tokens.len() >= req.max_tokens {
            break StopReason::Length;
        }
        if pos >= n_ctx {
            break StopReason::ContextFull;
        }
        let step = [BatchToken {
            token,
            pos,
            seq: 0,
            logits: true,
        }];
        let out = model.forward(&step, &mut kv, &mut scratch)?;
        logits.clear();
        logits.extend_from_slice(out);
        pos += 1;
    };
    if stop_reason != StopReason::StopString {
        let tail = stops.push(&decoder.finish());
        let mut rest = tail.emit;
        if !tail.stopped {
            rest.push_str(&stops.finish());
        }
        text.push_str(&rest);
        on_text(&rest);
    }
    let timings = Timings {
        prompt_tokens: n_prompt,
        prompt_ms,
        generated_tokens: tokens.len(),
        generate_ms: started.elapsed().as_secs_f64() * 1000.0,
    };
    Ok(GenerateOutput {
        tokens,
        text,
        prompt_logits,
        stop_reason,
        timings,
    })
}
