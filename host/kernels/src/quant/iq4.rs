//! IQ4_NL / IQ4_XS quantize/dequantize (`quantize_row_iq4_nl_ref`, `quantize_row_iq4_xs_ref`,
//! both `quantize_row_iq4_nl_impl` without importance weights; `dequantize_row_iq4_*`).
//!
//! Both store 4-bit indices into the fixed non-linear table [`KVALUES_IQ4NL`]; IQ4_NL has one
//! f16 scale per 32 elements, IQ4_XS one f16 per 256 and a 6-bit scale per 32.
//! Invariant: like ggml, IQ4_NL's reference keeps the previous block's indices for an all-zero
//! block (its scale is 0, so the values are 0 either way); the first block starts from zeros.

use super::blocks::{BlockIq4Nl, BlockIq4Xs};
use super::round::{f16_to_f32, f32_to_f16, nearest_int};
use super::search::GROUP_MAX_EPS;
use crate::types::{QK_K, QK32};

/// `kvalues_iq4nl`: the 16 levels of IQ4_NL / IQ4_XS.
pub const KVALUES_IQ4NL: [i8; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];

/// `best_index_int8`: the index of the table value nearest `x` (ties to the upper one).
fn best_index(x: f32) -> u8 {
    let val = |i: usize| KVALUES_IQ4NL[i] as f32;
    if x <= val(0) {
        return 0;
    }
    if x >= val(15) {
        return 15;
    }
    let (mut ml, mut mu) = (0usize, 15usize);
    while mu - ml > 1 {
        let mav = (ml + mu) / 2;
        if x < val(mav) {
            mu = mav;
        } else {
            ml = mav;
        }
    }
    if x - val(mu - 1) < val(mu) - x {
        (mu - 1) as u8
    } else {
        mu as u8
    }
}

