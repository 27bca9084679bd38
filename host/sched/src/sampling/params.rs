//! Sampling parameters and their validation. Invariant: `validate` accepts exactly the values the
//! sampler interprets as documented here; every error names the offending field.

use serde::{Deserialize, Serialize};

/// How to pick the next token; the defaults are llama.cpp's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SamplingParams {
    /// Softmax temperature; `<= 0` means greedy (argmax after penalties). Must be finite.
    pub temperature: f32,
    /// Keep the `top_k` most likely tokens; 0 = off.
    pub top_k: usize,
    /// Keep the smallest prefix of tokens whose probability mass reaches `top_p`; 1.0 = off. [0, 1].
    pub top_p: f32,
    /// Drop tokens whose probability is below `min_p` × the top probability; 0 = off. [0, 1].
    pub min_p: f32,
    /// Divide positive (multiply negative) logits of recently seen tokens; 1.0 = off. > 0.
    pub repeat_penalty: f32,
    /// How many of the most recently accepted tokens the penalties look at; 0 = penalties off.
    pub repeat_last_n: usize,
    /// Subtract `count × frequency_penalty` from a seen token's logit; 0 = off. Finite.
    pub frequency_penalty: f32,
    /// Subtract `presence_penalty` from every seen token's logit; 0 = off. Finite.
    pub presence_penalty: f32,
    /// Seed of the sampler's RNG.
    pub seed: u64,
    /// Added to a token's logit before penalties and filters (OpenAI's `logit_bias`), as
    /// `(token id, bias)`; each within [-100, 100]. Ids outside the vocabulary are ignored.
    pub logit_bias: Vec<(u32, f32)>,
    /// Report log-probabilities: the sampled token's and the `k` most likely ones (0..=20);
    /// None = off. They are the log-softmax of the model's raw logits (before bias/penalties).
    pub logprobs: Option<usize>,
    /// With `logprobs`: report instead the probabilities after the sampler chain (bias,
    /// penalties, top-k, top-p, min-p, temperature), over the candidates it kept, as llama.cpp's
    /// `post_sampling_probs`; tokens the chain dropped are not listed.
    pub post_sampling_probs: bool,
}

/// The largest |bias| `logit_bias` accepts (OpenAI's range).
pub const MAX_LOGIT_BIAS: f32 = 100.0;

/// The most alternatives `logprobs` reports per token (OpenAI's `top_logprobs` limit).
pub const MAX_TOP_LOGPROBS: usize = 20;

/// The seed used when none is given (llama.cpp picks a random one; memoria stays reproducible).
pub const DEFAULT_SEED: u64 = 0x006d_656d_6f72_6961; // "memoria" in ASCII

impl Default for SamplingParams {
    fn default() -> Self {
        SamplingParams {
            temperature: 0.8,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            repeat_penalty: 1.0,
            repeat_last_n: 64,
            frequency_penalty: 0.0,
            presence_penalty: 0.0,
            seed: DEFAULT_SEED,
            logit_bias: Vec::new(),
            logprobs: None,
            post_sampling_probs: false,
        }
    }
}

/// A sampling parameter outside its documented domain.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("invalid sampling parameter `{field}` = {value}: {reason}")]
pub struct SamplingError {
    pub field: &'static str,
    pub value: f32,
    pub reason: &'static str,
}

impl SamplingParams {
    /// Argmax decoding (ties go to the lowest id), no filters, no penalties.
    pub fn greedy() -> Self {
        SamplingParams {
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            repeat_penalty: 1.0,
            repeat_last_n: 0,
            frequency_penalty: 0.0,
            presence_penalty: 0.0,
            seed: DEFAULT_SEED,
            logit_bias: Vec::new(),
            logprobs: None,
            post_sampling_probs: false,
        }
    }

    /// Checks every field against its domain (see the field docs).
    pub fn validate(&self) -> Result<(), SamplingError> {
        let err = |field, value, reason| {
            Err(SamplingError {
                field,
                value,
                reason,
            })
        };
        if !self.temperature.is_finite() {
            return err("temperature", self.temperature, "must be a finite number");
        }
        for (field, value) in [("top_p", self.top_p), ("min_p", self.min_p)] {
            if !(0.0..=1.0).contains(&value) {
                return err(field, value, "must be within [0, 1]");
            }
        }
        if !(self.repeat_penalty.is_finite() && self.repeat_penalty > 0.0) {
            return err(
                "repeat_penalty",
                self.repeat_penalty,
                "must be a finite number > 0",
            );
        }
        for (field, value) in [
            ("frequency_penalty", self.frequency_penalty),
            ("presence_penalty", self.presence_penalty),
        ] {
            if !value.is_finite() {
                return err(field, value, "must be a finite number");
            }
        }
        if let Some(&(_, b)) = self
            .logit_bias
            .iter()
            .find(|(_, b)| !(b.is_finite() && b.abs() <= MAX_LOGIT_BIAS))
        {
            return err("logit_bias", b, "each bias must be within [-100, 100]");
        }
        if let Some(k) = self.logprobs.filter(|&k| k > MAX_TOP_LOGPROBS) {
            return err(
                "top_logprobs",
                k.min(1 << 24) as f32,
                "at most 20 alternatives per token",
            );
        }
        Ok(())
    }

    /// Whether any penalty changes logits.
    pub(crate) fn penalties_active(&self) -> bool {
        self.repeat_last_n > 0
            && (self.repeat_penalty != 1.0
                || self.frequency_penalty != 0.0
                || self.presence_penalty != 0.0)
    }
}
