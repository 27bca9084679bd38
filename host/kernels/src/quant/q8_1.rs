//! Q8_1 quantize/dequantize (`quantize_row_q8_1_ref`): the activation format of Q4_1 / Q5_1
//! dots, Q8_0's values plus `s = d * Σqs` so the weights' min folds in with one product.
//!
//! Invariant: values lie in [-127, 127]; `s` is the f16 of `(Σqs) * d` with the f32 `d` (before
//! its own f16 rounding), exactly as llama.cpp stores it.

use super::blocks::BlockQ8_1;
use super::round::{f16_to_f32, f32_to_f16};
use crate::types::QK32;

pub fn quantize(src: &[f32], dst: &mut [BlockQ8_1]) {
    #[cfg(target_arch = "x86_64")]
    if let Some(v) = super::q8_vec::Block32::pick() {
        for (x, y) in src.as_chunks::<QK32>().0.iter().zip(dst.iter_mut()) {
            let d = v.amax(x) / 127.0;
            let id = if d != 0.0 { 1.0 / d } else { 0.0 };
            y.d = f32_to_f16(d);
            let sum = v.quantize(x, id, &mut y.qs);
            y.s = f32_to_f16(sum as f32 * d);
        }
        return;
    }
    quantize_scalar(src, dst);
}

/// The scalar form of [`quantize`] (the reference the 512-bit and AVX2 paths must equal byte for byte).
pub(super) fn quantize_scalar(src: &[f32], dst: &mut [BlockQ8_1]) {
    for (x, y) in src.as_chunks::<QK32>().0.iter().zip(dst.iter_mut()) {
        let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let d = amax / 127.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        y.d = f32_to_f16(d);
        let mut sum = 0i32;
        for (q, &v) in y.qs.iter_mut().zip(x) {
            // C `roundf`: half away from zero; held to [-127, 127] when `1 / d` overflowed
            // (C's conversion of an infinity is undefined).
            *q = (v * id).round().clamp(-127.0, 127.0) as i8;
            sum += *q as i32;
        }
        y.s = f32_to_f16(sum as f32 * d);
    }
}

pub fn dequantize(src: &[BlockQ8_1], dst: &mut [f32]) {
    for (b, y) in src.iter().zip(dst.as_chunks_mut::<QK32>().0.iter_mut()) {
        let d = f16_to_f32(b.d);
        for (o, &q) in y.iter_mut().zip(&b.qs) {
            *o = q as f32 * d;
        }
    }
}