/// The scale of one 32-element block (weights `x²`): start from the value of largest magnitude
/// (`d = ±max / 127`), refine with the weighted least-squares scale, then try the `2 ntry + 1`
/// inverse scales `(t - 127) / max`. `None` for an all-zero block; indices go to `l`.
fn block_scale(x: &[f32], l: &mut [u8], ntry: i32) -> Option<f32> {
    let mut amax = 0.0f32;
    let mut max = 0.0f32;
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    if amax < GROUP_MAX_EPS {
        return None;
    }
    let v0 = KVALUES_IQ4NL[0] as f32;
    let mut d = if ntry > 0 { -max / v0 } else { max / v0 };
    let id = 1.0 / d;
    let (mut sumqx, mut sumq2) = (0.0f32, 0.0f32);
    for (j, &v) in x.iter().enumerate() {
        let li = best_index(id * v);
        l[j] = li;
        let q = KVALUES_IQ4NL[li as usize] as f32;
        let w = v * v;
        sumqx += w * q * v;
        sumq2 += w * q * q;
    }
    d = sumqx / sumq2;
    let mut best = d * sumqx;
    for itry in -ntry..=ntry {
        let id = (itry + KVALUES_IQ4NL[0] as i32) as f32 / max;
        let (mut sumqx, mut sumq2) = (0.0f32, 0.0f32);
        for &v in x {
            let q = KVALUES_IQ4NL[best_index(id * v) as usize] as f32;
            let w = v * v;
            sumqx += w * q * v;
            sumq2 += w * q * q;
        }
        if sumq2 > 0.0 && sumqx * sumqx > best * sumq2 {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    Some(d)
}

/// Packs 32 indices per 16 bytes: element j (< 16) low nibble of byte j, j + 16 high nibble.
fn pack(l: &[u8], q: &mut [u8]) {
    for (qb, lb) in q
        .as_chunks_mut::<16>()
        .0
        .iter_mut()
        .zip(l.as_chunks::<32>().0)
    {
        for j in 0..16 {
            qb[j] = lb[j] | (lb[j + 16] << 4);
        }
    }
}

pub fn quantize_nl(src: &[f32], dst: &mut [BlockIq4Nl]) {
    let mut l = [0u8; QK32];
    for (x, y) in src.as_chunks::<QK32>().0.iter().zip(dst.iter_mut()) {
        let scale = block_scale(x, &mut l, -1).unwrap_or(0.0);
        y.d = f32_to_f16(scale);
        pack(&l, &mut y.qs);
    }
}

pub fn quantize_xs(src: &[f32], dst: &mut [BlockIq4Xs]) {
    for (x, y) in src.as_chunks::<QK_K>().0.iter().zip(dst.iter_mut()) {
        let mut l = [0u8; QK_K];
        let mut scales = [0.0f32; QK_K / 32];
        let (mut max_scale, mut amax_scale) = (0.0f32, 0.0f32);
        for ib in 0..QK_K / 32 {
            let r = 32 * ib..32 * ib + 32;
            let Some(d) = block_scale(&x[r.clone()], &mut l[r], 7) else {
                continue;
            };
            scales[ib] = d;
            if d.abs() > amax_scale {
                amax_scale = d.abs();
                max_scale = d;
            }
        }
        let d = -max_scale / 32.0;
        y.d = f32_to_f16(d);
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        let (mut scales_h, mut scales_l) = (0u16, [0u8; QK_K / 64]);
        for ib in 0..QK_K / 32 {
            let ls = nearest_int(id * scales[ib]).clamp(-32, 31);
            let dl = d * ls as f32;
            let idl = if dl != 0.0 { 1.0 / dl } else { 0.0 };
            for j in 32 * ib..32 * ib + 32 {
                l[j] = best_index(idl * x[j]);
            }
            let ls = (ls + 32) as u8;
            scales_l[ib / 2] |= (ls & 0xF) << (4 * (ib % 2));
            scales_h |= ((ls >> 4) as u16) << (2 * ib);
        }
        y.scales_h = scales_h;
        y.scales_l = scales_l;
        let mut qs = [0u8; QK_K / 2];
        pack(&l, &mut qs);
        y.qs = qs;
    }
}

/// Sub-block `ib`'s signed scale (6 bits, offset removed) of an IQ4_XS block.
#[inline(always)]
pub fn xs_scale(scales_h: u16, scales_l: &[u8; 4], ib: usize) -> i32 {
    let lo = (scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF;
    let hi = ((scales_h >> (2 * ib)) & 3) as u8;
    (lo | (hi << 4)) as i32 - 32
}

pub fn dequantize_nl(src: &[BlockIq4Nl], dst: &mut [f32]) {
    for (b, y) in src.iter().zip(dst.as_chunks_mut::<QK32>().0.iter_mut()) {
        let d = f16_to_f32(b.d);
        for j in 0..16 {
            y[j] = d * KVALUES_IQ4NL[(b.qs[j] & 0xF) as usize] as f32;
            y[j + 16] = d * KVALUES_IQ4NL[(b.qs[j] >> 4) as usize] as f32;
        }
    }
}

pub fn dequantize_xs(src: &[BlockIq4Xs], dst: &mut [f32]) {
    for (b, y) in src.iter().zip(dst.as_chunks_mut::<QK_K>().0.iter_mut()) {
        let d = f16_to_f32(b.d);
        let (h, sl) = (b.scales_h, b.scales_l);
        for ib in 0..QK_K / 32 {
            let dl = d * xs_scale(h, &sl, ib) as f32;
            let (qs, out) = (&b.qs[16 * ib..16 * ib + 16], &mut y[32 * ib..32 * ib + 32]);
            for j in 0..16 {
                out[j] = dl * KVALUES_IQ4NL[(qs[j] & 0xF) as usize] as f32;
                out[j + 16] = dl * KVALUES_IQ4NL[(qs[j] >> 4) as usize] as f32;
            }
        }
    }
}
