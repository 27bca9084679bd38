//! Scalar reference dot products, the same formulas as ggml's generic C
//! (`ggml_vec_dot_*_generic`): integer sums per block, then one float scale per block.
//!
//! Invariant: these are the ground truth the SIMD kernels are tested against; integer parts are
//! exact, float parts follow ggml's evaluation order (f32/f16/bf16 sums accumulate in f64 like
//! `ggml_float`).

use half::{bf16, f16};

use crate::quant::{
    BlockIq4Nl, BlockIq4Xs, BlockMxfp4, BlockQ2K, BlockQ3K, BlockQ4_0, BlockQ4_1, BlockQ4K,
    BlockQ5_0, BlockQ5_1, BlockQ5K, BlockQ6K, BlockQ8_0, BlockQ8_1, BlockQ8K, KVALUES_IQ4NL,
    KVALUES_MXFP4, bf16_to_f32, e8m0_to_f32_half, q3k_scales, scale_min_k4, unpack_q2k, unpack_q3k,
    unpack_q5k, unpack_q6k, unpack5, xs_scale,
};
use crate::types::QK_K;

/// `ggml_vec_dot_f32`: products in f32, sum in f64.
pub fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
    let mut sum = 0.0f64;
    for (x, y) in a.iter().zip(b) {
        sum += (x * y) as f64;
    }
    sum as f32
}

/// `ggml_vec_dot_f16`: products of the f32 values in f32, sum in f64.
pub fn dot_f16(a: &[f16], b: &[f16]) -> f32 {
    let mut sum = 0.0f64;
    for (x, y) in a.iter().zip(b) {
        sum += (x.to_f32() * y.to_f32()) as f64;
    }
    sum as f32
}

/// `ggml_vec_dot_bf16`: products in f32, sum in f64.
pub fn dot_bf16(a: &[bf16], b: &[bf16]) -> f32 {
    let mut sum = 0.0f64;
    for (x, y) in a.iter().zip(b) {
        sum += (bf16_to_f32(*x) * bf16_to_f32(*y)) as f64;
    }
    sum as f32
}

/// `ggml_vec_dot_q4_0_q8_0`.
pub fn dot_q4_0_q8_0(x: &[BlockQ4_0], y: &[BlockQ8_0]) -> f32 {
    let mut sumf = 0.0f32;
    for (bx, by) in x.iter().zip(y) {
        let (mut sumi0, mut sumi1) = (0i32, 0i32);
        for j in 0..16 {
            let v0 = (bx.qs[j] & 0xF) as i32 - 8;
            let v1 = (bx.qs[j] >> 4) as i32 - 8;
            sumi0 += v0 * by.qs[j] as i32;
            sumi1 += v1 * by.qs[j + 16] as i32;
        }
        let sumi = sumi0 + sumi1;
        sumf += sumi as f32 * bx.d.to_f32() * by.d.to_f32();
    }
    sumf
}

/// `ggml_vec_dot_q4_1_q8_1`: the weights' min enters through the activations' `s = d * Σq`.
pub fn dot_q4_1_q8_1(x: &[BlockQ4_1], y: &[BlockQ8_1]) -> f32 {
    let mut sumf = 0.0f32;
    for (bx, by) in x.iter().zip(y) {
        let (mut sumi0, mut sumi1) = (0i32, 0i32);
        for j in 0..16 {
            let v0 = (bx.qs[j] & 0xF) as i32;
            let v1 = (bx.qs[j] >> 4) as i32;
            sumi0 += v0 * by.qs[j] as i32;
            sumi1 += v1 * by.qs[j + 16] as i32;
        }
        let sumi = sumi0 + sumi1;
        let dd = bx.d.to_f32() * by.d.to_f32();
        sumf += dd * sumi as f32 + bx.m.to_f32() * by.s.to_f32();
    }
    sumf
}

