//! Q5_0 quantize/dequantize (`quantize_row_q5_0_ref`, `dequantize_row_q5_0`): 5-bit levels with
//! an offset of 16, the scale fixed by the value of largest magnitude (`d = max / -16`).
//!
//! Invariant: `src.len() == blocks.len() * 32` (checked by the caller in `quant::mod`).

use super::blocks::BlockQ5_0;
use super::round::{f16_to_f32, f32_to_f16};
use crate::types::QK32;

pub fn quantize(src: &[f32], dst: &mut [BlockQ5_0]) {
    for (x, y) in src.as_chunks::<QK32>().0.iter().zip(dst.iter_mut()) {
        let mut amax = 0.0f32;
        let mut max = 0.0f32;
        for &v in x {
            if amax < v.abs() {
                amax = v.abs();
                max = v;
            }
        }
        let d = max / -16.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        y.d = f32_to_f16(d);
        let mut qh = 0u32;
        for j in 0..QK32 / 2 {
            // C's `(int8_t)(x + 16.5f)` truncates toward zero; values are >= 0.5 here.
            let x0 = ((x[j] * id + 16.5) as i8).min(31) as u8;
            let x1 = ((x[j + QK32 / 2] * id + 16.5) as i8).min(31) as u8;
            y.qs[j] = (x0 & 0xF) | ((x1 & 0xF) << 4);
            qh |= ((x0 as u32 & 0x10) >> 4) << j;
            qh |= ((x1 as u32 & 0x10) >> 4) << (j + QK32 / 2);
        }
        y.qh = qh.to_le_bytes();
    }
}

/// The 32 levels (0..31) of a Q5_0 / Q5_1 block in element order, offset not removed.
#[inline(always)]
pub fn unpack5(qs: &[u8; 16], qh: [u8; 4]) -> [u8; QK32] {
    let qh = u32::from_le_bytes(qh);
    let mut l = [0u8; QK32];
    for j in 0..QK32 / 2 {
        let h0 = ((qh >> j) << 4) as u8 & 0x10;
        let h1 = (qh >> (j + 12)) as u8 & 0x10;
        l[j] = (qs[j] & 0xF) | h0;
        l[j + QK32 / 2] = (qs[j] >> 4) | h1;
    }
    l
}

pub fn dequantize(src: &[BlockQ5_0], dst: &mut [f32]) {
    for (b, y) in src.iter().zip(dst.as_chunks_mut::<QK32>().0.iter_mut()) {
        let d = f16_to_f32(b.d);
        let l = unpack5(&b.qs, b.qh);
        for (o, &v) in y.iter_mut().zip(&l) {
            *o = (v as i32 - 16) as f32 * d;
        }
    }
}
