//! The sampler: owns the params, the seeded RNG, the penalty history and reusable buffers, and runs
//! the chain over one row of logits. Invariants: after `new`, `sample` and `accept` never allocate;
//! ties in ordering are broken by the lower id, so every step is deterministic.

use std::cmp::Ordering;

use super::logprobs::{TokenLogprob, TokenLogprobs, logprobs};
use super::params::{MAX_LOGIT_BIAS, MAX_TOP_LOGPROBS, SamplingParams};
use super::penalties::History;
use super::rng::Xoshiro256;

/// One token under consideration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Candidate {
    pub(crate) id: u32,
    pub(crate) logit: f32,
}

/// Higher logit first, then lower id.
fn by_logit_desc(a: &Candidate, b: &Candidate) -> Ordering {
    b.logit.total_cmp(&a.logit).then(a.id.cmp(&b.id))
}

/// NaN can never win; +inf becomes the largest finite value so softmax stays defined.
fn sanitize(logit: f32) -> f32 {
    if logit.is_nan() {
        f32::NEG_INFINITY
    } else {
        logit.min(f32::MAX)
    }
}

/// Replaces values `validate` would reject by the nearest meaningful ones, so sampling never
/// panics or produces NaN even with unvalidated params.
fn sanitize_params(mut p: SamplingParams) -> SamplingParams {
    if p.temperature.is_nan() {
        p.temperature = 0.0;
    } else if p.temperature == f32::INFINITY {
        p.temperature = f32::MAX;
    }
    p.top_p = if p.top_p.is_nan() {
        1.0
    } else {
        p.top_p.clamp(0.0, 1.0)
    };
    p.min_p = if p.min_p.is_nan() {
        0.0
    } else {
        p.min_p.clamp(0.0, 1.0)
    };
    if !(p.repeat_penalty.is_finite() && p.repeat_penalty > 0.0) {
        p.repeat_penalty = 1.0;
    }
    if !p.frequency_penalty.is_finite() {
        p.frequency_penalty = 0.0;
    }
    if !p.presence_penalty.is_finite() {
        p.presence_penalty = 0.0;
    }
    for (_, b) in &mut p.logit_bias {
        *b = if b.is_nan() {
            0.0
        } else {
            b.clamp(-MAX_LOGIT_BIAS, MAX_LOGIT_BIAS)
        };
    }
    p.logprobs = p.logprobs.map(|k| k.min(MAX_TOP_LOGPROBS));
    p
}

/// Turns logits into token ids; one per sequence being generated.
#[derive(Debug, Clone)]
pub struct Sampler {
    params: SamplingParams,
    n_vocab: usize,
    rng: Xoshiro256,
    history: History,
    candidates: Vec<Candidate>,
    weights: Vec<f64>,
}

impl Sampler {
    /// A sampler for a vocabulary of `n_vocab` ids. `params` should have passed
    /// [`SamplingParams::validate`]; values it rejects are replaced (NaN temperature → greedy, +inf
    /// temperature → f32::MAX, top_p/min_p clamped to [0, 1], a non-positive repeat penalty → 1, NaN penalties → 0,
    /// biases clamped to [-100, 100] (NaN → 0), `logprobs` to 20).
    pub fn new(params: SamplingParams, n_vocab: usize) -> Sampler {
        let params = sanitize_params(params);
        Sampler {
            n_vocab,
            rng: Xoshiro256::seed_from_u64(params.seed),
            history: History::new(params.repeat_last_n, n_vocab),
            candidates: Vec::with_capacity(n_vocab),
            weights: Vec::with_capacity(n_vocab),
            params,
        }
    }

    /// The params in effect (after the replacements `new` describes).
    pub fn params(&self) -> &SamplingParams {
        &self.params
    }

    pub fn n_vocab(&self) -> usize {
        self.n_vocab
    }

    /// Records a prompt or generated token for the penalties; ids >= `n_vocab` are ignored.
    pub fn accept(&mut self, token: u32) {
        self.history.push(token);
    }