/// `ggml_vec_dot_q5_0_q8_0`.
pub fn dot_q5_0_q8_0(x: &[BlockQ5_0], y: &[BlockQ8_0]) -> f32 {
    let mut sumf = 0.0f32;
    for (bx, by) in x.iter().zip(y) {
        let l = unpack5(&bx.qs, bx.qh);
        let (mut sumi0, mut sumi1) = (0i32, 0i32);
        for j in 0..16 {
            sumi0 += (l[j] as i32 - 16) * by.qs[j] as i32;
            sumi1 += (l[j + 16] as i32 - 16) * by.qs[j + 16] as i32;
        }
        let sumi = sumi0 + sumi1;
        sumf += (bx.d.to_f32() * by.d.to_f32()) * sumi as f32;
    }
    sumf
}

/// `ggml_vec_dot_q5_1_q8_1`: the weights' min enters through the activations' `s = d * Σq`.
pub fn dot_q5_1_q8_1(x: &[BlockQ5_1], y: &[BlockQ8_1]) -> f32 {
    let mut sumf = 0.0f32;
    for (bx, by) in x.iter().zip(y) {
        let l = unpack5(&bx.qs, bx.qh);
        let (mut sumi0, mut sumi1) = (0i32, 0i32);
        for j in 0..16 {
            sumi0 += l[j] as i32 * by.qs[j] as i32;
            sumi1 += l[j + 16] as i32 * by.qs[j + 16] as i32;
        }
        let sumi = sumi0 + sumi1;
        let dd = bx.d.to_f32() * by.d.to_f32();
        sumf += dd * sumi as f32 + bx.m.to_f32() * by.s.to_f32();
    }
    sumf
}

/// `ggml_vec_dot_iq4_nl_q8_0`.
pub fn dot_iq4nl_q8_0(x: &[BlockIq4Nl], y: &[BlockQ8_0]) -> f32 {
    let mut sumf = 0.0f32;
    for (bx, by) in x.iter().zip(y) {
        let d = by.d.to_f32() * bx.d.to_f32();
        let (mut sumi1, mut sumi2) = (0i32, 0i32);
        for j in 0..16 {
            sumi1 += by.qs[j] as i32 * KVALUES_IQ4NL[(bx.qs[j] & 0xF) as usize] as i32;
            sumi2 += by.qs[j + 16] as i32 * KVALUES_IQ4NL[(bx.qs[j] >> 4) as usize] as i32;
        }
        sumf += d * (sumi1 + sumi2) as f32;
    }
    sumf
}

/// `ggml_vec_dot_mxfp4_q8_0`: IQ4_NL's formula with the E8M0 scale (`f16(dy) · 2^(e - 128)`)
/// and the doubled E2M1 table.
pub fn dot_mxfp4_q8_0(x: &[BlockMxfp4], y: &[BlockQ8_0]) -> f32 {
    let mut sumf = 0.0f32;
    for (bx, by) in x.iter().zip(y) {
        let d = by.d.to_f32() * e8m0_to_f32_half(bx.e);
        let (mut sumi1, mut sumi2) = (0i32, 0i32);
        for j in 0..16 {
            sumi1 += by.qs[j] as i32 * KVALUES_MXFP4[(bx.qs[j] & 0xF) as usize] as i32;
            sumi2 += by.qs[j + 16] as i32 * KVALUES_MXFP4[(bx.qs[j] >> 4) as usize] as i32;
        }
        sumf += d * (sumi1 + sumi2) as f32;
    }
    sumf
}

/// `ggml_vec_dot_iq4_xs_q8_K`: one float product per sub-block of 32.
pub fn dot_iq4xs_q8k(x: &[BlockIq4Xs], y: &[BlockQ8K]) -> f32 {
    let mut sumf = 0.0f32;
    for (bx, by) in x.iter().zip(y) {
        let d4d8 = bx.d.to_f32() * by.d;
        let (h, sl) = (bx.scales_h, bx.scales_l);
        for ib in 0..QK_K / 32 {
            let dl = d4d8 * xs_scale(h, &sl, ib) as f32;
            let (qs, q8) = (&bx.qs[16 * ib..16 * ib + 16], &by.qs[32 * ib..32 * ib + 32]);
            let (mut sumi1, mut sumi2) = (0i32, 0i32);
            for j in 0..16 {
                sumi1 += q8[j] as i32 * KVALUES_IQ4NL[(qs[j] & 0xF) as usize] as i32;
                sumi2 += q8[j + 16] as i32 * KVALUES_IQ4NL[(qs[j] >> 4) as usize] as i32;
            }
            sumf += dl * (sumi1 + sumi2) as f32;
        }
    }
    sumf
}

