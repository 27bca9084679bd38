//! Scalar reference of the interleaved kernels ([`crate::matmul::Interleaved`]): one float
//! accumulator per (row, token), fed block by block from block 0 with
//! `acc = fma(f32(Σ_int), dw · dx, acc)`, then for Q4_1 `acc = fma(m_w, s_x, acc)`.
//!
//! Invariant: integer block sums are exact; the float sequence above is the one the AVX-512
//! interleaved kernels run lane by lane, so their results equal these bit for bit. It differs
//! from ggml's generic C ([`super::reference`]) only by rounding (fused steps per block).

use half::f16;

use crate::types::GgmlType;

fn f16_at(c: &[u8]) -> f32 {
    f16::from_le_bytes([c[0], c[1]]).to_f32()
}

/// Whether `ty` has a sequential-order kernel (and so an interleaved layout).
pub fn has_sequential(ty: GgmlType) -> bool {
    matches!(
        ty,
        GgmlType::Q4_0 | GgmlType::Q8_0 | GgmlType::Q5_0 | GgmlType::Q4_1
    )
}

/// Element `i` (0..32) of one weight block of `ty` as a signed value (Q4_1: its unsigned level).
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
        GgmlType::Q5_0 => {
            let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
            nib(&b[6..]) + (((qh >> i) & 1) << 4) as i32 - 16
        }
        _ => b[2 + i] as i8 as i32,
    }
}

/// Dot product of one weight row of `ty` (Q4_0, Q8_0, Q5_0 or Q4_1, GGML layout) with one
/// activation row of its `vec_dot_type` (Q8_0, or Q8_1 for Q4_1), in the sequential order.
/// Panics on another type or on rows that are not whole rows of the same number of blocks.
pub fn vec_dot_sequential(ty: GgmlType, w: &[u8], x: &[u8]) -> f32 {
    assert!(
        has_sequential(ty),
        "vec_dot_sequential: {ty} has no sequential kernel"
    );
    let wb = ty.row_bytes(32).expect("32-element blocks");
    let (xb, xq) = if ty == GgmlType::Q4_1 {
        (36, 4)
    } else {
        (34, 2)
    };
    assert!(
        w.len().is_multiple_of(wb) && x.len() == w.len() / wb * xb,
        "vec_dot_sequential: rows of different lengths"
    );
    let mut acc = 0.0f32;
    for (bw, bx) in w.chunks_exact(wb).zip(x.chunks_exact(xb)) {
        let sumi: i32 = (0..32)
            .map(|i| value(ty, bw, i) * bx[xq + i] as i8 as i32)
            .sum();
        acc = (sumi as f32).mul_add(f16_at(bw) * f16_at(bx), acc);
        if ty == GgmlType::Q4_1 {
            acc = f16_at(&bw[2..]).mul_add(f16_at(&bx[2..]), acc);
        }
    }
    acc
}
