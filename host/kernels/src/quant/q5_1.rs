//! Q5_1 quantize/dequantize (`quantize_row_q5_1_ref`, `dequantize_row_q5_1`): 5-bit levels over
//! the block's [min, max] range, `x = d * level + m`, bit 4 in `qh` as Q5_0.
//!
//! Invariant: `src.len() == blocks.len() * 32` (checked by the caller in `quant::mod`).

use super::blocks::BlockQ5_1;
use super::q4_1::min_max;
use super::q5_0::unpack5;
use super::round::{f16_to_f32, f32_to_f16};
use crate::types::QK32;

pub fn quantize(src: &[f32], dst: &mut [BlockQ5_1]) {
    for (x, y) in src.as_chunks::<QK32>().0.iter().zip(dst.iter_mut()) {
        let (min, max) = min_max(x);
        let d = (max - min) / 31.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        y.d = f32_to_f16(d);
        y.m = f32_to_f16(min);
        let mut qh = 0u32;
        for j in 0..QK32 / 2 {
            // C's `(uint8_t)(x + 0.5f)` truncates; values are in [0.5, 31.5] here (no clamp in
            // ggml either).
            let x0 = ((x[j] - min) * id + 0.5) as u8;
            let x1 = ((x[j + QK32 / 2] - min) * id + 0.5) as u8;
            y.qs[j] = (x0 & 0xF) | ((x1 & 0xF) << 4);
            qh |= ((x0 as u32 & 0x10) >> 4) << j;
            qh |= ((x1 as u32 & 0x10) >> 4) << (j + QK32 / 2);
        }
        y.qh = qh.to_le_bytes();
    }
}

pub fn dequantize(src: &[BlockQ5_1], dst: &mut [f32]) {
    for (b, y) in src.iter().zip(dst.as_chunks_mut::<QK32>().0.iter_mut()) {
        let d = f16_to_f32(b.d);
        let m = f16_to_f32(b.m);
        let l = unpack5(&b.qs, b.qh);
        for (o, &v) in y.iter_mut().zip(&l) {
            *o = v as f32 * d + m;
        }
    }
}