    /// Forgets the accepted tokens and reseeds the RNG, as if freshly constructed.
    pub fn reset(&mut self) {
        self.history.clear();
        self.rng = Xoshiro256::seed_from_u64(self.params.seed);
    }

    /// Picks a token from `logits` (ids beyond `n_vocab` are not considered); does not accept it.
    /// Returns 0 when there is nothing to choose from (empty logits or `n_vocab == 0`).
    pub fn sample(&mut self, logits: &[f32]) -> u32 {
        self.sample_allowed(logits, None)
    }

    /// [`Sampler::sample`] among the ids `allowed` sets (one bit per id, as constrained
    /// decoding gives them): every other id gets -inf after bias and penalties, so neither can
    /// bring it back.
    pub fn sample_allowed(&mut self, logits: &[f32], allowed: Option<&[u64]>) -> u32 {
        let n = logits.len().min(self.n_vocab).min(u32::MAX as usize);
        self.weights.clear();
        if n == 0 {
            return 0;
        }
        if self.params.temperature <= 0.0
            && self.params.logit_bias.is_empty()
            && !self.params.penalties_active()
            && allowed.is_none()
        {
            // Plain greedy (every verifying row of a speculative pass takes this): the first
            // best raw logit, as `argmax` over the candidates below picks it, without them.
            return greedy(&logits[..n]);
        }
        self.candidates.clear();
        self.candidates
            .extend(logits[..n].iter().enumerate().map(|(i, &l)| Candidate {
                id: i as u32,
                logit: sanitize(l),
            }));
        for &(id, bias) in &self.params.logit_bias {
            if let Some(c) = self.candidates.get_mut(id as usize) {
                c.logit = (c.logit + bias).min(f32::MAX);
            }
        }
        if self.params.penalties_active() {
            self.history.apply(&mut self.candidates, &self.params);
        }
        if let Some(mask) = allowed {
            for c in &mut self.candidates {
                let word = mask.get(c.id as usize / 64).copied().unwrap_or(0);
                if word >> (c.id % 64) & 1 == 0 {
                    c.logit = f32::NEG_INFINITY;
                }
            }
        }
        if self.params.temperature <= 0.0 {
            return argmax(&self.candidates).id;
        }
        let sorted = self.top_k();
        let sorted = self.top_p(sorted);
        self.min_p(sorted);
        self.draw()
    }

    /// The log-probabilities of `token` (and of the `logprobs` best alternatives) under the raw
    /// `logits` the token was sampled from, when the params ask for them.
    /// With `post_sampling_probs`, they are the probabilities the last [`Sampler::sample`] drew
    /// `token` with instead (see [`Sampler::post_sampling`]).
    pub fn logprobs(&self, logits: &[f32], token: u32) -> Option<TokenLogprobs> {
        let k = self.params.logprobs?;
        if self.params.post_sampling_probs {
            return Some(self.post_sampling(token, k));
        }
        logprobs(&logits[..logits.len().min(self.n_vocab)], token, k)
    }

    /// The probabilities of the last draw: the candidates the chain kept, weighted at the
    /// temperature and normalized (`ln p`), the `k` most likely first (ties: lower id), zero
    /// weights left out. A greedy pick had probability 1.
    fn post_sampling(&self, token: u32, k: usize) -> TokenLogprobs {
        let one = |id| TokenLogprob { id, logprob: 0.0 };
        let total: f64 = self.weights.iter().sum();
        if self.params.temperature <= 0.0
            || self.weights.len() != self.candidates.len()
            || total.is_nan()
            || total <= 0.0
        {
            return TokenLogprobs::from_parts(one(token), &[one(token)][..k.min(1)]);
        }
        let mut kept: Vec<TokenLogprob> = self
            .candidates
            .iter()
            .zip(&self.weights)
            .filter(|(_, w)| **w > 0.0)
            .map(|(c, w)| TokenLogprob {
                id: c.id,
                logprob: (w / total).ln() as f32,
            })
            .collect();
        kept.sort_unstable_by(|a, b| b.logprob.total_cmp(&a.logprob).then(a.id.cmp(&b.id)));
        let sampled = kept
            .iter()
            .find(|t| t.id == token)
            .copied()
            .unwrap_or(TokenLogprob {
                id: token,
                logprob: f32::NEG_INFINITY,
            });
        TokenLogprobs::from_parts(sampled, &kept[..k.min(kept.len())])
    }

