//! How many tokens a session drafts: the length that maximises the expected tokens per unit of
//! step cost, from the session's recent acceptance, so drafting costs next to nothing where
//! nothing is predicted.
//!
//! A step verifying `k` draft tokens carries `k + 1` rows; each row past the first costs `c` of
//! a one-token decode step (the weights are read once per step either way; `c` is measured by
//! [`super::RowCost`]). With per-token acceptance `p` (a draft is kept up to its first miss) the
//! step yields `(1 - p^(k+1)) / (1 - p)` tokens, so the speed against plain decoding is that
//! over `1 + c·k`. The session drafts the `k` that maximises it, and nothing when no `k` gains
//! [`MIN_GAIN`]; then, after a back-off (4 steps, doubling to 64 while probes fail), it drafts
//! one token as a probe, whose outcome updates the estimate: text that turns predictable is
//! found again, however dear a row is.

/// The cost of one more row in a decode step, as a fraction of a one-token step, until the
/// engine has measured its own ([`super::RowCost`]): measured on an AVX-512 VNNI Xeon, where a
/// 135M model's prompt row costs about a tenth of its decode step (a larger model at the memory
/// wall, less); on AVX2-only CPUs a row costs 0.2–0.5 of a step.
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
    /// Whether the step after the back-off drafts one token whatever the estimate.
    probe: bool,
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
            probe: false,
            backoff: 4,
        }
    }

    /// The estimated per-token acceptance.
    pub fn acceptance(&self) -> f64 {
        self.accepted / (self.accepted + self.missed).max(f64::MIN_POSITIVE)
    }

    /// The draft length for the next step (0: decode without a draft), each row past the first
    /// costing `row_cost` of a one-row step. A step without a draft counts down a back-off.
    pub fn for_next_step(&mut self, row_cost: f64) -> usize {
        if self.max == 0 {
            return 0;
        }
        if self.cooldown > 0 {
            self.cooldown -= 1;
            return 0;
        }
        if std::mem::take(&mut self.probe) {
            return 1;
        }
        let k = best_length(self.acceptance(), usize::from(self.max), row_cost);
        if k == 0 {
            // Not worth it now: probe again later with one token.
            self.cooldown = self.backoff;
            self.backoff = (self.backoff * 2).min(64);
            self.probe = true;
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

/// Expected speed-up of drafting `k` tokens at per-token acceptance `p`, a row costing
/// `row_cost` of a one-row step.
pub fn expected_gain(p: f64, k: usize, row_cost: f64) -> f64 {
    let p = p.clamp(0.0, 0.999);
    let tokens = (1.0 - p.powi(k as i32 + 1)) / (1.0 - p);
    tokens / (1.0 + row_cost.max(0.0) * k as f64)
}

/// The `k` in `1..=max` with the best expected speed-up, or 0 when none reaches [`MIN_GAIN`].
fn best_length(p: f64, max: usize, row_cost: f64) -> usize {
    let (mut best, mut gain) = (0, MIN_GAIN);
    for k in 1..=max {
        let g = expected_gain(p, k, row_cost);
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
            let k = d.for_next_step(ROW_COST);
            d.observe(k, k);
        }
        assert_eq!(d.for_next_step(ROW_COST), 8);
        // Nothing accepted: soon no drafting at all, for longer each time.
        let mut off = 0;
        for _ in 0..200 {
            let k = d.for_next_step(ROW_COST);
            if k == 0 {
                off += 1;
            }
            d.observe(k, 0);
        }
        assert!(off > 150, "{off} of 200 steps without a draft");
        assert_eq!(DraftLength::new(0).for_next_step(ROW_COST), 0);
    }

    /// Rows so dear that an even chance does not pay: the session probes with one token after
    /// the back-off, and predictable text then drafts long; unpredictable text is probed less
    /// and less often.
    #[test]
    fn probes_find_predictable_text_however_dear_a_row() {
        let (cost, mut d) = (0.5, DraftLength::new(8));
        assert_eq!(d.for_next_step(cost), 0);
        let mut lengths = Vec::new();
        for _ in 0..40 {
            let k = d.for_next_step(cost);
            d.observe(k, k);
            lengths.push(k);
        }
        assert_eq!(lengths[..5], [0, 0, 0, 0, 1], "{lengths:?}");
        assert!(lengths[30..].iter().all(|&k| k >= 4), "{lengths:?}");
        let mut d = DraftLength::new(8);
        let mut probes = Vec::new();
        for step in 0..400 {
            let k = d.for_next_step(cost);
            if k > 0 {
                probes.push(step);
            }
            d.observe(k, 0);
        }
        let gaps: Vec<usize> = probes.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps.windows(2).all(|w| w[0] <= w[1]), "{gaps:?}");
        assert!(gaps.len() > 4 && gaps[gaps.len() - 1] == 66, "{gaps:?}");
    }

    #[test]
    fn the_length_follows_the_acceptance() {
        // Longer drafts only pay at higher acceptance; a low one drafts nothing.
        assert_eq!(best_length(0.05, 8, ROW_COST), 0);
        let lengths: Vec<usize> = [0.3, 0.5, 0.7, 0.9, 0.99]
            .iter()
            .map(|&p| best_length(p, 8, ROW_COST))
            .collect();
        assert!(lengths.windows(2).all(|w| w[0] <= w[1]), "{lengths:?}");
        assert!(lengths[0] >= 1 && lengths[4] == 8, "{lengths:?}");
        // What is chosen is never expected to be slower than plain decoding.
        for p in [0.2, 0.4, 0.6, 0.8] {
            let k = best_length(p, 8, ROW_COST);
            assert!(k == 0 || expected_gain(p, k, ROW_COST) >= MIN_GAIN);
        }
        // Dearer rows: never longer drafts, and none at an acceptance that paid before.
        for p in [0.3, 0.5, 0.7, 0.9] {
            assert!(best_length(p, 8, 0.3) <= best_length(p, 8, ROW_COST), "{p}");
        }
        assert_eq!(best_length(0.3, 8, 0.5), 0);
        assert!(best_length(0.3, 8, ROW_COST) > 0);
    }
}
