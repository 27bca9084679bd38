//! Activations of the feed-forward block: SiLU and the gated product `silu(gate) * up` (SwiGLU),
//! GELU in its tanh form and `gelu(gate) * up` (GeGLU, Gemma), gpt-oss's clamped SwiGLU,
//! soft-capping (`c · tanh(x / c)`), plus the residual add.
//! The gated products of a batch are split across the worker pool in fixed chunks; each element
//! is computed by the same scalar formula wherever it lands, so results never depend on the
//! split or the thread count.

/// `x / (1 + e^-x)` in f32, ggml's formula, with [`super::exp::exp_ref`]'s `e^x` (the bits
/// [`silu_mul_in_place`]'s vector paths give).
#[inline]
pub fn silu(x: f32) -> f32 {
    x / (1.0 + super::exp::exp_ref(-x))
}

/// Elements per pool task of the gated products (below two chunks the call stays on the
/// calling thread: a dispatch costs more than it saves).
const GATED_CHUNK: usize = 8192;

use super::gelu;
pub use super::gelu::gelu_tanh;

/// `apply(gate_piece, up_piece)` over the worker pool in [`GATED_CHUNK`] pieces (one call on
/// the calling thread for short slices).
fn gated_in_place(gate: &mut [f32], up: &[f32], apply: impl Fn(&mut [f32], &[f32]) + Sync) {
    if gate.len() < 2 * GATED_CHUNK {
        apply(gate, up);
        return;
    }
    crate::threads::for_each_chunk_mut(gate, GATED_CHUNK, |i, g| {
        let start = i * GATED_CHUNK;
        apply(g, &up[start..start + g.len()]);
    });
}

/// `gate[i] = silu(gate[i]) * up[i]` (the SwiGLU FFN activation); lengths must match.
pub fn silu_mul_in_place(gate: &mut [f32], up: &[f32]) {
    assert_eq!(gate.len(), up.len(), "silu_mul: length");
    gated_in_place(gate, up, super::exp::silu_mul);
}

/// `gate[i] = gelu_tanh(gate[i]) * up[i]` (the GeGLU FFN activation); lengths must match.
pub fn gelu_mul_in_place(gate: &mut [f32], up: &[f32]) {
    assert_eq!(gate.len(), up.len(), "gelu_mul: length");
    gated_in_place(gate, up, gelu::gelu_mul);
}

/// gpt-oss's clamped SwiGLU (ggml's `swiglu_oai`, alpha 1.702, limit 7):
/// `x = min(gate, 7)`, `y = clamp(up, -7, 7)`, `gate = x · sigmoid(1.702 x) · (y + 1)`, with
/// ggml's formula and `expf`. Lengths must match.
pub fn swiglu_oai_in_place(gate: &mut [f32], up: &[f32]) {
    const ALPHA: f32 = 1.702;
    const LIMIT: f32 = 7.0;
    assert_eq!(gate.len(), up.len(), "swiglu_oai: length");
    gated_in_place(gate, up, |g, u| {
        for (gv, &uv) in g.iter_mut().zip(u) {
            let x = gv.min(LIMIT);
            let y = uv.clamp(-LIMIT, LIMIT);
            *gv = x / (1.0 + (ALPHA * -x).exp()) * (y + 1.0);
        }
    });
}

/// `x[i] = cap · tanh(x[i] / cap)` in place, as ggml computes a soft-cap from three ops
/// (`scale(1/cap)`, `tanh`, `scale(cap)`): Gemma 2's final logits.
pub fn softcap_in_place(x: &mut [f32], cap: f32) {
    let inv = 1.0 / cap;
    for v in x {
        *v = (*v * inv).tanh() * cap;
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
    fn swiglu_oai_clamps_both_inputs() {
        let mut g = [1.0f32, 20.0, -3.0];
        swiglu_oai_in_place(&mut g, &[0.5, 100.0, -100.0]);
        let sig = |x: f32| 1.0 / (1.0 + (-1.702 * x).exp());
        assert!((g[0] - sig(1.0) * 1.5).abs() < 1e-6);
        assert!((g[1] - 7.0 * sig(7.0) * 8.0).abs() < 1e-4);
        assert!((g[2] - (-3.0 * sig(-3.0) * -6.0)).abs() < 1e-5);
    }

    #[test]
    fn softcap_bounds_and_keeps_small_values() {
        let mut x = [0.01f32, 1e6, -1e6];
        softcap_in_place(&mut x, 30.0);
        assert!((x[0] - 0.01).abs() < 1e-6);
        assert_eq!(x[1], 30.0);
        assert_eq!(x[2], -30.0);
    }

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

    /// The pooled gated products equal the element-by-element formula bit for bit, for every
    /// pool size and for lengths around the chunk edges.
    #[test]
    fn gated_products_do_not_depend_on_the_pool() {
        for len in [1, GATED_CHUNK, 2 * GATED_CHUNK, 5 * GATED_CHUNK + 7] {
            let x: Vec<f32> = (0..len).map(|i| (i as f32 * 0.37).sin() * 6.0).collect();
            let up: Vec<f32> = (0..len).map(|i| (i as f32 * 0.11).cos()).collect();
            let want_silu: Vec<f32> = x.iter().zip(&up).map(|(&g, &u)| silu(g) * u).collect();
            let want_gelu: Vec<f32> = x.iter().zip(&up).map(|(&g, &u)| gelu_tanh(g) * u).collect();
            for threads in [1, 2, 3] {
                let pool = crate::threads::Pool::new(threads);
                pool.install(|| {
                    let mut g = x.clone();
                    silu_mul_in_place(&mut g, &up);
                    assert_eq!(g, want_silu, "silu, len {len}, {threads} threads");
                    let mut g = x.clone();
                    gelu_mul_in_place(&mut g, &up);
                    assert_eq!(g, want_gelu, "gelu, len {len}, {threads} threads");
                });
            }
        }
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