/// Q8_1 · Q8_1 (no ggml kernel: Q8_1 is only an activation type; defined for completeness like
/// Q8_K · Q8_K): Q8_0's formula, `s` unused.
pub fn dot_q8_1_q8_1(x: &[BlockQ8_1], y: &[BlockQ8_1]) -> f32 {
    let mut sumf = 0.0f32;
    for (bx, by) in x.iter().zip(y) {
        let sumi: i32 = bx
            .qs
            .iter()
            .zip(&by.qs)
            .map(|(&a, &b)| a as i32 * b as i32)
            .sum();
        sumf += sumi as f32 * (bx.d.to_f32() * by.d.to_f32());
    }
    sumf
}

/// `ggml_vec_dot_q8_0_q8_0`.
pub fn dot_q8_0_q8_0(x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
    let mut sumf = 0.0f32;
    for (bx, by) in x.iter().zip(y) {
        let sumi: i32 = bx
            .qs
            .iter()
            .zip(&by.qs)
            .map(|(&a, &b)| a as i32 * b as i32)
            .sum();
        sumf += sumi as f32 * (bx.d.to_f32() * by.d.to_f32());
    }
    sumf
}

/// `ggml_vec_dot_q4_K_q8_K`: 8 lane accumulators (element index mod 8), summed at the end.
pub fn dot_q4k_q8k(x: &[BlockQ4K], y: &[BlockQ8K]) -> f32 {
    let mut sums = [0.0f32; 8];
    let mut sumf = 0.0f32;
    for (bx, by) in x.iter().zip(y) {
        let mut aux8 = [0i8; QK_K];
        for k in 0..4 {
            for l in 0..32 {
                aux8[64 * k + l] = (bx.qs[32 * k + l] & 0xF) as i8;
                aux8[64 * k + l + 32] = (bx.qs[32 * k + l] >> 4) as i8;
            }
        }
        let (d, dmin) = (bx.d.to_f32(), bx.dmin.to_f32());
        scale_min_dot(&aux8, &bx.scales, d, dmin, by, &mut sums, &mut sumf);
    }
    for s in sums {
        sumf += s;
    }
    sumf
}

/// `ggml_vec_dot_q5_K_q8_K`: Q4_K's formula on 5-bit levels.
pub fn dot_q5k_q8k(x: &[BlockQ5K], y: &[BlockQ8K]) -> f32 {
    let mut sums = [0.0f32; 8];
    let mut sumf = 0.0f32;
    for (bx, by) in x.iter().zip(y) {
        let aux8 = unpack_q5k(bx).map(|v| v as i8);
        let (d, dmin) = (bx.d.to_f32(), bx.dmin.to_f32());
        scale_min_dot(&aux8, &bx.scales, d, dmin, by, &mut sums, &mut sumf);
    }
    for s in sums {
        sumf += s;
    }
    sumf
}

/// One super-block of the Q4_K / Q5_K generic dot: mins through `bsums`, scaled int16 products
/// into 8 lanes, then `sums[l] += d * lane`, `sumf -= dmin * Σ min * bsum`.
fn scale_min_dot(
    aux8: &[i8; QK_K],
    scales: &[u8; 12],
    d: f32,
    dmin: f32,
    by: &BlockQ8K,
    sums: &mut [f32; 8],
    sumf: &mut f32,
) {
    let bsums = by.bsums;
    let mut sumi = 0i32;
    for j in 0..QK_K / 16 {
        sumi += bsums[j] as i32 * scale_min_k4(j / 2, scales).1 as i32;
    }
    let mut aux32 = [0i32; 8];
    for j in 0..QK_K / 32 {
        let scale = scale_min_k4(j, scales).0 as i32;
        for g in 0..4 {
            let base = 32 * j + 8 * g;
            for l in 0..8 {
                let p = by.qs[base + l] as i16 * aux8[base + l] as i16;
                aux32[l] += scale * p as i32;
            }
        }
    }
    let by_d = by.d;
    let d = d * by_d;
    for l in 0..8 {
        sums[l] += d * aux32[l] as f32;
    }
    *sumf -= (dmin * by_d) * sumi as f32;
}

