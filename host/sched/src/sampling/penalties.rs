//! The token history behind repetition, frequency and presence penalties: a ring of the last
//! `repeat_last_n` accepted tokens plus a per-id count of the tokens in the ring. Invariants:
//! `counts[t]` equals the occurrences of `t` in `ring` between calls; nothing allocates after
//! construction.

use super::params::SamplingParams;
use super::sampler::Candidate;

/// Marks a count as "penalty already applied" during one `apply` pass.
const APPLIED: u32 = 1 << 31;

#[derive(Debug, Clone)]
pub(crate) struct History {
    window: usize,
    ring: Vec<u32>,
    /// Next slot to overwrite once `ring` is full.
    head: usize,
    counts: Vec<u32>,
}

impl History {
    pub(crate) fn new(window: usize, n_vocab: usize) -> History {
        let (ring, counts) = if window == 0 {
            (Vec::new(), Vec::new())
        } else {
            (Vec::with_capacity(window), vec![0; n_vocab])
        };
        History {
            window,
            ring,
            head: 0,
            counts,
        }
    }

    /// Records `token`; ids outside the vocabulary are ignored.
    pub(crate) fn push(&mut self, token: u32) {
        let t = token as usize;
        if self.window == 0 || t >= self.counts.len() {
            return;
        }
        if self.ring.len() < self.window {
            self.ring.push(token);
        } else {
            let old = std::mem::replace(&mut self.ring[self.head], token);
            self.counts[old as usize] -= 1;
            self.head = (self.head + 1) % self.window;
        }
        self.counts[t] += 1;
    }

    /// Forgets every recorded token.
    pub(crate) fn clear(&mut self) {
        for &t in &self.ring {
            self.counts[t as usize] = 0;
        }
        self.ring.clear();
        self.head = 0;
    }

    /// Applies the penalties to `candidates`, which must still be in id order (`candidates[i].id
    /// == i`). Each distinct recorded token is penalised once, with its count in the window.
    pub(crate) fn apply(&mut self, candidates: &mut [Candidate], params: &SamplingParams) {
        for &t in &self.ring {
            let count = &mut self.counts[t as usize];
            if *count & APPLIED != 0 {
                continue;
            }
            let n = *count;
            *count |= APPLIED;
            let Some(candidate) = candidates.get_mut(t as usize) else {
                continue;
            };
            let logit = &mut candidate.logit;
            if *logit <= 0.0 {
                *logit *= params.repeat_penalty;
            } else {
                *logit /= params.repeat_penalty;
            }
            *logit -= n as f32 * params.frequency_penalty + params.presence_penalty;
            // A large logit divided by a penalty < 1 can overflow; keep softmax defined.
            *logit = logit.min(f32::MAX);
        }
        for &t in &self.ring {
            self.counts[t as usize] &= !APPLIED;
        }
    }
}
