//! Sampling: turns a row of logits into one token id with llama.cpp's common-sampler chain
//! (logit bias → penalties → top-k → top-p → min-p → temperature → softmax → seeded draw). Invariants: the
//! result is always an id < `n_vocab` (and < the logits' length when that is shorter); a token
//! whose logit is -inf or NaN is never chosen while some finite logit exists; the same seed, params,
//! accepted history and logits give the same token on every run and platform.

mod logprobs;
mod params;
mod penalties;
mod rng;
mod sampler;
#[cfg(test)]
mod tests;

pub use logprobs::{TokenLogprob, TokenLogprobs, logprobs};
pub use params::{DEFAULT_SEED, MAX_LOGIT_BIAS, MAX_TOP_LOGPROBS, SamplingError, SamplingParams};
pub use rng::Xoshiro256;
pub use sampler::Sampler;
