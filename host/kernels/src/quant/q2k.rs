//! Q2_K quantize/dequantize (`quantize_row_q2_K_ref` with `make_qkx2_quants`,
//! `dequantize_row_q2_K`).
//!
//! Layout (see [`BlockQ2K`]): 16 sub-blocks of 16 elements, each with a 4-bit scale and min,
//! levels 0..3 packed four to a byte like Q3_K's low bits.

use super::blocks::BlockQ2K;
use super::round::{f16_to_f32, f32_to_f16, nearest_int};
use super::search::{Qkx2Search, make_qkx2_quants};
use crate::types::QK_K;

pub fn quantize(src: &[f32], dst: &mut [BlockQ2K]) {
    let search = Qkx2Search {
        rmin: -0.5,
        rdelta: 0.1,
        nstep: 15,
        use_mad: true,
    };
    for (x, y) in src.as_chunks::<QK_K>().0.iter().zip(dst.iter_mut()) {
        let mut levels = [0u8; QK_K];
        let mut scales = [0.0f32; QK_K / 16];
        let mut mins = [0.0f32; QK_K / 16];
        let mut max_scale = 0.0f32;
        let mut max_min = 0.0f32;
        for j in 0..QK_K / 16 {
            let xs = &x[16 * j..16 * j + 16];
            let mut weights = [0.0f32; 16];
            for (w, v) in weights.iter_mut().zip(xs) {
                *w = v.abs();
            }
            let (s, m) = make_qkx2_quants(3, xs, &weights, &mut levels[16 * j..], &search);
            scales[j] = s;
            mins[j] = m;
            if s > max_scale {
                max_scale = s;
            }
            if m > max_min {
                max_min = m;
            }
        }
        let mut sc = [0u8; QK_K / 16];
        if max_scale > 0.0 {
            let iscale = 15.0 / max_scale;
            for j in 0..QK_K / 16 {
                sc[j] = nearest_int(iscale * scales[j]) as u8;
            }
            y.d = f32_to_f16(max_scale / 15.0);
        } else {
            y.d = f32_to_f16(0.0);
        }
        if max_min > 0.0 {
            let iscale = 15.0 / max_min;
            for j in 0..QK_K / 16 {
                sc[j] |= (nearest_int(iscale * mins[j]) as u8) << 4;
            }
            y.dmin = f32_to_f16(max_min / 15.0);
        } else {
            y.dmin = f32_to_f16(0.0);
        }
        y.scales = sc;
        let (d_all, dmin_all) = (f16_to_f32(y.d), f16_to_f32(y.dmin));
        for j in 0..QK_K / 16 {
            let d = d_all * (sc[j] & 0xF) as f32;
            if d == 0.0 {
                continue;
            }
            let dm = dmin_all * (sc[j] >> 4) as f32;
            for ii in 0..16 {
                let l = nearest_int((x[16 * j + ii] + dm) / d);
                levels[16 * j + ii] = l.clamp(0, 3) as u8;
            }
        }
        let mut qs = [0u8; QK_K / 4];
        for h in 0..2 {
            let lv = &levels[128 * h..128 * h + 128];
            for l in 0..32 {
                qs[32 * h + l] = lv[l] | (lv[l + 32] << 2) | (lv[l + 64] << 4) | (lv[l + 96] << 6);
            }
        }
        y.qs = qs;
    }
}

/// The 256 levels (0..3) of a block in element order.
#[inline(always)]
pub fn unpack(b: &BlockQ2K) -> [u8; QK_K] {
    let mut a = [0u8; QK_K];
    for h in 0..2 {
        for j in 0..4 {
            for l in 0..32 {
                a[128 * h + 32 * j + l] = (b.qs[32 * h + l] >> (2 * j)) & 3;
            }
        }
    }
    a
}

pub fn dequantize(src: &[BlockQ2K], dst: &mut [f32]) {
    for (b, y) in src.iter().zip(dst.as_chunks_mut::<QK_K>().0.iter_mut()) {
        let d = f16_to_f32(b.d);
        let min = f16_to_f32(b.dmin);
        let q = unpack(b);
        for (i, (o, &v)) in y.iter_mut().zip(&q).enumerate() {
            let sc = b.scales[i / 16];
            let (dl, ml) = (d * (sc & 0xF) as f32, min * (sc >> 4) as f32);
            *o = dl * v as f32 - ml;
        }
    }
}
