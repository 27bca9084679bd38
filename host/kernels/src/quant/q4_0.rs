//! Q4_0 quantize/dequantize (`quantize_row_q4_0_ref`, `dequantize_row_q4_0`).
//!
//! Invariant: `src.len() == blocks.len() * 32` (checked by the caller in `quant::mod`).

use super::blocks::BlockQ4_0;
use super::round::{f16_to_f32, f32_to_f16};
use crate::types::QK4_0;

pub fn quantize(src: &[f32], dst: &mut [BlockQ4_0]) {
    for (x, y) in src.as_chunks::<QK4_0>().0.iter().zip(dst.iter_mut()) {
        // The value of largest magnitude, with its sign.
        let mut amax = 0.0f32;
        let mut max = 0.0f32;
        for &v in x {
            if amax < v.abs() {
                amax = v.abs();
                max = v;
            }
        }
        let d = max / -8.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        y.d = f32_to_f16(d);
        for j in 0..QK4_0 / 2 {
            // C's `(int8_t)(x + 8.5f)` truncates toward zero; values are >= 0.5 here.
            let x0 = ((x[j] * id + 8.5) as i8).min(15) as u8;
            let x1 = ((x[j + QK4_0 / 2] * id + 8.5) as i8).min(15) as u8;
            y.qs[j] = x0 | (x1 << 4);
        }
    }
}

pub fn dequantize(src: &[BlockQ4_0], dst: &mut [f32]) {
    for (b, y) in src.iter().zip(dst.as_chunks_mut::<QK4_0>().0.iter_mut()) {
        let d = f16_to_f32(b.d);
        for j in 0..QK4_0 / 2 {
            let x0 = (b.qs[j] & 0xF) as i32 - 8;
            let x1 = (b.qs[j] >> 4) as i32 - 8;
            y[j] = x0 as f32 * d;
            y[j + QK4_0 / 2] = x1 as f32 * d;
        }
    }
}