/// `ggml_vec_dot_q2_K_q8_K`: one integer sum per super-block, mins through `bsums`.
pub fn dot_q2k_q8k(x: &[BlockQ2K], y: &[BlockQ8K]) -> f32 {
    let mut sumf = 0.0f32;
    for (bx, by) in x.iter().zip(y) {
        let q = unpack_q2k(bx);
        let bsums = by.bsums;
        let mut summs = 0i32;
        for j in 0..16 {
            summs += bsums[j] as i32 * (bx.scales[j] >> 4) as i32;
        }
        let by_d = by.d;
        let dall = by_d * bx.d.to_f32();
        let dmin = by_d * bx.dmin.to_f32();
        let mut isum = 0i32;
        for j in 0..16 {
            let d = (bx.scales[j] & 0xF) as i32;
            let isuml: i32 = (16 * j..16 * j + 16)
                .map(|e| by.qs[e] as i32 * q[e] as i32)
                .sum();
            isum += d * isuml;
        }
        sumf += dall * isum as f32 - dmin * summs as f32;
    }
    sumf
}

/// `ggml_vec_dot_q3_K_q8_K`: 8 lane accumulators (element index mod 8), summed at the end.
pub fn dot_q3k_q8k(x: &[BlockQ3K], y: &[BlockQ8K]) -> f32 {
    let mut sums = [0.0f32; 8];
    for (bx, by) in x.iter().zip(y) {
        let aux8 = unpack_q3k(bx);
        let scales = q3k_scales(bx);
        let mut aux32 = [0i32; 8];
        for j in 0..QK_K / 16 {
            let scale = scales[j] as i32;
            for g in 0..2 {
                let base = 16 * j + 8 * g;
                for l in 0..8 {
                    let p = by.qs[base + l] as i16 * aux8[base + l] as i16;
                    aux32[l] += scale * p as i32;
                }
            }
        }
        let d = bx.d.to_f32() * by.d;
        for l in 0..8 {
            sums[l] += d * aux32[l] as f32;
        }
    }
    let mut sumf = 0.0f32;
    for s in sums {
        sumf += s;
    }
    sumf
}

/// `ggml_vec_dot_q6_K_q8_K`: 8 lane accumulators (element index mod 8), summed at the end.
pub fn dot_q6k_q8k(x: &[BlockQ6K], y: &[BlockQ8K]) -> f32 {
    let mut sums = [0.0f32; 8];
    for (bx, by) in x.iter().zip(y) {
        let aux8 = unpack_q6k(bx);
        let mut aux32 = [0i32; 8];
        for j in 0..QK_K / 16 {
            let scale = bx.scales[j] as i32;
            for g in 0..2 {
                let base = 16 * j + 8 * g;
                for l in 0..8 {
                    let p = by.qs[base + l] as i16 * aux8[base + l] as i16;
                    aux32[l] += scale * p as i32;
                }
            }
        }
        let d = bx.d.to_f32() * by.d;
        for l in 0..8 {
            sums[l] += d * aux32[l] as f32;
        }
    }
    let mut sumf = 0.0f32;
    for s in sums {
        sumf += s;
    }
    sumf
}

/// Q8_K · Q8_K (not in ggml's CPU backend; defined for completeness): exact integer sum per
/// super-block, scaled by the product of the two scales.
pub fn dot_q8k_q8k(x: &[BlockQ8K], y: &[BlockQ8K]) -> f32 {
    let mut sumf = 0.0f32;
    for (bx, by) in x.iter().zip(y) {
        let sumi: i32 = bx
            .qs
            .iter()
            .zip(&by.qs)
            .map(|(&a, &b)| a as i32 * b as i32)
            .sum();
        let (dx, dy) = (bx.d, by.d);
        sumf += sumi as f32 * (dx * dy);
    }
    sumf
}
