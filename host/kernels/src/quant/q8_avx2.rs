//! The int8 activation blocks (Q8_0 and Q8_1 of 32 elements, Q8_K of 256) quantized 8 lanes
//! at a time with AVX2, for CPUs without the 512-bit forms (`q8_simd`, `q8k_simd`): the same
//! `amax`, scales and roundings as the scalar loops, so the bytes are identical (tests in
//! `quant::tests`). Q8_0/Q8_1 round half away from zero (C `roundf`) and hold values to
//! [-127, 127], NaN lanes giving 0; Q8_K keeps ggml's `nearest_int` bit trick and a truncating
//! `as i8`.

use std::arch::x86_64::*;

use super::blocks::BlockQ8K;
use crate::types::QK_K;

/// Whether the functions here may be called: the process runs the AVX2 level (avx2, fma,
/// f16c) and does not use the 512-bit forms.
pub(super) fn available() -> bool {
    crate::simd::level() == crate::simd::SimdLevel::Avx2 && !crate::simd::avx512_rows()
}

/// `|v|` lane by lane.
#[inline(always)]
fn abs(v: __m256) -> __m256 {
    // SAFETY: register-only; callers have avx2.
    unsafe { _mm256_andnot_ps(_mm256_set1_ps(-0.0), v) }
}

/// The largest of 8 lanes, all of them non-negative and not NaN.
#[inline(always)]
fn max8(m: __m256) -> f32 {
    // SAFETY: register-only; callers have avx2.
    unsafe {
        let h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps::<1>(m));
        let h = _mm_max_ps(h, _mm_movehl_ps(h, h));
        let h = _mm_max_ss(h, _mm_shuffle_ps::<0x55>(h, h));
        _mm_cvtss_f32(h)
    }
}

/// The sum of 8 i32 lanes.
#[inline(always)]
fn sum8(v: __m256i) -> i32 {
    // SAFETY: register-only; callers have avx2.
    unsafe {
        let h = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
        let h = _mm_add_epi32(h, _mm_unpackhi_epi64(h, h));
        let h = _mm_add_epi32(h, _mm_shuffle_epi32::<0b01>(h));
        _mm_cvtsi128_si32(h)
    }
}

/// Bytes of four vectors of i32 in [-128, 255] (taken mod 256), in element order.
#[inline(always)]
fn bytes32(q: [__m256i; 4]) -> __m256i {
    // SAFETY: register-only; callers have avx2.
    unsafe {
        let low = _mm256_set1_epi32(0xff);
        let (a, b) = (_mm256_and_si256(q[0], low), _mm256_and_si256(q[1], low));
        let (c, d) = (_mm256_and_si256(q[2], low), _mm256_and_si256(q[3], low));
        // Within each 128-bit half: a's, b's, c's, d's four lanes of that half.
        let ab = _mm256_packus_epi32(a, b);
        let cd = _mm256_packus_epi32(c, d);
        let all = _mm256_packus_epi16(ab, cd);
        _mm256_permutevar8x32_epi32(all, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7))
    }
}

/// `max |x_i|` of a 32-element block, NaNs ignored (as `f32::max`).
///
/// # Safety
/// avx2.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn amax32(x: &[f32; 32]) -> f32 {
    // SAFETY: 32 readable f32.
    unsafe {
        // `max(v, m)` returns `m` when `v` is NaN, so NaNs never win (f32::max's rule).
        let mut m = _mm256_setzero_ps();
        for c in 0..4 {
            m = _mm256_max_ps(abs(_mm256_loadu_ps(x.as_ptr().add(8 * c))), m);
        }
        max8(m)
    }
}

