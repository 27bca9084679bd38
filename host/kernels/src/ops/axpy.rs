//! `out += p * v` over a row, for attention's weighted sum of V rows. The AVX2 path multiplies
//! and adds as two rounded steps (no FMA), so it equals the scalar reference bit for bit.

use half::f16;

use crate::simd::{self, SimdLevel};

/// `out[i] += p * v[i]` with `v` in f16 (lengths must match).
pub fn axpy_f16(out: &mut [f32], p: f32, v: &[f16]) {
    assert_eq!(out.len(), v.len(), "axpy_f16: length");
    #[cfg(target_arch = "x86_64")]
    if simd::level() == SimdLevel::Avx2 {
        // SAFETY: the level is Avx2 only when avx2, fma and f16c were detected at run time.
        unsafe { avx2::axpy_f16(out, p, v) };
        return;
    }
    axpy_f16_scalar(out, p, v);
}

/// `out[i] += p * v[i]` (lengths must match).
pub fn axpy_f32(out: &mut [f32], p: f32, v: &[f32]) {
    assert_eq!(out.len(), v.len(), "axpy_f32: length");
    #[cfg(target_arch = "x86_64")]
    if simd::level() == SimdLevel::Avx2 {
        // SAFETY: as above.
        unsafe { avx2::axpy_f32(out, p, v) };
        return;
    }
    axpy_f32_scalar(out, p, v);
}

/// Scalar reference of [`axpy_f16`].
pub fn axpy_f16_scalar(out: &mut [f32], p: f32, v: &[f16]) {
    for (o, &x) in out.iter_mut().zip(v) {
        *o += p * x.to_f32();
    }
}

/// Scalar reference of [`axpy_f32`].
pub fn axpy_f32_scalar(out: &mut [f32], p: f32, v: &[f32]) {
    for (o, &x) in out.iter_mut().zip(v) {
        *o += p * x;
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use half::f16;

    #[target_feature(enable = "avx2,f16c")]
    pub unsafe fn axpy_f16(out: &mut [f32], p: f32, v: &[f16]) {
        let n = out.len();
        let chunks = n / 8;
        let pv = _mm256_set1_ps(p);
        for c in 0..chunks {
            // SAFETY: c*8+8 <= n for both slices (lengths checked equal by the caller); loads and
            // stores are unaligned.
            unsafe {
                let h = _mm_loadu_si128(v.as_ptr().add(c * 8).cast());
                let x = _mm256_cvtph_ps(h);
                let o = _mm256_loadu_ps(out.as_ptr().add(c * 8));
                _mm256_storeu_ps(
                    out.as_mut_ptr().add(c * 8),
                    _mm256_add_ps(o, _mm256_mul_ps(pv, x)),
                );
            }
        }
        super::axpy_f16_scalar(&mut out[chunks * 8..], p, &v[chunks * 8..]);
    }

    #[target_feature(enable = "avx2")]
    pub unsafe fn axpy_f32(out: &mut [f32], p: f32, v: &[f32]) {
        let n = out.len();
        let chunks = n / 8;
        let pv = _mm256_set1_ps(p);
        for c in 0..chunks {
            // SAFETY: as in axpy_f16.
            unsafe {
                let x = _mm256_loadu_ps(v.as_ptr().add(c * 8));
                let o = _mm256_loadu_ps(out.as_ptr().add(c * 8));
                _mm256_storeu_ps(
                    out.as_mut_ptr().add(c * 8),
                    _mm256_add_ps(o, _mm256_mul_ps(pv, x)),
                );
            }
        }
        super::axpy_f32_scalar(&mut out[chunks * 8..], p, &v[chunks * 8..]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simd_equals_scalar_bit_for_bit() {
        for n in [1usize, 7, 8, 9, 64, 67] {
            let v32: Vec<f32> = (0..n)
                .map(|i| ((i * 37 % 19) as f32 - 9.0) * 0.173)
                .collect();
            let v16: Vec<f16> = v32.iter().map(|&x| f16::from_f32(x)).collect();
            let base: Vec<f32> = (0..n).map(|i| i as f32 * 0.01 - 0.3).collect();
            let (mut a, mut b) = (base.clone(), base.clone());
            axpy_f16(&mut a, 0.377, &v16);
            axpy_f16_scalar(&mut b, 0.377, &v16);
            assert_eq!(a, b, "f16 n={n}");
            let (mut a, mut b) = (base.clone(), base);
            axpy_f32(&mut a, -1.25, &v32);
            axpy_f32_scalar(&mut b, -1.25, &v32);
            assert_eq!(a, b, "f32 n={n}");
        }
    }
}
