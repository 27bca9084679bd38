//! Log-probabilities of a sampled token and of the most likely alternatives: the log-softmax of
//! one row of raw logits (NaN counts as -inf, +inf as f32::MAX, as the sampler sees them), summed
//! in f64 in id order so the figures depend on nothing but the row. Invariants: nothing
//! allocates (the alternatives live in a fixed array); alternatives are ordered by logit, then by
//! lower id, so ties are deterministic.

use super::params::MAX_TOP_LOGPROBS;

/// One token's log-probability.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenLogprob {
    pub id: u32,
    /// ln p, ≤ 0; -inf for a token the model gives no chance.
    pub logprob: f32,
}

/// The sampled token's log-probability and the `k` most likely tokens' (most likely first).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenLogprobs {
    pub sampled: TokenLogprob,
    n_top: u8,
    top: [TokenLogprob; MAX_TOP_LOGPROBS],
}

impl TokenLogprobs {
    /// The most likely tokens, best first (as many as were asked for, fewer for a tiny vocabulary).
    pub fn top(&self) -> &[TokenLogprob] {
        &self.top[..usize::from(self.n_top)]
    }
}

/// NaN never wins; +inf becomes the largest finite value (as in the sampler).
fn clean(logit: f32) -> f32 {
    if logit.is_nan() {
        f32::NEG_INFINITY
    } else {
        logit.min(f32::MAX)
    }
}

/// Whether `(a, la)` ranks before `(b, lb)`: higher logit, then lower id.
fn before(la: f32, a: u32, lb: f32, b: u32) -> bool {
    la > lb || (la == lb && a < b)
}

/// The log-probabilities of `token` and of the `k` (≤ 20, clamped) best tokens of `logits`.
/// Returns None when `logits` is empty or `token` is outside it.
pub fn logprobs(logits: &[f32], token: u32, k: usize) -> Option<TokenLogprobs> {
    let n = logits.len().min(u32::MAX as usize);
    if n == 0 || token as usize >= n {
        return None;
    }
    let k = k.min(MAX_TOP_LOGPROBS).min(n);
    let empty = TokenLogprob {
        id: 0,
        logprob: f32::NEG_INFINITY,
    };
    let mut top = [empty; MAX_TOP_LOGPROBS];
    let mut n_top = 0usize;
    let mut max = f32::NEG_INFINITY;
    for (i, &l) in logits[..n].iter().enumerate() {
        let (l, id) = (clean(l), i as u32);
        max = max.max(l);
        if k == 0 || (n_top == k && !before(l, id, top[k - 1].logprob, top[k - 1].id)) {
            continue;
        }
        // Insertion into the sorted prefix (k ≤ 20; almost every logit is rejected above).
        let mut j = n_top.min(k - 1);
        while j > 0 && before(l, id, top[j - 1].logprob, top[j - 1].id) {
            top[j] = top[j - 1];
            j -= 1;
        }
        top[j] = TokenLogprob { id, logprob: l };
        n_top = (n_top + 1).min(k);
    }
    let lse = if max == f32::NEG_INFINITY {
        // Every logit is -inf: treat the row as uniform.
        (n as f64).ln()
    } else {
        let m = f64::from(max);
        let sum: f64 = logits[..n]
            .iter()
            .map(|&l| (f64::from(clean(l)) - m).exp())
            .sum();
        m + sum.ln()
    };
    let lp = |l: f32| {
        if max == f32::NEG_INFINITY {
            -lse as f32
        } else {
            (f64::from(l) - lse) as f32
        }
    };
    for t in &mut top[..n_top] {
        t.logprob = lp(t.logprob);
    }
    Some(TokenLogprobs {
        sampled: TokenLogprob {
            id: token,
            logprob: lp(clean(logits[token as usize])),
        },
        n_top: n_top as u8,
        top,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logprobs_are_the_log_softmax() {
        let logits = [1.0f32, 3.0, 2.0, 3.0, f32::NAN];
        let r = logprobs(&logits, 2, 3).expect("in range");
        let z: f64 = [1.0f64, 3.0, 2.0, 3.0].iter().map(|l| l.exp()).sum();
        let want = |l: f64| (l - z.ln()) as f32;
        assert!((r.sampled.logprob - want(2.0)).abs() < 1e-6);
        let ids: Vec<u32> = r.top().iter().map(|t| t.id).collect();
        assert_eq!(ids, [1, 3, 2], "higher logit first, ties to the lower id");
        assert!((r.top()[0].logprob - want(3.0)).abs() < 1e-6);
        let total: f64 = (0..4)
            .map(|t| f64::from(logprobs(&logits, t, 0).expect("in").sampled.logprob).exp())
            .sum();
        assert!((total - 1.0).abs() < 1e-6, "{total}");
        assert_eq!(
            logprobs(&logits, 4, 0).expect("in").sampled.logprob,
            f32::NEG_INFINITY
        );
    }

    #[test]
    fn edge_cases_never_panic() {
        assert!(logprobs(&[], 0, 5).is_none());
        assert!(logprobs(&[0.0; 3], 3, 5).is_none());
        let r = logprobs(&[0.0; 3], 1, 40).expect("in range");
        assert_eq!(r.top().len(), 3, "k is clamped to the vocabulary");
        assert!((r.sampled.logprob - (1.0f32 / 3.0).ln()).abs() < 1e-6);
        let r = logprobs(&[f32::NEG_INFINITY; 4], 0, 2).expect("in range");
        assert!((r.sampled.logprob - 0.25f32.ln()).abs() < 1e-6);
        let r = logprobs(&[f32::INFINITY, 0.0], 1, 1).expect("in range");
        assert_eq!(r.top()[0].id, 0);
        assert!(r.sampled.logprob.is_finite() || r.sampled.logprob == f32::NEG_INFINITY);
    }

    #[test]
    fn top_matches_a_full_sort() {
        let mut rng = super::super::Xoshiro256::seed_from_u64(9);
        let logits: Vec<f32> = (0..5000)
            .map(|_| ((rng.next_f64() * 8.0) as i32) as f32)
            .collect();
        let r = logprobs(&logits, 17, 20).expect("in range");
        let mut ids: Vec<u32> = (0..5000).collect();
        ids.sort_by(|&a, &b| {
            logits[b as usize]
                .total_cmp(&logits[a as usize])
                .then(a.cmp(&b))
        });
        let got: Vec<u32> = r.top().iter().map(|t| t.id).collect();
        assert_eq!(got, ids[..20]);
    }
}
