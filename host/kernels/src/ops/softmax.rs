//! In-place softmax of one row: subtract the max, exponentiate in f32, sum in f64, scale by the
//! f32 reciprocal, as ggml's `soft_max` does.

/// Replaces `x` with `softmax(x)`. Entries equal to `-inf` become exactly 0.
pub fn softmax_in_place(x: &mut [f32]) {
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if max == f32::NEG_INFINITY {
        x.fill(0.0);
        return;
    }
    let mut sum = 0.0f64;
    for v in x.iter_mut() {
        *v = (*v - max).exp();
        sum += f64::from(*v);
    }
    let inv = (1.0 / sum) as f32;
    for v in x.iter_mut() {
        *v *= inv;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_to_one_and_masks() {
        let mut x = [1.0f32, 2.0, f32::NEG_INFINITY, 3.0];
        softmax_in_place(&mut x);
        assert_eq!(x[2], 0.0);
        assert!((x.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        assert!(x[3] > x[1] && x[1] > x[0]);
    }
}
