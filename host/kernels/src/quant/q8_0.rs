//! Q8_0 quantize/dequantize (`quantize_row_q8_0_ref`, `dequantize_row_q8_0`).
//!
//! Invariant: quantized values lie in [-127, 127] (never -128), which the SIMD dot products rely
//! on (`_mm256_sign_epi8` of -128 would wrap).

use super::blocks::BlockQ8_0;
use super::round::{f16_to_f32, f32_to_f16};
use crate::types::QK8_0;

pub fn quantize(src: &[f32], dst: &mut [BlockQ8_0]) {
    #[cfg(target_arch = "x86_64")]
    if let Some(v) = super::q8_vec::Block32::pick() {
        for (x, y) in src.as_chunks::<QK8_0>().0.iter().zip(dst.iter_mut()) {
            let d = v.amax(x) / 127.0;
            let id = if d != 0.0 { 1.0 / d } else { 0.0 };
            y.d = f32_to_f16(d);
            v.quantize(x, id, &mut y.qs);
        }
        return;
    }
    quantize_scalar(src, dst);
}

/// The scalar form of [`quantize`] (the reference the 512-bit and AVX2 paths must equal byte for byte).
pub(super) fn quantize_scalar(src: &[f32], dst: &mut [BlockQ8_0]) {
    for (x, y) in src.as_chunks::<QK8_0>().0.iter().zip(dst.iter_mut()) {
        let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let d = amax / 127.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        y.d = f32_to_f16(d);
        for (q, &v) in y.qs.iter_mut().zip(x) {
            // C `roundf`: half away from zero; held to [-127, 127] when `1 / d` overflowed
            // (C's conversion of an infinity is undefined).
            *q = (v * id).round().clamp(-127.0, 127.0) as i8;
        }
    }
}

pub fn dequantize(src: &[BlockQ8_0], dst: &mut [f32]) {
    for (b, y) in src.iter().zip(dst.as_chunks_mut::<QK8_0>().0.iter_mut()) {
        let d = f16_to_f32(b.d);
        for (o, &q) in y.iter_mut().zip(&b.qs) {
            *o = q as f32 * d;
        }
    }
}
