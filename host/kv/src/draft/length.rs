//! How many tokens a session drafts: the length that maximises the expected tokens per unit of
//! step cost, from the session's recent acceptance, so drafting costs next to nothing where
//! nothing is predicted.
//!
//! A step verifying `k` draft tokens carries `k + 1` rows; each row past the first costs about
//! [`ROW_COST`] of a one-token decode step (the weights are read once per step either way). With
//! per-token acceptance `p` (a draft is kept up to its first miss) the step yields
//! `(1 - p^(k+1)) / (1 - p)` tokens, so the speed against plain decoding is that over
//! `1 + ROW_COST·k`. The session drafts the `k` that maximises it, and nothing when no `k` gains
//! [`MIN_GAIN`]; then it probes again after a back-off (4 steps, doubling to 64).

/// The cost of one more row in a decode step, as a fraction of a one-token step (measured on
/// an AVX-512 VNNI Xeon: a 135M model's prompt row costs about a tenth of its decode step; a
/// larger model at the memory wall, less). On an AVX2-only CPU a row costs more, 0.2–0.5 of a
/// step (docs/speculation.md), so there this figure drafts longer than pays: a constant, not
/// a measurement of the CPU at hand.
pub const ROW_COST: f64 = 0.12;
/// The least expected speed-up a draft must promise.
pub const MIN_GAIN: f64 = 1.03;

/// A session's draft length, adapted to its acceptance.
#[derive(Clone, Debug)]
pub struct DraftLength {
    max: u8,
    /// Exponential averages per pass of the draft tokens accepted and of the misses (a pass
    /// that ended before its draft did).
    accepted: f64,
    missed: f64,
    /// Steps left without drafting after a back-off.
    cooldown: u16,
    /// The back-off after the next unpromising estimate (doubles up to 64 steps).
    backoff: u16,
}

/// The weight of the newest pass in the averages.
const WEIGHT: f64 = 0.25;

impl DraftLength {
    /// A controller drafting at most `max` tokens (0 turns drafting off); it starts from an
    /// even chance per token.
    pub fn new(max: usize) -> DraftLength {
        DraftLength {
            max: max.min(u8::MAX as usize) as u8,
            accepted: 1.0,
            missed: 1.0,
            cooldown: 0,
            backoff: 4,
        }
    }

    /// The estimated per-token acceptance.
    pub fn acceptance(&self) -> f64 {
        self.accepted / (self.accepted + self.missed).max(f64::MIN_POSITIVE)
    }

    /// The draft length for the next step (0: decode without a draft). A step without a draft
    /// counts down a back-off.
    pub fn for_next_step(&mut self) -> usize {
        if self.max == 0 {
            return 0;
        }
        if self.cooldown > 0 {
            self.cooldown -= 1;
            return 0;
        }
        let k = best_length(self.acceptance(), usize::from(self.max));
        if k == 0 {
            // Not worth it now: probe again later with one token, from a fresh estimate.
            self.cooldown = self.backoff;
            self.backoff = (self.backoff * 2).min(64);
            self.accepted = 1.0;
            self.missed = 1.0;
            return 0;
        }
        k
    }

    /// Records a verification: `accepted` of `drafted` draft tokens matched.
    pub fn observe(&mut self, drafted: usize, accepted: usize) {
        if drafted == 0 {
            return;
        }
        let accepted = accepted.min(drafted);
        let missed = usize::from(accepted < drafted);
        self.accepted = self.accepted * (1.0 - WEIGHT) + accepted as f64 * WEIGHT;
        self.missed = self.missed * (1.0 - WEIGHT) + missed as f64 * WEIGHT;
        if accepted > 0 {
            self.backoff = 4;
        }
    }
}

/// Expected speed-up of drafting `k` tokens at per-token acceptance `p`.
pub fn expected_gain(p: f64, k: usize) -> f64 {
    let p = p.clamp(0.0, 0.999);
    let tokens = (1.0 - p.powi(k as i32 + 1)) / (1.0 - p);
    tokens / (1.0 + ROW_COST * k as f64)
}

/// The `k` in `1..=max` with the best expected speed-up, or 0 when none reaches [`MIN_GAIN`].
fn best_length(p: f64, max: usize) -> usize {
    let (mut best, mut gain) = (0, MIN_GAIN);
    for k in 1..=max {
        let g = expected_gain(p, k);
        if g > gain {
            (best, gain) = (k, g);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_acceptance_grows_to_the_max_and_none_backs_off() {
        let mut d = DraftLength::new(8);
        for _ in 0..20 {
            let k = d.for_next_step();
            d.observe(k, k);
        }
        assert_eq!(d.for_next_step(), 8);
        // Nothing accepted: soon no drafting at all, for longer each time.
        let mut off = 0;
        for _ in 0..200 {
            let k = d.for_next_step();
            if k == 0 {
                off += 1;
            }
            d.observe(k, 0);
        }
        assert!(off > 150, "{off} of 200 steps without a draft");
        assert_eq!(DraftLength::new(0).for_next_step(), 0);
    }

    #[test]
    fn the_length_follows_the_acceptance() {
        // Longer drafts only pay at higher acceptance; a low one drafts nothing.
        assert_eq!(best_length(0.05, 8), 0);
        let lengths: Vec<usize> = [0.3, 0.5, 0.7, 0.9, 0.99]
            .iter()
            .map(|&p| best_length(p, 8))
            .collect();
        assert!(lengths.windows(2).all(|w| w[0] <= w[1]), "{lengths:?}");
        assert!(lengths[0] >= 1 && lengths[4] == 8, "{lengths:?}");
        // What is chosen is never expected to be slower than plain decoding.
        for p in [0.2, 0.4, 0.6, 0.8] {
            let k = best_length(p, 8);
            assert!(k == 0 || expected_gain(p, k) >= MIN_GAIN);
        }
    }
}
