//! Q4_1 quantize/dequantize (`quantize_row_q4_1_ref`, `dequantize_row_q4_1`): 4-bit levels over
//! the block's [min, max] range, `x = d * level + m`.
//!
//! Invariant: `src.len() == blocks.len() * 32` (checked by the caller in `quant::mod`).

use super::blocks::BlockQ4_1;
use super::round::{f16_to_f32, f32_to_f16};
use crate::types::QK32;

/// The block's (min, max) with C comparisons, starting from (FLT_MAX, -FLT_MAX).
pub(super) fn min_max(x: &[f32]) -> (f32, f32) {
    let mut min = f32::MAX;
    let mut max = -f32::MAX;
    for &v in x {
        if v < min {
            min = v;
        }
        if v > max {
            max = v;
        }
    }
    (min, max)
}

pub fn quantize(src: &[f32], dst: &mut [BlockQ4_1]) {
    for (x, y) in src.as_chunks::<QK32>().0.iter().zip(dst.iter_mut()) {
        let (min, max) = min_max(x);
        let d = (max - min) / 15.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        y.d = f32_to_f16(d);
        y.m = f32_to_f16(min);
        for j in 0..QK32 / 2 {
            // C's `(int8_t)(x + 0.5f)` truncates toward zero; values are >= 0.5 here.
            let x0 = (((x[j] - min) * id + 0.5) as i8).min(15) as u8;
            let x1 = (((x[j + QK32 / 2] - min) * id + 0.5) as i8).min(15) as u8;
            y.qs[j] = x0 | (x1 << 4);
        }
    }
}

pub fn dequantize(src: &[BlockQ4_1], dst: &mut [f32]) {
    for (b, y) in src.iter().zip(dst.as_chunks_mut::<QK32>().0.iter_mut()) {
        let d = f16_to_f32(b.d);
        let m = f16_to_f32(b.m);
        for j in 0..QK32 / 2 {
            y[j] = (b.qs[j] & 0xF) as f32 * d + m;
            y[j + QK32 / 2] = (b.qs[j] >> 4) as f32 * d + m;
        }
    }
}
