//! Q8_K quantize/dequantize (`quantize_row_q8_K_ref`): the activation format for K-quant dots.
//!
//! Invariant: values lie in [-127, 127] and `bsums[j]` is the exact sum of `qs[16j..16j+16]`
//! (zero for an all-zero block, where llama.cpp leaves them unset).

use super::blocks::BlockQ8K;
use super::round::nearest_int;
use crate::types::QK_K;

pub fn quantize(src: &[f32], dst: &mut [BlockQ8K]) {
    #[cfg(target_arch = "x86_64")]
    if super::q8k_simd::available() {
        for (x, y) in src.as_chunks::<QK_K>().0.iter().zip(dst.iter_mut()) {
            // SAFETY: `available` implies avx512f + avx512bw.
            unsafe { super::q8k_simd::block(x, y) };
        }
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if super::q8_avx2::available() {
        for (x, y) in src.as_chunks::<QK_K>().0.iter().zip(dst.iter_mut()) {
            // SAFETY: `available` implies avx2.
            unsafe { super::q8_avx2::block_q8k(x, y) };
        }
        return;
    }
    quantize_scalar(src, dst);
}

/// The scalar loop of [`quantize`] (the reference the AVX-512 and AVX2 paths are tested against).
pub fn quantize_scalar(src: &[f32], dst: &mut [BlockQ8K]) {
    for (x, y) in src.as_chunks::<QK_K>().0.iter().zip(dst.iter_mut()) {
        let mut amax = 0.0f32;
        let mut max = 0.0f32;
        for &v in x {
            if v.abs() > amax {
                amax = v.abs();
                max = v;
            }
        }
        if amax == 0.0 {
            *y = bytemuck::Zeroable::zeroed();
            continue;
        }
        let iscale = -127.0 / max;
        let mut qs = [0i8; QK_K];
        for (q, &v) in qs.iter_mut().zip(x) {
            *q = nearest_int(iscale * v).min(127) as i8;
        }
        let mut bsums = [0i16; QK_K / 16];
        for (s, g) in bsums.iter_mut().zip(qs.as_chunks::<16>().0.iter()) {
            *s = g.iter().map(|&q| q as i16).sum();
        }
        y.qs = qs;
        y.bsums = bsums;
        y.d = 1.0 / iscale;
    }
}

pub fn dequantize(src: &[BlockQ8K], dst: &mut [f32]) {
    for (b, y) in src.iter().zip(dst.as_chunks_mut::<QK_K>().0.iter_mut()) {
        let d = b.d;
        for (o, &q) in y.iter_mut().zip(&b.qs) {
            *o = d * q as f32;
        }
    }
}
