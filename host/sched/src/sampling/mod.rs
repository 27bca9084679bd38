//! Sampling: turns a row of logits into one token id with llama.cpp's common-sampler chain
//! (penalties → top-k → top-p → min-p → temperature → softmax → seeded draw). Invariants: the
//! result is always an id < `n_vocab` (and < the logits' length when that is shorter); a token
//! whose logit is -inf or NaN is never chosen while some finite logit exists; the same seed, params,
//! accepted history and logits give the same token on every run and platform.

mod params;
mod penalties;
mod rng;
mod sampler;
#[cfg(test)]
mod tests;

pub use params::{DEFAULT_SEED, SamplingError, SamplingParams};
pub use rng::Xoshiro256;
pub use sampler::Sampler;
