//! Rows of plain floats: F32 / F16 / BF16 bytes <-> f32, and the F16C-accelerated
//! `f32_to_f16_row` / `f16_to_f32_row`.
//!
//! Invariant: byte rows are little-endian and may have any alignment (read with
//! `from_le_bytes`); the SIMD conversions round exactly like the scalar ones (to nearest even).

use half::f16;

use super::round::{bf16_to_f32, f32_to_bf16, f32_to_f16};
#[cfg(target_arch = "x86_64")]
use crate::simd::{self, SimdLevel};

pub fn f32_bytes_to_f32(src: &[u8], dst: &mut [f32]) {
    for (o, c) in dst.iter_mut().zip(src.as_chunks::<4>().0.iter()) {
        *o = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
    }
}

pub fn f32_to_f32_bytes(src: &[f32], dst: &mut [u8]) {
    for (c, v) in dst.as_chunks_mut::<4>().0.iter_mut().zip(src) {
        c.copy_from_slice(&v.to_le_bytes());
    }
}

pub fn f16_bytes_to_f32(src: &[u8], dst: &mut [f32]) {
    for (o, c) in dst.iter_mut().zip(src.as_chunks::<2>().0.iter()) {
        *o = f16::from_le_bytes([c[0], c[1]]).to_f32();
    }
}

pub fn f32_to_f16_bytes(src: &[f32], dst: &mut [u8]) {
    for (c, v) in dst.as_chunks_mut::<2>().0.iter_mut().zip(src) {
        c.copy_from_slice(&f32_to_f16(*v).to_le_bytes());
    }
}

pub fn bf16_bytes_to_f32(src: &[u8], dst: &mut [f32]) {
    for (o, c) in dst.iter_mut().zip(src.as_chunks::<2>().0.iter()) {
        *o = bf16_to_f32(half::bf16::from_le_bytes([c[0], c[1]]));
    }
}

pub fn f32_to_bf16_bytes(src: &[f32], dst: &mut [u8]) {
    for (c, v) in dst.as_chunks_mut::<2>().0.iter_mut().zip(src) {
        c.copy_from_slice(&f32_to_bf16(*v).to_le_bytes());
    }
}

/// Converts `src` to f16 (round to nearest even). Panics if the lengths differ.
pub fn f32_to_f16_row(src: &[f32], dst: &mut [f16]) {
    assert_eq!(src.len(), dst.len(), "f32_to_f16_row: length mismatch");
    #[cfg(target_arch = "x86_64")]
    if simd::level() == SimdLevel::Avx2 {
        // SAFETY: level() == Avx2 means avx2, fma and f16c were detected at runtime.
        unsafe { x86::f32_to_f16(src, dst) };
        return;
    }
    for (o, &v) in dst.iter_mut().zip(src) {
        *o = f32_to_f16(v);
    }
}

/// Converts `src` to f32 (exact). Panics if the lengths differ.
pub fn f16_to_f32_row(src: &[f16], dst: &mut [f32]) {
    assert_eq!(src.len(), dst.len(), "f16_to_f32_row: length mismatch");
    #[cfg(target_arch = "x86_64")]
    if simd::level() == SimdLevel::Avx2 {
        // SAFETY: level() == Avx2 means avx2, fma and f16c were detected at runtime.
        unsafe { x86::f16_to_f32(src, dst) };
        return;
    }
    for (o, &v) in dst.iter_mut().zip(src) {
        *o = v.to_f32();
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    //! F16C conversions, 8 lanes at a time with a scalar tail.
    use half::f16;
    use std::arch::x86_64::*;

    /// # Safety
    /// The CPU must support avx2 and f16c; `src.len() == dst.len()`.
    #[target_feature(enable = "avx2,f16c")]
    pub unsafe fn f32_to_f16(src: &[f32], dst: &mut [f16]) {
        let n = src.len().min(dst.len());
        let body = n - n % 8;
        let mut i = 0;
        while i < body {
            // SAFETY: i + 8 <= n for both slices; unaligned loads/stores.
            unsafe {
                let v = _mm256_loadu_ps(src.as_ptr().add(i));
                let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v);
                _mm_storeu_si128(dst.as_mut_ptr().add(i).cast(), h);
            }
            i += 8;
        }
        for j in body..n {
            dst[j] = f16::from_f32(src[j]);
        }
    }

    /// # Safety
    /// The CPU must support avx2 and f16c; `src.len() == dst.len()`.
    #[target_feature(enable = "avx2,f16c")]
    pub unsafe fn f16_to_f32(src: &[f16], dst: &mut [f32]) {
        let n = src.len().min(dst.len());
        let body = n - n % 8;
        let mut i = 0;
        while i < body {
            // SAFETY: i + 8 <= n for both slices; unaligned loads/stores.
            unsafe {
                let h = _mm_loadu_si128(src.as_ptr().add(i).cast());
                _mm256_storeu_ps(dst.as_mut_ptr().add(i), _mm256_cvtph_ps(h));
            }
            i += 8;
        }
        for j in body..n {
            dst[j] = src[j].to_f32();
        }
    }
}
