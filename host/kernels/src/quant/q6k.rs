//! Q6_K quantize/dequantize (`quantize_row_q6_K_ref` with `make_qx_quants`,
//! `dequantize_row_q6_K`).
//!
//! Layout per 128-element half: `ql[0..64]` holds low nibbles (elements l and l+64 in byte l,
//! l+32 and l+96 in byte l+32), `qh[0..32]` the 2-bit high parts of l, l+32, l+64, l+96.
//! Values are stored with an offset of 32; one signed scale per 16 elements.

use super::blocks::BlockQ6K;
use super::round::{f16_to_f32, f32_to_f16, nearest_int};
use super::search::{GROUP_MAX_EPS, make_qx_quants};
use crate::types::QK_K;

pub fn quantize(src: &[f32], dst: &mut [BlockQ6K]) {
    for (x, y) in src.as_chunks::<QK_K>().0.iter().zip(dst.iter_mut()) {
        let mut levels = [0i8; QK_K];
        let mut scales = [0.0f32; QK_K / 16];
        let mut max_scale = 0.0f32;
        let mut max_abs_scale = 0.0f32;
        for ib in 0..QK_K / 16 {
            let r = 16 * ib..16 * ib + 16;
            let scale = make_qx_quants(32, &x[r.clone()], &mut levels[r], 1);
            scales[ib] = scale;
            if scale.abs() > max_abs_scale {
                max_abs_scale = scale.abs();
                max_scale = scale;
            }
        }
        if max_abs_scale < GROUP_MAX_EPS {
            *y = bytemuck::Zeroable::zeroed();
            continue;
        }
        let iscale = -128.0 / max_scale;
        y.d = f32_to_f16(1.0 / iscale);
        let mut sc = [0i8; QK_K / 16];
        for (s, &v) in sc.iter_mut().zip(&scales) {
            *s = nearest_int(iscale * v).min(127) as i8;
        }
        y.scales = sc;
        let d_all = f16_to_f32(y.d);
        for j in 0..QK_K / 16 {
            let d = d_all * sc[j] as f32;
            if d == 0.0 {
                continue;
            }
            for ii in 0..16 {
                let l = nearest_int(x[16 * j + ii] / d).clamp(-32, 31);
                levels[16 * j + ii] = (l + 32) as i8;
            }
        }
        let mut ql = [0u8; QK_K / 2];
        let mut qh = [0u8; QK_K / 4];
        for half in 0..2 {
            let lv = &levels[128 * half..128 * half + 128];
            let ql = &mut ql[64 * half..64 * half + 64];
            let qh = &mut qh[32 * half..32 * half + 32];
            for l in 0..32 {
                let q = [
                    lv[l] as u8,
                    lv[l + 32] as u8,
                    lv[l + 64] as u8,
                    lv[l + 96] as u8,
                ];
                ql[l] = (q[0] & 0xF) | ((q[2] & 0xF) << 4);
                ql[l + 32] = (q[1] & 0xF) | ((q[3] & 0xF) << 4);
                qh[l] = (q[0] >> 4) | ((q[1] >> 4) << 2) | ((q[2] >> 4) << 4) | ((q[3] >> 4) << 6);
            }
        }
        y.ql = ql;
        y.qh = qh;
    }
}

/// Decodes the 256 signed 6-bit values of a block (offset removed) in element order.
#[inline(always)]
pub fn unpack(b: &BlockQ6K) -> [i8; QK_K] {
    let mut a = [0i8; QK_K];
    for half in 0..2 {
        let ql = &b.ql[64 * half..64 * half + 64];
        let qh = &b.qh[32 * half..32 * half + 32];
        let a = &mut a[128 * half..128 * half + 128];
        for l in 0..32 {
            a[l] = ((ql[l] & 0xF) | ((qh[l] & 3) << 4)) as i8 - 32;
            a[l + 32] = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) as i8 - 32;
            a[l + 64] = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i8 - 32;
            a[l + 96] = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i8 - 32;
        }
    }
    a
}

pub fn dequantize(src: &[BlockQ6K], dst: &mut [f32]) {
    for (b, y) in src.iter().zip(dst.as_chunks_mut::<QK_K>().0.iter_mut()) {
        let d = f16_to_f32(b.d);
        let q = unpack(b);
        for (i, (o, &v)) in y.iter_mut().zip(&q).enumerate() {
            *o = d * b.scales[i / 16] as f32 * v as f32;
        }
    }
}
