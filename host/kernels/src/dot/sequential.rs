//! Scalar reference of the interleaved kernels ([`crate::matmul::Interleaved`]): one float
//! accumulator per (row, token), fed block by block from block 0 with
//! `acc = fma(f32(Σ_int), dw · dx, acc)` (MXFP4's `dw` is its E8M0 scale `2^(e - 128)`), then
//! for Q4_1 and Q5_1 `acc = fma(m_w, s_x, acc)`. Q4_K and Q5_K (against Q8_K) take one step
//! pair per 256-element super-block: the exact integer sums `Σ_j sc_j · Σ_l u·x` and
//! `Σ_j m_j · Σ_l x` over its 8 sub-blocks, then `acc = fma(f32(sums), d · dx, acc)` and
//! `acc = fma(-f32(mins), dmin · dx, acc)`. Q6_K likewise with one step:
//! `acc = fma(f32(Σ_j sc_j · Σ_l q·x), d · dx, acc)` over its 16 sub-blocks; IQ4_XS and Q3_K
//! likewise over their 8 / 16 sub-blocks of signed values; Q2_K as Q4_K over its 16 sub-blocks
//! (4-bit scales and mins).
//!
//! Invariant: integer block sums are exact; the float sequence above is the one the AVX-512
//! interleaved kernels run lane by lane, so their results equal these bit for bit. It differs
//! from ggml's generic C ([`super::reference`]) only by rounding (fused steps per block).

use half::f16;

use crate::quant::{
    BlockQ6K, KVALUES_IQ4NL, KVALUES_MXFP4, e8m0_to_f32_half, scale_min_k4, unpack_q5k, unpack_q6k,
};
use crate::types::GgmlType;

fn f16_at(c: &[u8]) -> f32 {
    f16::from_le_bytes([c[0], c[1]]).to_f32()
}

/// Whether `ty` has a sequential-order kernel (and so an interleaved layout).
pub fn has_sequential(ty: GgmlType) -> bool {
    matches!(
        ty,
        GgmlType::Q4_0
            | GgmlType::Q8_0
            | GgmlType::Q5_0
            | GgmlType::Q4_1
            | GgmlType::Q5_1
            | GgmlType::IQ4NL
            | GgmlType::Mxfp4
            | GgmlType::Q4K
            | GgmlType::Q5K
            | GgmlType::Q6K
            | GgmlType::IQ4XS
            | GgmlType::Q3K
            | GgmlType::Q2K
    )
}

/// Element `i` (0..32) of one weight block of `ty` as a signed value (Q4_1, Q5_1: its unsigned
/// level).
fn value(ty: GgmlType, b: &[u8], i: usize) -> i32 {
    let nib = |qs: &[u8]| {
        if i < 16 {
            (qs[i] & 0xF) as i32
        } else {
            (qs[i - 16] >> 4) as i32
        }
    };
    match ty {
        GgmlType::Q4_0 => nib(&b[2..]) - 8,
        GgmlType::Q4_1 => nib(&b[4..]),
        GgmlType::IQ4NL => KVALUES_IQ4NL[nib(&b[2..]) as usize] as i32,
        GgmlType::Mxfp4 => KVALUES_MXFP4[nib(&b[1..]) as usize] as i32,
        GgmlType::Q5_0 => {
            let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
            nib(&b[6..]) + (((qh >> i) & 1) << 4) as i32 - 16
        }
        GgmlType::Q5_1 => {
            let qh = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
            nib(&b[8..]) + (((qh >> i) & 1) << 4) as i32
        }
        _ => b[2 + i] as i8 as i32,
    }
}

/// The scale of one 32-element weight block of `ty`: the f16 at its start, MXFP4's E8M0 byte.
fn block_scale(ty: GgmlType, b: &[u8]) -> f32 {
    if ty == GgmlType::Mxfp4 {
        e8m0_to_f32_half(b[0])
    } else {
        f16_at(b)
    }
}

