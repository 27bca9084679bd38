//! Activations of the feed-forward block: SiLU and the gated product `silu(gate) * up`,
//! plus the residual add.

/// `x / (1 + e^-x)` in f32, ggml's scalar formula.
#[inline]
pub fn silu(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}

/// `gate[i] = silu(gate[i]) * up[i]` (the SwiGLU FFN activation); lengths must match.
pub fn silu_mul_in_place(gate: &mut [f32], up: &[f32]) {
    assert_eq!(gate.len(), up.len(), "silu_mul: length");
    for (g, &u) in gate.iter_mut().zip(up) {
        *g = silu(*g) * u;
    }
}

/// `acc[i] += x[i]`; lengths must match.
pub fn add_in_place(acc: &mut [f32], x: &[f32]) {
    assert_eq!(acc.len(), x.len(), "add: length");
    for (a, &v) in acc.iter_mut().zip(x) {
        *a += v;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn silu_matches_definition() {
        assert_eq!(silu(0.0), 0.0);
        assert!((silu(1.0) - 0.731_058_6).abs() < 1e-6);
        let mut g = [2.0f32, -3.0];
        silu_mul_in_place(&mut g, &[1.0, 2.0]);
        assert!((g[0] - silu(2.0)).abs() < 1e-7 && (g[1] - 2.0 * silu(-3.0)).abs() < 1e-7);
    }
}