/// `qs[i] = roundf(x[i] · id)` held to [-127, 127] (NaN: 0) for 32 elements; returns `Σ qs`.
///
/// # Safety
/// avx2.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn block32(x: &[f32; 32], id: f32, qs: &mut [i8; 32]) -> i32 {
    // SAFETY: 32 readable f32 and 32 writable bytes.
    unsafe {
        let idv = _mm256_set1_ps(id);
        let half = _mm256_set1_ps(0.5);
        let one = _mm256_set1_ps(1.0);
        let sign = _mm256_set1_ps(-0.0);
        let (lo, hi) = (_mm256_set1_ps(-127.0), _mm256_set1_ps(127.0));
        let mut q = [_mm256_setzero_si256(); 4];
        for (c, slot) in q.iter_mut().enumerate() {
            let y = _mm256_mul_ps(_mm256_loadu_ps(x.as_ptr().add(8 * c)), idv);
            let t = _mm256_round_ps::<{ _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC }>(y);
            // |y - t| < 1 is exact; a half or more rounds away from zero.
            let away = _mm256_cmp_ps::<_CMP_GE_OQ>(abs(_mm256_sub_ps(y, t)), half);
            let step = _mm256_or_ps(one, _mm256_and_ps(y, sign));
            let r = _mm256_add_ps(t, _mm256_and_ps(away, step));
            // Held to [-127, 127] (an infinite `y` when `id` overflowed), NaN to 0.
            let r = _mm256_min_ps(_mm256_max_ps(r, lo), hi);
            let r = _mm256_and_ps(r, _mm256_cmp_ps::<_CMP_ORD_Q>(y, y));
            *slot = _mm256_cvttps_epi32(r);
        }
        let sum = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
        _mm256_storeu_si256(qs.as_mut_ptr().cast(), bytes32(q));
        sum8(sum)
    }
}

/// Quantizes one 256-element block into `y` (`q8k::quantize_scalar`'s bytes).
///
/// # Safety
/// avx2.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn block_q8k(x: &[f32; QK_K], y: &mut BlockQ8K) {
    // SAFETY: 256 readable f32 and a whole block to write; all loads/stores unaligned.
    unsafe {
        let p = x.as_ptr();
        // `max(v, m)` returns `m` when `v` is NaN, so NaNs never win (the scalar `>` test).
        let mut m = _mm256_setzero_ps();
        for c in 0..QK_K / 8 {
            m = _mm256_max_ps(abs(_mm256_loadu_ps(p.add(8 * c))), m);
        }
        let amax = max8(m);
        if amax == 0.0 {
            *y = bytemuck::Zeroable::zeroed();
            return;
        }
        // The first element whose magnitude is `amax` is the one the scalar loop keeps.
        let target = _mm256_set1_ps(amax);
        let mut max = 0.0f32;
        for c in 0..QK_K / 8 {
            let a = abs(_mm256_loadu_ps(p.add(8 * c)));
            let hit = _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_EQ_OQ>(a, target));
            if hit != 0 {
                max = x[8 * c + hit.trailing_zeros() as usize];
                break;
            }
        }
        let iscale = -127.0 / max;
        let sv = _mm256_set1_ps(iscale);
        let cap = _mm256_set1_epi32(127);
        let magic = _mm256_set1_ps(12_582_912.0);
        let mantissa = _mm256_set1_epi32(0x007f_ffff);
        let bias = _mm256_set1_epi32(0x0040_0000);
        let ones = _mm256_set1_epi16(1);
        for g in 0..QK_K / 32 {
            let mut q = [_mm256_setzero_si256(); 4];
            for (c, slot) in q.iter_mut().enumerate() {
                let v = _mm256_mul_ps(_mm256_loadu_ps(p.add(32 * g + 8 * c)), sv);
                // `nearest_int`'s own bit trick, lane by lane (so NaN payloads and infinities
                // give the scalar loop's bytes too).
                let t = _mm256_castps_si256(_mm256_add_ps(v, magic));
                let t = _mm256_sub_epi32(_mm256_and_si256(t, mantissa), bias);
                *slot = _mm256_min_epi32(t, cap);
            }
            let bytes = bytes32(q);
            _mm256_storeu_si256(y.qs.as_mut_ptr().add(32 * g).cast(), bytes);
            // bsums from the stored bytes, 16 to a sum.
            for h in 0..2 {
                let b16 = if h == 0 {
                    _mm256_castsi256_si128(bytes)
                } else {
                    _mm256_extracti128_si256::<1>(bytes)
                };
                let wide = _mm256_madd_epi16(_mm256_cvtepi8_epi16(b16), ones);
                y.bsums[2 * g + h] = sum8(wide) as i16;
            }
        }
        y.d = 1.0 / iscale;
    }
}