/// Dot product of one weight row of `ty` (Q4_0, Q8_0, Q5_0, Q4_1, Q5_1, IQ4_NL, MXFP4, a K-quant
/// or IQ4_XS, GGML layout) with one activation row of its `vec_dot_type` (Q8_0; Q8_1 for Q4_1
/// and Q5_1, Q8_K for the K-quants and IQ4_XS), in the sequential order. Panics on another type
/// or on rows that are not whole rows of the same number of blocks.
pub fn vec_dot_sequential(ty: GgmlType, w: &[u8], x: &[u8]) -> f32 {
    assert!(
        has_sequential(ty),
        "vec_dot_sequential: {ty} has no sequential kernel"
    );
    match ty {
        GgmlType::Q4K => return q4k_sequential(w, x, 144, q4k_levels),
        GgmlType::Q5K => {
            return q4k_sequential(w, x, 176, |b| unpack_q5k(bytemuck::from_bytes(b)));
        }
        GgmlType::Q6K => return q6k_sequential(w, x),
        GgmlType::IQ4XS => return iq4xs_sequential(w, x),
        GgmlType::Q3K => return q3k_sequential(w, x),
        GgmlType::Q2K => return q2k_sequential(w, x),
        _ => {}
    }
    let wb = ty.row_bytes(32).expect("32-element blocks");
    let with_min = matches!(ty, GgmlType::Q4_1 | GgmlType::Q5_1);
    let (xb, xq) = if with_min { (36, 4) } else { (34, 2) };
    assert!(
        w.len().is_multiple_of(wb) && x.len() == w.len() / wb * xb,
        "vec_dot_sequential: rows of different lengths"
    );
    let mut acc = 0.0f32;
    for (bw, bx) in w.chunks_exact(wb).zip(x.chunks_exact(xb)) {
        let sumi: i32 = (0..32)
            .map(|i| value(ty, bw, i) * bx[xq + i] as i8 as i32)
            .sum();
        acc = (sumi as f32).mul_add(block_scale(ty, bw) * f16_at(bx), acc);
        if with_min {
            acc = f16_at(&bw[2..]).mul_add(f16_at(&bx[2..]), acc);
        }
    }
    acc
}

/// The 256 unsigned 4-bit levels of a Q4_K block, in element order.
fn q4k_levels(b: &[u8]) -> [u8; 256] {
    std::array::from_fn(|i| {
        let byte = b[16 + 32 * (i / 64) + i % 32];
        if (i / 32) % 2 == 0 {
            byte & 0xF
        } else {
            byte >> 4
        }
    })
}

/// [`vec_dot_sequential`] for Q4_K / Q5_K rows (`wb`-byte super-blocks whose unsigned levels
/// `levels` decodes) against Q8_K (292 bytes: f32 `d`, 256 values, 16 group sums; the sums are
/// not read, `Σ x` is taken from the values).
fn q4k_sequential(w: &[u8], x: &[u8], wb: usize, levels: impl Fn(&[u8]) -> [u8; 256]) -> f32 {
    assert!(
        w.len().is_multiple_of(wb) && x.len() == w.len() / wb * 292,
        "vec_dot_sequential: rows of different lengths"
    );
    let mut acc = 0.0f32;
    for (bw, bx) in w.chunks_exact(wb).zip(x.chunks_exact(292)) {
        let u = levels(bw);
        let dx = f32::from_le_bytes([bx[0], bx[1], bx[2], bx[3]]);
        let xs = &bx[4..260];
        let scales: &[u8; 12] = bw[4..16].try_into().expect("12 scale bytes");
        let (mut sums, mut mins) = (0i32, 0i32);
        for j in 0..8 {
            let (sc, m) = scale_min_k4(j, scales);
            let (mut dot, mut sx) = (0i32, 0i32);
            for l in 0..32 {
                let xv = xs[32 * j + l] as i8 as i32;
                dot += u[32 * j + l] as i32 * xv;
                sx += xv;
            }
            sums += sc as i32 * dot;
            mins += m as i32 * sx;
        }
        acc = (sums as f32).mul_add(f16_at(bw) * dx, acc);
        acc = (-(mins as f32)).mul_add(f16_at(&bw[2..]) * dx, acc);
    }
    acc
}

/// Σ of `v[i]·x[i]` over 16-element sub-block `j` of a Q8_K block's values `xs`.
fn sub16(v: &[i32; 256], xs: &[u8], j: usize) -> i32 {
    (16 * j..16 * j + 16)
        .map(|i| v[i] * xs[i] as i8 as i32)
        .sum()
}

