//! RMS normalisation of one row, as ggml computes it: the sum of squares accumulates in f64,
//! the scale is applied first and the learned weight after.

/// `out[i] = (x[i] * 1/sqrt(mean(x²) + eps)) * weight[i]`. Lengths must match.
pub fn rms_norm(x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) {
    assert_eq!(x.len(), weight.len(), "rms_norm: weight length");
    assert_eq!(x.len(), out.len(), "rms_norm: output length");
    let sum: f64 = x.iter().map(|&v| f64::from(v * v)).sum();
    let mean = (sum / x.len() as f64) as f32;
    let scale = 1.0f32 / (mean + eps).sqrt();
    for ((o, &v), &w) in out.iter_mut().zip(x).zip(weight) {
        *o = (v * scale) * w;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_rms_row_is_unchanged_by_norm() {
        let x = [1.0f32, -1.0, 1.0, -1.0];
        let mut out = [0.0; 4];
        rms_norm(&x, &[2.0; 4], 0.0, &mut out);
        assert_eq!(out, [2.0, -2.0, 2.0, -2.0]);
    }
}
