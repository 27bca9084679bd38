//! The 32-element int8 activation blocks (Q8_0, Q8_1) quantized 16 lanes at a time with
//! AVX-512: the same `amax`, scale and C `roundf` (half away from zero) as the scalar loops in
//! `q8_0`/`q8_1`, so the bytes are identical (test in `quant::tests`); NaN lanes give 0 as Rust's
//! `as i8` does.

use std::arch::x86_64::*;

/// Whether [`block32`] may be called: the process uses the 512-bit row loops
/// ([`crate::simd::avx512_rows`], which implies avx512f/bw).
pub(super) fn available() -> bool {
    crate::simd::level() == crate::simd::SimdLevel::Avx2 && crate::simd::avx512_rows()
}

/// `max |x_i|` of a 32-element block, NaNs ignored (as `f32::max`).
///
/// # Safety
/// avx512f.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn amax32(x: &[f32; 32]) -> f32 {
    // SAFETY: 32 readable f32.
    unsafe {
        let a = _mm512_abs_ps(_mm512_loadu_ps(x.as_ptr()));
        let b = _mm512_abs_ps(_mm512_loadu_ps(x.as_ptr().add(16)));
        // `max(v, m)` returns `m` when `v` is NaN, so NaNs never win (f32::max's rule).
        let m = _mm512_max_ps(a, _mm512_setzero_ps());
        let m = _mm512_max_ps(b, m);
        _mm512_reduce_max_ps(m)
    }
}

/// `qs[i] = roundf(x[i] · id)` held to [-127, 127] (NaN: 0) for 32 elements; returns `Σ qs`.
///
/// # Safety
/// avx512f + avx512bw.
#[target_feature(enable = "avx512f,avx512bw")]
pub(super) unsafe fn block32(x: &[f32; 32], id: f32, qs: &mut [i8; 32]) -> i32 {
    // SAFETY: 32 readable f32 and 32 writable bytes.
    unsafe {
        let idv = _mm512_set1_ps(id);
        let half = _mm512_set1_ps(0.5);
        let one = _mm512_set1_ps(1.0);
        let mut sum = _mm512_setzero_si512();
        for h in 0..2 {
            let y = _mm512_mul_ps(_mm512_loadu_ps(x.as_ptr().add(16 * h)), idv);
            let t = _mm512_roundscale_ps::<{ _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC }>(y);
            // |y - t| < 1 is exact; a half or more rounds away from zero.
            let away = _mm512_cmp_ps_mask::<_CMP_GE_OQ>(_mm512_abs_ps(_mm512_sub_ps(y, t)), half);
            let step = _mm512_or_ps(
                one,
                _mm512_and_ps(y, _mm512_castsi512_ps(_mm512_set1_epi32(i32::MIN))),
            );
            let r = _mm512_mask_add_ps(t, away, t, step);
            // Held to [-127, 127] (an infinite `y` when `id` overflowed).
            let r = _mm512_min_ps(
                _mm512_max_ps(r, _mm512_set1_ps(-127.0)),
                _mm512_set1_ps(127.0),
            );
            let ordered = _mm512_cmp_ps_mask::<_CMP_ORD_Q>(y, y);
            let q = _mm512_maskz_cvttps_epi32(ordered, r);
            sum = _mm512_add_epi32(sum, q);
            _mm_storeu_si128(qs.as_mut_ptr().add(16 * h).cast(), _mm512_cvtsepi32_epi8(q));
        }
        _mm512_reduce_add_epi32(sum)
    }
}