/// [`vec_dot_sequential`] for Q3_K rows (110-byte super-blocks) against Q8_K.
fn q3k_sequential(w: &[u8], x: &[u8]) -> f32 {
    assert!(
        w.len().is_multiple_of(110) && x.len() == w.len() / 110 * 292,
        "vec_dot_sequential: rows of different lengths"
    );
    let mut acc = 0.0f32;
    for (bw, bx) in w.chunks_exact(110).zip(x.chunks_exact(292)) {
        let block: &crate::quant::BlockQ3K = bytemuck::from_bytes(bw);
        let v = crate::quant::unpack_q3k(block).map(i32::from);
        let dx = f32::from_le_bytes([bx[0], bx[1], bx[2], bx[3]]);
        let sums: i32 = crate::quant::q3k_scales(block)
            .iter()
            .enumerate()
            .map(|(j, &sc)| sc as i32 * sub16(&v, &bx[4..260], j))
            .sum();
        acc = (sums as f32).mul_add(f16_at(&bw[108..]) * dx, acc);
    }
    acc
}

/// [`vec_dot_sequential`] for Q2_K rows (84-byte super-blocks) against Q8_K.
fn q2k_sequential(w: &[u8], x: &[u8]) -> f32 {
    assert!(
        w.len().is_multiple_of(84) && x.len() == w.len() / 84 * 292,
        "vec_dot_sequential: rows of different lengths"
    );
    let ones = [1i32; 256];
    let mut acc = 0.0f32;
    for (bw, bx) in w.chunks_exact(84).zip(x.chunks_exact(292)) {
        let block: &crate::quant::BlockQ2K = bytemuck::from_bytes(bw);
        let v = crate::quant::unpack_q2k(block).map(i32::from);
        let dx = f32::from_le_bytes([bx[0], bx[1], bx[2], bx[3]]);
        let xs = &bx[4..260];
        let (mut sums, mut mins) = (0i32, 0i32);
        for (j, &sm) in block.scales.iter().enumerate() {
            sums += (sm & 0xF) as i32 * sub16(&v, xs, j);
            mins += (sm >> 4) as i32 * sub16(&ones, xs, j);
        }
        acc = (sums as f32).mul_add(f16_at(&bw[80..]) * dx, acc);
        acc = (-(mins as f32)).mul_add(f16_at(&bw[82..]) * dx, acc);
    }
    acc
}

/// [`vec_dot_sequential`] for IQ4_XS rows (136-byte super-blocks) against Q8_K.
fn iq4xs_sequential(w: &[u8], x: &[u8]) -> f32 {
    use crate::matmul::interleave::iq4xs_index;
    assert!(
        w.len().is_multiple_of(136) && x.len() == w.len() / 136 * 292,
        "vec_dot_sequential: rows of different lengths"
    );
    let mut acc = 0.0f32;
    for (bw, bx) in w.chunks_exact(136).zip(x.chunks_exact(292)) {
        let block: &crate::quant::BlockIq4Xs = bytemuck::from_bytes(bw);
        let (h, sl) = (block.scales_h, block.scales_l);
        let dx = f32::from_le_bytes([bx[0], bx[1], bx[2], bx[3]]);
        let mut sums = 0i32;
        for j in 0..8 {
            let dot: i32 = (32 * j..32 * j + 32)
                .map(|i| {
                    let v = KVALUES_IQ4NL[iq4xs_index(block, i) as usize] as i32;
                    v * bx[4 + i] as i8 as i32
                })
                .sum();
            sums += crate::quant::xs_scale(h, &sl, j) * dot;
        }
        acc = (sums as f32).mul_add(f16_at(bw) * dx, acc);
    }
    acc
}

/// [`vec_dot_sequential`] for Q6_K rows (210-byte super-blocks) against Q8_K.
fn q6k_sequential(w: &[u8], x: &[u8]) -> f32 {
    assert!(
        w.len().is_multiple_of(210) && x.len() == w.len() / 210 * 292,
        "vec_dot_sequential: rows of different lengths"
    );
    let mut acc = 0.0f32;
    for (bw, bx) in w.chunks_exact(210).zip(x.chunks_exact(292)) {
        let block: &BlockQ6K = bytemuck::from_bytes(bw);
        let q = unpack_q6k(block);
        let dx = f32::from_le_bytes([bx[0], bx[1], bx[2], bx[3]]);
        let mut sums = 0i32;
        for (j, &sc) in block.scales.iter().enumerate() {
            let dot: i32 = (16 * j..16 * j + 16)
                .map(|i| q[i] as i32 * bx[4 + i] as i8 as i32)
                .sum();
            sums += sc as i32 * dot;
        }
        acc = (sums as f32).mul_add(f16_at(&bw[208..]) * dx, acc);
    }
    acc
}
