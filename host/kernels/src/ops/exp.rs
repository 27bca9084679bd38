//! `e^x` in f32, the one used by softmax, SiLU and GELU's tanh: `x = n·ln 2 + r` (ln 2 in two
//! parts, `n = round(x·log2 e)`), `e^r` by its degree-7 Taylor polynomial in Horner form with
//! fused multiply-adds (|r| ≤ ln 2 / 2: relative error under 1e-8), then scaled by `2^n` in two
//! exact halves so results near the ends of the range under- and overflow as one correctly
//! rounded product. Within 1 ULP of the exact value over the f32 range (tested against f64).
//!
//! Invariant: the AVX2 (8 lanes) and AVX-512 (16 lanes) paths perform the same IEEE operations
//! per element as [`exp_ref`], so every path gives its bits; NaN passes through unchanged,
//! `-inf` gives 0 and `+inf` gives `+inf`.

use crate::simd::{self, SimdLevel};

/// `x` is clamped to this range first: below it every result is 0, above it `+inf`, and `n`
/// stays within `[-150, 129]`, so `2^(n/2)` and `2^(n - n/2)` are normal numbers.
const LO: f32 = -104.0;
const HI: f32 = 89.0;
const LOG2E: f32 = std::f32::consts::LOG2_E;
/// ln 2 = `LN2_HI + LN2_LO`; `n · LN2_HI` is exact for |n| < 2^9.
const LN2_HI: f32 = 0.693_145_75;
const LN2_LO: f32 = 1.428_606_8e-6;
/// 1/k! for k = 7 down to 2 (Horner order); the two last steps add `r·(…) + 1` twice.
const P: [f32; 6] = [
    1.0 / 5040.0,
    1.0 / 720.0,
    1.0 / 120.0,
    1.0 / 24.0,
    1.0 / 6.0,
    0.5,
];

/// `2^e` for `e` in `[-126, 127]`.
#[inline]
fn pow2(e: i32) -> f32 {
    f32::from_bits(((e + 127) as u32) << 23)
}

/// The reference `e^x`: what every vector path computes per element.
#[inline]
pub fn exp_ref(x: f32) -> f32 {
    if x.is_nan() {
        return x;
    }
    let x = x.clamp(LO, HI);
    let n = (x * LOG2E).round_ties_even();
    let r = n.mul_add(-LN2_HI, x);
    let r = n.mul_add(-LN2_LO, r);
    let mut p = P[0];
    for c in &P[1..] {
        p = p.mul_add(r, *c);
    }
    let y = p.mul_add(r, 1.0).mul_add(r, 1.0);
    let n = n as i32;
    let half = n >> 1;
    y * pow2(half) * pow2(n - half)
}

/// `x[i] = e^(x[i] - shift)` with [`exp_ref`]'s bits.
#[inline]
pub fn exp_shifted_in_place(x: &mut [f32], shift: f32) {
    #[allow(unused_mut)]
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    if simd::level() == SimdLevel::Avx2 {
        done = if simd::avx512_rows() {
            // SAFETY: avx512_rows implies avx512f.
            unsafe { avx512::exp_shifted(x, shift) }
        } else {
            // SAFETY: the AVX2 level implies avx2 and fma.
            unsafe { avx2::exp_shifted(x, shift) }
        };
    }
    for v in &mut x[done..] {
        *v = exp_ref(*v - shift);
    }
}

/// `gate[i] = silu(gate[i]) · up[i]`, the vector paths giving [`super::activation::silu`]'s bits.
#[inline]
pub fn silu_mul(gate: &mut [f32], up: &[f32]) {
    assert_eq!(gate.len(), up.len(), "silu_mul: length");
    #[allow(unused_mut)]
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    if simd::level() == SimdLevel::Avx2 {
        done = if simd::avx512_rows() {
            // SAFETY: avx512_rows implies avx512f; lengths are equal.
            unsafe { avx512::silu_mul(gate, up) }
        } else {
            // SAFETY: the AVX2 level implies avx2 and fma; lengths are equal.
            unsafe { avx2::silu_mul(gate, up) }
        };
    }
    for (g, &u) in gate[done..].iter_mut().zip(&up[done..]) {
        *g = super::activation::silu(*g) * u;
    }
}

#[cfg(target_arch = "x86_64")]
pub(super) mod avx2 {
    use std::arch::x86_64::*;

    use super::{HI, LN2_HI, LN2_LO, LO, LOG2E, P};

