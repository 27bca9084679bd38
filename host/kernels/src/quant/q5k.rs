//! Q5_K quantize/dequantize (`quantize_row_q5_K_ref`, `dequantize_row_q5_K`): Q4_K's layout and
//! scale search with 5-bit levels.
//!
//! Layout: sub-block pair (2k, 2k+1) shares `qs[32k..32k+32]` (low nibbles for 2k, high for
//! 2k+1); bit 4 of element `l` of sub-block `j` is bit `j` of `qh[l]`.

use super::blocks::{BlockQ5K, scale_min_k4};
use super::q4k::scale_min_levels;
use super::round::f16_to_f32;
use super::search::Qkx2Search;
use crate::types::QK_K;

pub fn quantize(src: &[f32], dst: &mut [BlockQ5K]) {
    let search = Qkx2Search {
        rmin: -0.5,
        rdelta: 0.1,
        nstep: 15,
        use_mad: false,
    };
    for (x, y) in src.as_chunks::<QK_K>().0.iter().zip(dst.iter_mut()) {
        let (scales, d, dmin, levels) = scale_min_levels(x, 31, &search);
        y.scales = scales;
        y.d = d;
        y.dmin = dmin;
        let mut qs = [0u8; QK_K / 2];
        let mut qh = [0u8; QK_K / 8];
        for k in 0..4 {
            for l in 0..32 {
                let (l1, l2) = (levels[64 * k + l], levels[64 * k + l + 32]);
                qh[l] |= ((l1 >> 4) << (2 * k)) | ((l2 >> 4) << (2 * k + 1));
                qs[32 * k + l] = (l1 & 0xF) | ((l2 & 0xF) << 4);
            }
        }
        y.qs = qs;
        y.qh = qh;
    }
}

/// The 256 levels (0..31) of a block in element order.
#[inline(always)]
pub fn unpack(b: &BlockQ5K) -> [u8; QK_K] {
    let mut a = [0u8; QK_K];
    for k in 0..4 {
        for l in 0..32 {
            let (q, h) = (b.qs[32 * k + l], b.qh[l]);
            a[64 * k + l] = (q & 0xF) | (((h >> (2 * k)) & 1) << 4);
            a[64 * k + l + 32] = (q >> 4) | (((h >> (2 * k + 1)) & 1) << 4);
        }
    }
    a
}

pub fn dequantize(src: &[BlockQ5K], dst: &mut [f32]) {
    for (b, y) in src.iter().zip(dst.as_chunks_mut::<QK_K>().0.iter_mut()) {
        let d = f16_to_f32(b.d);
        let min = f16_to_f32(b.dmin);
        let scales = b.scales;
        let q = unpack(b);
        for j in 0..8 {
            let (sc, m) = scale_min_k4(j, &scales);
            let (d1, m1) = (d * sc as f32, min * m as f32);
            for l in 0..32 {
                y[32 * j + l] = d1 * q[32 * j + l] as f32 - m1;
            }
        }
    }
}
