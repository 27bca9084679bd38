//! GELU in its tanh form, `0.5·x·(1 + tanh(sqrt(2/π)·x·(1 + 0.044715·x²)))` (ggml's
//! `ggml_gelu_f32` formula), with tanh computed from [`super::exp`]'s `e^x` (the one softmax
//! and SiLU use): a scalar definition and an AVX2 twin that performs the same IEEE operations in
//! the same order, so both give the same bits for every input and the SIMD level never changes
//! a result.
//!
//! tanh(y) = sign(y)·(1 − 2/(e^{2|y|} + 1)), z = 2|y| capped at 88 (where tanh is 1 in f32).

/// `sqrt(2/π)`, as ggml spells it.
const SQRT_2_OVER_PI: f32 = 0.797_884_6;
/// The cubic coefficient of the tanh approximation.
const GELU_COEF_A: f32 = 0.044_715;
/// Largest exponent argument (e^88 < f32::MAX; tanh(44) is 1 in f32).
const EXP_MAX: f32 = 88.0;

/// tanh by the identity in the module docs.
#[inline]
fn tanh(y: f32) -> f32 {
    let z = (2.0 * y.abs()).min(EXP_MAX);
    let e = super::exp::exp_ref(z);
    (1.0 - 2.0 / (e + 1.0)).copysign(y)
}

/// GELU, tanh form, in f32. ggml's CPU backend by default reads a 65536-entry f16 table of this
/// function at the f16-rounded input; this evaluates it at the f32 input instead (within 1e-6
/// relative of the formula in f64), which is at least as close to the true function everywhere.
#[inline]
pub fn gelu_tanh(x: f32) -> f32 {
    0.5 * x * (1.0 + tanh(SQRT_2_OVER_PI * x * (1.0 + GELU_COEF_A * x * x)))
}

/// `gate[i] = gelu_tanh(gate[i]) * up[i]` over equal-length slices, 8 lanes at a time where the
/// CPU allows (same bits as the scalar loop).
pub(super) fn gelu_mul(gate: &mut [f32], up: &[f32]) {
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    if crate::simd::level() == crate::simd::SimdLevel::Avx2 {
        // SAFETY: the AVX2 level implies avx2 + fma (simd::detected); lengths are equal.
        done = unsafe { avx2::gelu_mul(gate, up) };
    }
    for (g, &u) in gate[done..].iter_mut().zip(&up[done..]) {
        *g = gelu_tanh(*g) * u;
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{EXP_MAX, GELU_COEF_A, SQRT_2_OVER_PI};
    use std::arch::x86_64::*;

    /// The scalar `gelu_tanh`, 8 lanes (same operation order).
    #[target_feature(enable = "avx2,fma")]
    fn gelu(x: __m256) -> __m256 {
        let sign = _mm256_set1_ps(-0.0);
        let one = _mm256_set1_ps(1.0);
        let x2 = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(GELU_COEF_A), x), x);
        let y = _mm256_mul_ps(
            _mm256_mul_ps(_mm256_set1_ps(SQRT_2_OVER_PI), x),
            _mm256_add_ps(one, x2),
        );
        let a = _mm256_andnot_ps(sign, y);
        // min(2|y|, 88): 2|y| is never NaN for finite x; a NaN x stays NaN through `0.5·x`.
        let z = _mm256_min_ps(
            _mm256_mul_ps(_mm256_set1_ps(2.0), a),
            _mm256_set1_ps(EXP_MAX),
        );
        let e = crate::ops::exp::avx2::exp8(z);
        let t = _mm256_sub_ps(
            one,
            _mm256_div_ps(_mm256_set1_ps(2.0), _mm256_add_ps(e, one)),
        );
        let t = _mm256_or_ps(_mm256_andnot_ps(sign, t), _mm256_and_ps(sign, y));
        _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5), x), _mm256_add_ps(one, t))
    }

    /// Does the first `len / 8 · 8` elements; returns how many.
    ///
    /// # Safety
    /// avx2 and fma; `gate.len() == up.len()`.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn gelu_mul(gate: &mut [f32], up: &[f32]) -> usize {
        let n = gate.len().min(up.len()) / 8 * 8;
        for i in (0..n).step_by(8) {
            // SAFETY: i + 8 <= n <= both lengths.
            unsafe {
                let g = _mm256_loadu_ps(gate.as_ptr().add(i));
                let u = _mm256_loadu_ps(up.as_ptr().add(i));
                _mm256_storeu_ps(gate.as_mut_ptr().add(i), _mm256_mul_ps(gelu(g), u));
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The SIMD twin gives the scalar definition's bits on a dense sweep of inputs (every
    /// 97th f32 bit pattern of [−30, 30], plus edges), in lane and tail positions.
    #[test]
    fn simd_gelu_equals_the_scalar_definition_bit_for_bit() {
        let mut xs: Vec<f32> = (0u32..(1 << 31))
            .step_by(97 * 64)
            .flat_map(|b| [f32::from_bits(b), -f32::from_bits(b)])
            .filter(|x| x.abs() <= 30.0)
            .collect();
        xs.extend([
            0.0, -0.0, 1e-30, -1e-30, 5.0, -5.0, 11.0, -11.0, 30.0, -30.0,
        ]);
        let up: Vec<f32> = (0..xs.len()).map(|i| 1.0 + (i % 7) as f32 * 0.25).collect();
        let want: Vec<u32> = xs
            .iter()
            .zip(&up)
            .map(|(&x, &u)| (gelu_tanh(x) * u).to_bits())
            .collect();
        let mut got = xs.clone();
        gelu_mul(&mut got, &up);
        let got: Vec<u32> = got.iter().map(|v| v.to_bits()).collect();
        let bad = want.iter().zip(&got).position(|(a, b)| a != b);
        assert_eq!(bad, None, "first mismatch at x = {:?}", bad.map(|i| xs[i]));
        assert!(xs.len() > 100_000, "sweep too small: {}", xs.len());
    }

    /// tanh from our exp against f64's over its whole range.
    #[test]
    fn tanh_is_within_two_ulps_of_one_of_f64() {
        for i in -40_000..=40_000 {
            let y = i as f32 / 1000.0;
            let want = f64::from(y).tanh();
            let got = f64::from(tanh(y));
            assert!((got - want).abs() <= 1.2e-7, "y {y}: {got} vs {want}");
        }
    }
}
