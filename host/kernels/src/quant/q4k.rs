//! Q4_K quantize/dequantize (`quantize_row_q4_K_ref` with `make_qkx2_quants`,
//! `dequantize_row_q4_K`).
//!
//! Layout: 8 sub-blocks of 32; sub-block pair (2k, 2k+1) shares `qs[32k..32k+32]`, low nibbles for
//! 2k and high nibbles for 2k+1. Scales/mins are 6-bit, packed as `scale_min_k4` decodes them.

use half::f16;

use super::blocks::{BlockQ4K, scale_min_k4};
use super::round::{f16_to_f32, f32_to_f16, nearest_int};
use super::search::{Qkx2Search, make_qkx2_quants};
use crate::types::QK_K;

pub fn quantize(src: &[f32], dst: &mut [BlockQ4K]) {
    let search = Qkx2Search {
        rmin: -1.0,
        rdelta: 0.1,
        nstep: 20,
        use_mad: false,
    };
    for (x, y) in src.as_chunks::<QK_K>().0.iter().zip(dst.iter_mut()) {
        let (scales, d, dmin, levels) = scale_min_levels(x, 15, &search);
        y.scales = scales;
        y.d = d;
        y.dmin = dmin;
        let mut qs = [0u8; QK_K / 2];
        for (k, q) in qs.as_chunks_mut::<32>().0.iter_mut().enumerate() {
            let base = 64 * k;
            for l in 0..32 {
                q[l] = levels[base + l] | (levels[base + l + 32] << 4);
            }
        }
        y.qs = qs;
    }
}

/// The scale/min search shared by Q4_K and Q5_K (`nmax` 15 / 31): per sub-block of 32,
/// `make_qkx2_quants` with weights `sqrt(mean x²) + |x|`, the 6-bit scales and mins packed as
/// `scale_min_k4` decodes them, the f16 super-block scales, then the levels in `[0, nmax]`
/// recomputed from the quantized scales. Returns (scales, d, dmin, levels).
pub(super) fn scale_min_levels(
    x: &[f32; QK_K],
    nmax: i32,
    search: &Qkx2Search,
) -> ([u8; 12], f16, f16, [u8; QK_K]) {
    let mut levels = [0u8; QK_K];
    let mut scales = [0.0f32; 8];
    let mut mins = [0.0f32; 8];
    let mut max_scale = 0.0f32;
    let mut max_min = 0.0f32;
    for j in 0..8 {
        let xs = &x[32 * j..32 * j + 32];
        let sum_x2: f32 = xs.iter().fold(0.0, |s, v| s + v * v);
        let av_x = (sum_x2 / 32.0).sqrt();
        let mut weights = [0.0f32; 32];
        for (w, v) in weights.iter_mut().zip(xs) {
            *w = av_x + v.abs();
        }
        let (s, m) = make_qkx2_quants(nmax, xs, &weights, &mut levels[32 * j..], search);
        scales[j] = s;
        mins[j] = m;
        if s > max_scale {
            max_scale = s;
        }
        if m > max_min {
            max_min = m;
        }
    }
    let inv_scale = if max_scale > 0.0 {
        63.0 / max_scale
    } else {
        0.0
    };
    let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
    let mut packed = [0u8; 12];
    for j in 0..8 {
        // C stores into uint8_t before MIN(63, ..): wrap first, then clamp.
        let ls = (nearest_int(inv_scale * scales[j]) as u8).min(63);
        let lm = (nearest_int(inv_min * mins[j]) as u8).min(63);
        if j < 4 {
            packed[j] = ls;
            packed[j + 4] = lm;
        } else {
            packed[j + 4] = (ls & 0xF) | ((lm & 0xF) << 4);
            packed[j - 4] |= (ls >> 4) << 6;
            packed[j] |= (lm >> 4) << 6;
        }
    }
    let d = f32_to_f16(max_scale / 63.0);
    let dmin = f32_to_f16(max_min / 63.0);
    let (d_all, dmin_all) = (f16_to_f32(d), f16_to_f32(dmin));
    for j in 0..8 {
        let (sc, m) = scale_min_k4(j, &packed);
        let d = d_all * sc as f32;
        if d == 0.0 {
            continue;
        }
        let dm = dmin_all * m as f32;
        for ii in 0..32 {
            let l = nearest_int((x[32 * j + ii] + dm) / d);
            levels[32 * j + ii] = l.clamp(0, nmax) as u8;
        }
    }
    (packed, d, dmin, levels)
}

pub fn dequantize(src: &[BlockQ4K], dst: &mut [f32]) {
    for (b, y) in src.iter().zip(dst.as_chunks_mut::<QK_K>().0.iter_mut()) {
        let d = f16_to_f32(b.d);
        let min = f16_to_f32(b.dmin);
        let scales = b.scales;
        for k in 0..4 {
            let q = &b.qs[32 * k..32 * k + 32];
            let (sc1, m1) = scale_min_k4(2 * k, &scales);
            let (sc2, m2) = scale_min_k4(2 * k + 1, &scales);
            let (d1, m1) = (d * sc1 as f32, min * m1 as f32);
            let (d2, m2) = (d * sc2 as f32, min * m2 as f32);
            let out = &mut y[64 * k..64 * k + 64];
            for l in 0..32 {
                out[l] = d1 * (q[l] & 0xF) as f32 - m1;
                out[l + 32] = d2 * (q[l] >> 4) as f32 - m2;
            }
        }
    }
}
