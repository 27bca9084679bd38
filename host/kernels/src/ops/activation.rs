//! Activations of the feed-forward block: SiLU and the gated product `silu(gate) * up` (SwiGLU),
//! GELU in its tanh form and `gelu(gate) * up` (GeGLU, Gemma), plus the residual add.

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

/// `sqrt(2/π)`, as ggml spells it.
const SQRT_2_OVER_PI: f32 = 0.797_884_6;
/// The cubic coefficient of the tanh approximation.
const GELU_COEF_A: f32 = 0.044_715;

/// GELU, tanh form: `0.5·x·(1 + tanh(sqrt(2/π)·x·(1 + 0.044715·x²)))` in f32, the formula of
/// ggml's `ggml_gelu_f32`. ggml's CPU backend by default reads a 65536-entry f16 table of this
/// function at the f16-rounded input; this evaluates it exactly at the f32 input instead, which
/// is at least as close to the true function everywhere.
#[inline]
pub fn gelu_tanh(x: f32) -> f32 {
    0.5 * x * (1.0 + (SQRT_2_OVER_PI * x * (1.0 + GELU_COEF_A * x * x)).tanh())
}

/// `gate[i] = gelu_tanh(gate[i]) * up[i]` (the GeGLU FFN activation); lengths must match.
pub fn gelu_mul_in_place(gate: &mut [f32], up: &[f32]) {
    assert_eq!(gate.len(), up.len(), "gelu_mul: length");
    for (g, &u) in gate.iter_mut().zip(up) {
        *g = gelu_tanh(*g) * u;
    }
}

/// `x[i] *= factor`.
pub fn scale_in_place(x: &mut [f32], factor: f32) {
    for v in x {
        *v *= factor;
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

    /// The tanh form against the same formula in f64 and against the exact erf-based GELU,
    /// which it approximates to within 1e-3 (the approximation's own error).
    #[test]
    fn gelu_tanh_matches_its_formula_and_approximates_gelu() {
        assert_eq!(gelu_tanh(0.0), 0.0);
        for i in -800..=800 {
            let x = i as f32 / 100.0;
            let xd = f64::from(x);
            let c = (2.0 / std::f64::consts::PI).sqrt();
            let want = 0.5 * xd * (1.0 + (c * xd * (1.0 + 0.044715 * xd * xd)).tanh());
            let got = f64::from(gelu_tanh(x));
            assert!(
                (got - want).abs() <= 1e-6 * (1.0 + want.abs()),
                "x {x}: {got} vs {want}"
            );
            if x.abs() <= 3.0 {
                let exact = 0.5 * xd * (1.0 + erf(xd / std::f64::consts::SQRT_2));
                assert!(
                    (got - exact).abs() < 1e-3,
                    "x {x}: {got} vs erf form {exact}"
                );
            }
        }
        assert_eq!(gelu_tanh(20.0), 20.0);
        assert_eq!(gelu_tanh(-20.0), -0.0);
        let mut g = [1.5f32, -0.5];
        gelu_mul_in_place(&mut g, &[2.0, 3.0]);
        assert_eq!(g, [gelu_tanh(1.5) * 2.0, gelu_tanh(-0.5) * 3.0]);
    }

    /// erf by its Maclaurin series, accurate to ~1e-13 for |x| ≤ 2.2; for the test only.
    fn erf(x: f64) -> f64 {
        let (mut term, mut sum) = (x, x);
        for n in 1..80 {
            let n = f64::from(n);
            term *= -x * x / n;
            sum += term / (2.0 * n + 1.0);
        }
        2.0 / std::f64::consts::PI.sqrt() * sum
    }
}