    /// Keeps the `top_k` best candidates, sorted. Returns whether `candidates` is sorted.
    fn top_k(&mut self) -> bool {
        let k = self.params.top_k;
        if k == 0 || k >= self.candidates.len() {
            return false;
        }
        self.candidates.select_nth_unstable_by(k - 1, by_logit_desc);
        self.candidates.truncate(k);
        self.candidates.sort_unstable_by(by_logit_desc);
        true
    }

    /// Keeps the smallest best-first prefix whose probability mass reaches `top_p` (at least one).
    fn top_p(&mut self, sorted: bool) -> bool {
        let p = f64::from(self.params.top_p);
        if p >= 1.0 {
            return sorted;
        }
        if !sorted {
            self.candidates.sort_unstable_by(by_logit_desc);
        }
        let max = f64::from(self.candidates[0].logit);
        if max == f64::NEG_INFINITY {
            self.candidates.truncate(1);
            return true;
        }
        let total: f64 = self
            .candidates
            .iter()
            .map(|c| (f64::from(c.logit) - max).exp())
            .sum();
        let target = p * total;
        let mut cumulative = 0.0;
        let mut keep = self.candidates.len();
        for (i, c) in self.candidates.iter().enumerate() {
            cumulative += (f64::from(c.logit) - max).exp();
            if cumulative >= target {
                keep = i + 1;
                break;
            }
        }
        self.candidates.truncate(keep);
        true
    }

    /// Drops candidates whose probability is below `min_p` × the best one's.
    fn min_p(&mut self, sorted: bool) {
        let min_p = self.params.min_p;
        if min_p <= 0.0 {
            return;
        }
        let max = if sorted {
            self.candidates[0].logit
        } else {
            argmax(&self.candidates).logit
        };
        if max == f32::NEG_INFINITY {
            return;
        }
        // p_i >= min_p * p_max  <=>  logit_i >= max + ln(min_p).
        let threshold = f64::from(max) + f64::from(min_p).ln();
        self.candidates.retain(|c| f64::from(c.logit) >= threshold);
    }

    /// Softmax at the temperature, then one draw from the seeded RNG.
    fn draw(&mut self) -> u32 {
        let best = argmax(&self.candidates);
        let max = f64::from(best.logit);
        self.weights.clear();
        if max == f64::NEG_INFINITY {
            return best.id;
        }
        let temperature = f64::from(self.params.temperature);
        self.weights.extend(
            self.candidates
                .iter()
                .map(|c| ((f64::from(c.logit) - max) / temperature).exp()),
        );
        let total: f64 = self.weights.iter().sum();
        let target = self.rng.next_f64() * total;
        let mut cumulative = 0.0;
        let mut chosen = best.id;
        for (c, &w) in self.candidates.iter().zip(&self.weights) {
            if w > 0.0 {
                chosen = c.id;
                cumulative += w;
                if target < cumulative {
                    break;
                }
            }
        }
        chosen
    }
}

/// The best candidate; the first in slice order on ties (the lowest id while in id order).
fn argmax(candidates: &[Candidate]) -> Candidate {
    first_best(candidates.iter().copied())
}

/// The id of the first largest of `logits` (NaN counting as -inf), as [`argmax`] over their
/// candidates gives it, without building them; `logits` is not empty.
fn greedy(logits: &[f32]) -> u32 {
    let candidates = logits.iter().enumerate().map(|(i, &l)| Candidate {
        id: i as u32,
        logit: sanitize(l),
    });
    first_best(candidates).id
}

/// The first candidate with the largest logit; `candidates` is not empty.
fn first_best(mut candidates: impl Iterator<Item = Candidate>) -> Candidate {
    let mut best = candidates.next().expect("at least one candidate");
    for c in candidates {
        if c.logit > best.logit {
            best = c;
        }
    }
    best
}
