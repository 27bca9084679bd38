//! In-place softmax of one row: subtract the max, exponentiate in f32 (vectorised,
//! [`super::exp`]), sum in f64, scale by the f32 reciprocal, as ggml's `soft_max` does.

/// Replaces `x` with `softmax(x)`. Entries equal to `-inf` become exactly 0.
///
/// The maximum is taken sixteen lanes at a time (exact, so the order is free); the
/// exponentials are written first and summed after in f64 ([`sum_f64`]: eight interleaved
/// chains in a fixed order, so the same row always gives the same bits).
pub fn softmax_in_place(x: &mut [f32]) {
    let max = max_of(x);
    if max == f32::NEG_INFINITY {
        x.fill(0.0);
        return;
    }
    super::exp::exp_shifted_in_place(x, max);
    let sum = sum_f64(x);
    let inv = (1.0 / sum) as f32;
    for v in x.iter_mut() {
        *v *= inv;
    }
}

/// Replaces `x` with the first `x.len()` entries of `softmax([x, sink])`: the sink is one more
/// logit that takes its share of the probability but has no entry of its own (ggml's
/// `soft_max` with sinks, as gpt-oss's attention uses it). `-inf` entries become exactly 0.
pub fn softmax_with_sink_in_place(x: &mut [f32], sink: f32) {
    let max = max_of(x).max(sink);
    if max == f32::NEG_INFINITY {
        x.fill(0.0);
        return;
    }
    super::exp::exp_shifted_in_place(x, max);
    let sum = sum_f64(x) + f64::from((sink - max).exp());
    let inv = (1.0 / sum) as f32;
    for v in x.iter_mut() {
        *v *= inv;
    }
}

/// `Σ x` in f64: element `i` goes to chain `i % 8` (in ascending order), the chains are added
/// pairwise (`((c0+c1)+(c2+c3))+((c4+c5)+(c6+c7))`), then the elements past the last full
/// eight in ascending order. Eight chains keep the adds independent (vectorised) where one
/// chain waits on each add's latency.
fn sum_f64(x: &[f32]) -> f64 {
    let (chunks, tail) = x.as_chunks::<8>();
    let mut c = [0.0f64; 8];
    for chunk in chunks {
        for (acc, &v) in c.iter_mut().zip(chunk) {
            *acc += f64::from(v);
        }
    }
    let total = ((c[0] + c[1]) + (c[2] + c[3])) + ((c[4] + c[5]) + (c[6] + c[7]));
    tail.iter().fold(total, |s, &v| s + f64::from(v))
}

/// `max` of `x` with NaNs ignored (`f32::max`), `-inf` when empty or all NaN.
fn max_of(x: &[f32]) -> f32 {
    let (chunks, tail) = x.as_chunks::<16>();
    let mut lanes = [f32::NEG_INFINITY; 16];
    for c in chunks {
        for (m, &v) in lanes.iter_mut().zip(c) {
            *m = m.max(v);
        }
    }
    tail.iter()
        .chain(&lanes)
        .copied()
        .fold(f32::NEG_INFINITY, f32::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sink_takes_its_share_and_leaves_the_rest_in_proportion() {
        let mut plain = [0.5f32, -1.0, 2.0];
        let mut sunk = plain;
        softmax_in_place(&mut plain);
        softmax_with_sink_in_place(&mut sunk, 1.0);
        let total: f32 = sunk.iter().sum();
        let expected = (0.5f32.exp() + (-1.0f32).exp() + 2.0f32.exp())
            / (0.5f32.exp() + (-1.0f32).exp() + 2.0f32.exp() + 1.0f32.exp());
        assert!((total - expected).abs() < 1e-6, "{total} vs {expected}");
        for (a, b) in plain.iter().zip(&sunk) {
            assert!((b / a - expected).abs() < 1e-5);
        }
        // A sink far below the scores changes nothing visible; one far above takes everything.
        let mut low = [0.5f32, -1.0, 2.0];
        softmax_with_sink_in_place(&mut low, -1e4);
        assert_eq!(low, plain);
        let mut high = [0.5f32, -1.0, 2.0];
        softmax_with_sink_in_place(&mut high, 1e4);
        assert_eq!(high, [0.0; 3]);
    }

    #[test]
    fn sums_to_one_and_masks() {
        let mut x = [1.0f32, 2.0, f32::NEG_INFINITY, 3.0];
        softmax_in_place(&mut x);
        assert_eq!(x[2], 0.0);
        assert!((x.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        assert!(x[3] > x[1] && x[1] > x[0]);
    }

    /// The split loops give the fused reference loop's bits (same exponentials, the same f64
    /// chains added in the same order), with NaNs and masked entries anywhere.
    #[test]
    fn equals_the_fused_reference_loop() {
        fn reference(x: &mut [f32]) {
            let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            if max == f32::NEG_INFINITY {
                x.fill(0.0);
                return;
            }
            let mut c = [0.0f64; 8];
            let full = x.len() / 8 * 8;
            for (i, v) in x.iter_mut().enumerate() {
                *v = crate::ops::exp::exp_ref(*v - max);
                if i < full {
                    c[i % 8] += f64::from(*v);
                }
            }
            let mut sum = ((c[0] + c[1]) + (c[2] + c[3])) + ((c[4] + c[5]) + (c[6] + c[7]));
            for v in &x[full..] {
                sum += f64::from(*v);
            }
            let inv = (1.0 / sum) as f32;
            for v in x.iter_mut() {
                *v *= inv;
            }
        }
        for n in [1usize, 5, 16, 17, 100, 515] {
            let mut x: Vec<f32> = (0..n)
                .map(|i| ((i as u32).wrapping_mul(2_654_435_761) % 3001) as f32 / 100.0 - 15.0)
                .collect();
            if n > 3 {
                x[2] = f32::NEG_INFINITY;
            }
            let mut y = x.clone();
            softmax_in_place(&mut x);
            reference(&mut y);
            assert_eq!(x, y, "n={n}");
        }
        let (mut a, mut b) = (
            [f32::NAN, 1.0, 3.0].repeat(7),
            [f32::NAN, 1.0, 3.0].repeat(7),
        );
        softmax_in_place(&mut a);
        reference(&mut b);
        assert_eq!(format!("{a:?}"), format!("{b:?}"));
        let mut masked = [f32::NEG_INFINITY; 20];
        softmax_in_place(&mut masked);
        assert_eq!(masked, [0.0; 20]);
    }
}
