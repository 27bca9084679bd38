//! Log-probabilities of a sampled token and of the most likely alternatives: the log-softmax of
//! one row of raw logits (NaN counts as -inf, +inf as f32::MAX, as the sampler sees them),
//! exponentiated in f32 by a polynomial of IEEE operations and summed in f64 in a fixed order, so
//! the figures depend on nothing but the row (not on the platform or the batch). Invariants: nothing
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

impl TokenLogprobs {
    /// The sampled token's and the best alternatives' figures as given (`top` best first, at most
    /// [`MAX_TOP_LOGPROBS`] kept).
    pub(crate) fn from_parts(sampled: TokenLogprob, best: &[TokenLogprob]) -> TokenLogprobs {
        let empty = TokenLogprob {
            id: 0,
            logprob: f32::NEG_INFINITY,
        };
        let mut top = [empty; MAX_TOP_LOGPROBS];
        let n = best.len().min(MAX_TOP_LOGPROBS);
        top[..n].copy_from_slice(&best[..n]);
        TokenLogprobs {
            sampled,
            n_top: n as u8,
            top,
        }
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

/// e^x for x ≤ 0 to about 2 ulp, from IEEE operations only (so every platform gives the same
/// bits and the compiler can vectorize it): x = n·ln2 + r with |r| ≤ ln2/2, e^r by its degree-7
/// Taylor polynomial, 2^n from the exponent bits. Below -87 (and for -inf) it returns e^-87's
/// neighbourhood or 0, which no sum that contains e^0 = 1 can notice.
fn exp_nonpositive(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    const ROUND: f32 = 12_582_912.0; // 1.5 · 2^23: adding it rounds to an integer.
    let x = x.clamp(-87.0, 0.0);
    let t = x * LOG2E + ROUND;
    let n = t - ROUND;
    let r = (x - n * LN2_HI) - n * LN2_LO;
    let p = 1.0
        + r * (1.0
            + r * (0.5
                + r * (1.0 / 6.0
                    + r * (1.0 / 24.0
                        + r * (1.0 / 120.0 + r * (1.0 / 720.0 + r * (1.0 / 5040.0)))))));
    // n is an integer in [-126, 0]: 2^n from its biased exponent.
    let k = (t.to_bits() as i32).wrapping_sub(ROUND.to_bits() as i32);
    p * f32::from_bits(((k + 127) as u32) << 23)
}

/// Σ e^(l - max) over the row: exponentials in f32, summed in f64 over 8 lanes in a fixed order
/// (then the lanes, then the tail), so the sum depends on the row alone.
fn sum_exp(logits: &[f32], max: f32) -> f64 {
    let mut lanes = [0.0f64; 8];
    let (chunks, tail) = logits.as_chunks::<8>();
    for c in chunks {
        for (acc, &l) in lanes.iter_mut().zip(c) {
            *acc += f64::from(exp_nonpositive(clean(l) - max));
        }
    }
    let mut sum: f64 = lanes.iter().sum();
    for &l in tail {
        sum += f64::from(exp_nonpositive(clean(l) - max));
    }
    sum
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
        f64::from(max) + sum_exp(&logits[..n], max).ln()
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

    #[test]
    fn the_polynomial_exp_is_within_two_ulp() {
        let mut worst = 0.0f64;
        let mut x = 0.0f32;
        while x > -87.0 {
            let got = f64::from(exp_nonpositive(x));
            let want = f64::from(x).exp();
            worst = worst.max((got - want).abs() / want);
            x -= 0.000_37;
        }
        assert!(worst < 2.5e-7, "worst relative error {worst}");
        assert_eq!(exp_nonpositive(0.0), 1.0);
        assert!(exp_nonpositive(f32::NEG_INFINITY) < 1e-37);
    }
}
