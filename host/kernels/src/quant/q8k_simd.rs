//! Q8_K activation blocks (256 elements, the K-quants' dot partner) quantized 16 lanes at a
//! time with AVX-512, byte-identical to the scalar loop in `q8k`: the same signed `max` (the
//! first element of largest magnitude, NaNs never chosen), `iscale = -127 / max`, ggml's
//! `nearest_int` (its 1.5·2^23 bit trick, lane by lane), `min(127)`
//! and a truncating `as i8`, and `bsums` summed from the stored bytes.

use std::arch::x86_64::*;

use super::blocks::BlockQ8K;
use crate::types::QK_K;

/// Whether [`block`] may be called: the process uses the 512-bit row loops
/// ([`crate::simd::avx512_rows`], which implies avx512f/bw).
pub(super) fn available() -> bool {
    crate::simd::level() == crate::simd::SimdLevel::Avx2 && crate::simd::avx512_rows()
}

/// Quantizes one 256-element block into `y`.
///
/// # Safety
/// avx512f + avx512bw.
#[target_feature(enable = "avx512f,avx512bw")]
pub(super) unsafe fn block(x: &[f32; QK_K], y: &mut BlockQ8K) {
    // SAFETY: 256 readable f32 and a whole block to write; all loads/stores unaligned.
    unsafe {
        let p = x.as_ptr();
        // `max(v, m)` returns `m` when `v` is NaN, so NaNs never win (the scalar `>` test).
        let mut m = _mm512_setzero_ps();
        for c in 0..QK_K / 16 {
            m = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(p.add(16 * c))), m);
        }
        let amax = _mm512_reduce_max_ps(m);
        if amax == 0.0 {
            *y = bytemuck::Zeroable::zeroed();
            return;
        }
        // The first element whose magnitude is `amax` is the one the scalar loop keeps.
        let target = _mm512_set1_ps(amax);
        let mut max = 0.0f32;
        for c in 0..QK_K / 16 {
            let a = _mm512_abs_ps(_mm512_loadu_ps(p.add(16 * c)));
            let hit = _mm512_cmp_ps_mask::<_CMP_EQ_OQ>(a, target);
            if hit != 0 {
                max = x[16 * c + hit.trailing_zeros() as usize];
                break;
            }
        }
        let iscale = -127.0 / max;
        let sv = _mm512_set1_ps(iscale);
        let cap = _mm512_set1_epi32(127);
        let magic = _mm512_set1_ps(12_582_912.0);
        let mantissa = _mm512_set1_epi32(0x007f_ffff);
        let bias = _mm512_set1_epi32(0x0040_0000);
        for c in 0..QK_K / 16 {
            let v = _mm512_mul_ps(_mm512_loadu_ps(p.add(16 * c)), sv);
            // `nearest_int`'s own bit trick, lane by lane (so NaN payloads and infinities give
            // the scalar loop's bytes too).
            let t = _mm512_castps_si512(_mm512_add_ps(v, magic));
            let q = _mm512_sub_epi32(_mm512_and_si512(t, mantissa), bias);
            let q = _mm512_min_epi32(q, cap);
            let bytes = _mm512_cvtepi32_epi8(q);
            _mm_storeu_si128(y.qs.as_mut_ptr().add(16 * c).cast(), bytes);
            let back = _mm512_cvtepi8_epi32(bytes);
            y.bsums[c] = _mm512_reduce_add_epi32(back) as i16;
        }
        y.d = 1.0 / iscale;
    }
}