    /// 8 lanes of [`super::exp_ref`].
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    pub(in crate::ops) fn exp8(x: __m256) -> __m256 {
        let nan = _mm256_cmp_ps::<_CMP_UNORD_Q>(x, x);
        let c = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(LO)), _mm256_set1_ps(HI));
        let n = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(
            _mm256_mul_ps(c, _mm256_set1_ps(LOG2E)),
        );
        let r = _mm256_fmadd_ps(n, _mm256_set1_ps(-LN2_HI), c);
        let r = _mm256_fmadd_ps(n, _mm256_set1_ps(-LN2_LO), r);
        let mut p = _mm256_set1_ps(P[0]);
        for c in &P[1..] {
            p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(*c));
        }
        let one = _mm256_set1_ps(1.0);
        let y = _mm256_fmadd_ps(_mm256_fmadd_ps(p, r, one), r, one);
        let n = _mm256_cvtps_epi32(n);
        let half = _mm256_srai_epi32::<1>(n);
        let bias = _mm256_set1_epi32(127);
        let s1 = _mm256_castsi256_ps(_mm256_slli_epi32::<23>(_mm256_add_epi32(half, bias)));
        let rest = _mm256_sub_epi32(n, half);
        let s2 = _mm256_castsi256_ps(_mm256_slli_epi32::<23>(_mm256_add_epi32(rest, bias)));
        let e = _mm256_mul_ps(_mm256_mul_ps(y, s1), s2);
        _mm256_blendv_ps(e, x, nan)
    }

    /// # Safety
    /// avx2 and fma.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn exp_shifted(x: &mut [f32], shift: f32) -> usize {
        let s = _mm256_set1_ps(shift);
        let (chunks, _) = x.as_chunks_mut::<8>();
        for c in chunks.iter_mut() {
            // SAFETY: `c` is 8 floats.
            unsafe {
                let v = _mm256_loadu_ps(c.as_ptr());
                _mm256_storeu_ps(c.as_mut_ptr(), exp8(_mm256_sub_ps(v, s)));
            }
        }
        chunks.len() * 8
    }

    /// # Safety
    /// avx2 and fma; `gate.len() == up.len()`.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn silu_mul(gate: &mut [f32], up: &[f32]) -> usize {
        let (chunks, _) = gate.as_chunks_mut::<8>();
        let one = _mm256_set1_ps(1.0);
        for (c, u) in chunks.iter_mut().zip(up.as_chunks::<8>().0) {
            // SAFETY: `c` and `u` are 8 floats each.
            unsafe {
                let g = _mm256_loadu_ps(c.as_ptr());
                let e = exp8(_mm256_xor_ps(g, _mm256_set1_ps(-0.0)));
                let s = _mm256_div_ps(g, _mm256_add_ps(one, e));
                let out = _mm256_mul_ps(s, _mm256_loadu_ps(u.as_ptr()));
                _mm256_storeu_ps(c.as_mut_ptr(), out);
            }
        }
        chunks.len() * 8
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    use super::{HI, LN2_HI, LN2_LO, LO, LOG2E, P};

    /// 16 lanes of [`super::exp_ref`].
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn exp16(x: __m512) -> __m512 {
        let nan = _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(x, x);
        let c = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(LO)), _mm512_set1_ps(HI));
        let n = _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(
            _mm512_mul_ps(c, _mm512_set1_ps(LOG2E)),
        );
        let r = _mm512_fmadd_ps(n, _mm512_set1_ps(-LN2_HI), c);
        let r = _mm512_fmadd_ps(n, _mm512_set1_ps(-LN2_LO), r);
        let mut p = _mm512_set1_ps(P[0]);
        for c in &P[1..] {
            p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(*c));
        }
        let one = _mm512_set1_ps(1.0);
        let y = _mm512_fmadd_ps(_mm512_fmadd_ps(p, r, one), r, one);
        let n = _mm512_cvtps_epi32(n);
        let half = _mm512_srai_epi32::<1>(n);
        let bias = _mm512_set1_epi32(127);
        let s1 = _mm512_castsi512_ps(_mm512_slli_epi32::<23>(_mm512_add_epi32(half, bias)));
        let rest = _mm512_sub_epi32(n, half);
        let s2 = _mm512_castsi512_ps(_mm512_slli_epi32::<23>(_mm512_add_epi32(rest, bias)));
        let e = _mm512_mul_ps(_mm512_mul_ps(y, s1), s2);
        _mm512_mask_blend_ps(nan, e, x)
    }

    /// # Safety
    /// avx512f.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn exp_shifted(x: &mut [f32], shift: f32) -> usize {
        let s = _mm512_set1_ps(shift);
        let (chunks, _) = x.as_chunks_mut::<16>();
        for c in chunks.iter_mut() {
            // SAFETY: `c` is 16 floats.
            unsafe {
                let v = _mm512_loadu_ps(c.as_ptr());
                _mm512_storeu_ps(c.as_mut_ptr(), exp16(_mm512_sub_ps(v, s)));
            }
        }
        chunks.len() * 16
    }

    /// # Safety
    /// avx512f; `gate.len() == up.len()`.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn silu_mul(gate: &mut [f32], up: &[f32]) -> usize {
        let (chunks, _) = gate.as_chunks_mut::<16>();
        let one = _mm512_set1_ps(1.0);
        for (c, u) in chunks.iter_mut().zip(up.as_chunks::<16>().0) {
            // SAFETY: `c` and `u` are 16 floats each.
            unsafe {
                let g = _mm512_loadu_ps(c.as_ptr());
                let e = exp16(_mm512_castsi512_ps(_mm512_xor_si512(
                    _mm512_castps_si512(g),
                    _mm512_set1_epi32(i32::MIN),
                )));
                let s = _mm512_div_ps(g, _mm512_add_ps(one, e));
                let out = _mm512_mul_ps(s, _mm512_loadu_ps(u.as_ptr()));
                _mm512_storeu_ps(c.as_mut_ptr(), out);
            }
        }
        chunks.len() * 16
    }
}

#[cfg(test)]
#[path = "exp_tests.rs"]
mod tests;
