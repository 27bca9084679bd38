//! Q3_K quantize/dequantize (`quantize_row_q3_K_ref` with `make_q3_quants`,
//! `dequantize_row_q3_K`).
//!
//! Layout (see [`BlockQ3K`]): 16 sub-blocks of 16 with signed 6-bit scales (stored + 32: low
//! nibbles in `scales[0..8]`, high 2 bits in `scales[8..12]`), 3-bit values in [-4, 3].

use super::blocks::BlockQ3K;
use super::round::{f16_to_f32, f32_to_f16, nearest_int};
use super::search::make_q3_quants;
use crate::types::QK_K;

pub fn quantize(src: &[f32], dst: &mut [BlockQ3K]) {
    for (x, y) in src.as_chunks::<QK_K>().0.iter().zip(dst.iter_mut()) {
        let mut levels = [0i8; QK_K];
        let mut scales = [0.0f32; QK_K / 16];
        let mut max_scale = 0.0f32;
        let mut amax = 0.0f32;
        for j in 0..QK_K / 16 {
            let r = 16 * j..16 * j + 16;
            scales[j] = make_q3_quants(4, &x[r.clone()], &mut levels[r]);
            if scales[j].abs() > amax {
                amax = scales[j].abs();
                max_scale = scales[j];
            }
        }
        let mut packed = [0u8; 12];
        if max_scale != 0.0 {
            let iscale = -32.0 / max_scale;
            for j in 0..QK_K / 16 {
                // C stores nearest_int into an int8_t, then clamps and adds 32.
                let l = ((nearest_int(iscale * scales[j]) as i8).clamp(-32, 31) + 32) as u8;
                if j < 8 {
                    packed[j] = l & 0xF;
                } else {
                    packed[j - 8] |= (l & 0xF) << 4;
                }
                packed[j % 4 + 8] |= (l >> 4) << (2 * (j / 4));
            }
            y.d = f32_to_f16(1.0 / iscale);
        } else {
            y.d = f32_to_f16(0.0);
        }
        y.scales = packed;
        let d_all = f16_to_f32(y.d);
        let sc = scales_of(&packed);
        for j in 0..QK_K / 16 {
            let d = d_all * sc[j] as f32;
            if d == 0.0 {
                continue;
            }
            for ii in 0..16 {
                let l = nearest_int(x[16 * j + ii] / d).clamp(-4, 3);
                levels[16 * j + ii] = (l + 4) as i8;
            }
        }
        let mut hmask = [0u8; QK_K / 8];
        for (j, l) in levels.iter_mut().enumerate() {
            if *l > 3 {
                hmask[j % 32] |= 1 << (j / 32);
                *l -= 4;
            }
        }
        let mut qs = [0u8; QK_K / 4];
        for h in 0..2 {
            let lv = &levels[128 * h..128 * h + 128];
            for l in 0..32 {
                qs[32 * h + l] = lv[l] as u8
                    | (lv[l + 32] as u8) << 2
                    | (lv[l + 64] as u8) << 4
                    | (lv[l + 96] as u8) << 6;
            }
        }
        y.hmask = hmask;
        y.qs = qs;
    }
}

/// The 16 signed sub-block scales (6-bit, offset removed) of a packed `scales` field.
#[inline(always)]
pub fn scales_of(packed: &[u8; 12]) -> [i8; 16] {
    let mut s = [0i8; 16];
    for j in 0..16 {
        let lo = if j < 8 {
            packed[j] & 0xF
        } else {
            packed[j - 8] >> 4
        };
        let hi = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
        s[j] = (lo | (hi << 4)) as i8 - 32;
    }
    s
}

/// [`scales_of`] for a block.
#[inline(always)]
pub fn scales(b: &BlockQ3K) -> [i8; 16] {
    scales_of(&b.scales)
}

/// The 256 signed values (-4..3) of a block in element order.
#[inline(always)]
pub fn unpack(b: &BlockQ3K) -> [i8; QK_K] {
    let mut a = [0i8; QK_K];
    for h in 0..2 {
        for j in 0..4 {
            for l in 0..32 {
                let low = (b.qs[32 * h + l] >> (2 * j)) & 3;
                let high = (b.hmask[l] >> (4 * h + j)) & 1;
                a[128 * h + 32 * j + l] = low as i8 - if high == 0 { 4 } else { 0 };
            }
        }
    }
    a
}

pub fn dequantize(src: &[BlockQ3K], dst: &mut [f32]) {
    for (b, y) in src.iter().zip(dst.as_chunks_mut::<QK_K>().0.iter_mut()) {
        let d_all = f16_to_f32(b.d);
        let sc = scales(b);
        let q = unpack(b);
        for (i, (o, &v)) in y.iter_mut().zip(&q).enumerate() {
            *o = d_all * sc[i / 16] as f32 * v as f32;
        }
    }
}
