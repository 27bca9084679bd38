//! Scalar reference of the interleaved kernels ([`crate::matmul::Interleaved`]): one float
//! accumulator per (row, token), fed block by block from block 0 with
//! `acc = fma(f32(Σ_int), dw · dx, acc)`.
//!
//! Invariant: integer block sums are exact; the float sequence above is the one the AVX-512
//! interleaved kernels run lane by lane, so their results equal these bit for bit. It differs
//! from ggml's generic C ([`super::reference`]) only by rounding (one fused step per block).

use half::f16;

use crate::types::GgmlType;

/// Q4_0 / Q8_0 block sizes in bytes.
const Q4_0_BYTES: usize = 18;
const Q8_0_BYTES: usize = 34;

fn f16_at(c: &[u8]) -> f32 {
    f16::from_le_bytes([c[0], c[1]]).to_f32()
}

/// Whether `ty` has a sequential-order kernel (and so an interleaved layout).
pub fn has_sequential(ty: GgmlType) -> bool {
    matches!(ty, GgmlType::Q4_0 | GgmlType::Q8_0)
}

/// Dot product of one weight row of `ty` (Q4_0 or Q8_0, GGML layout) with one Q8_0 activation
/// row, in the sequential order. Panics on another type or on lengths that are not whole rows
/// of the same number of blocks.
pub fn vec_dot_sequential(ty: GgmlType, w: &[u8], x: &[u8]) -> f32 {
    let wb = match ty {
        GgmlType::Q4_0 => Q4_0_BYTES,
        GgmlType::Q8_0 => Q8_0_BYTES,
        other => panic!("vec_dot_sequential: {other} has no sequential kernel"),
    };
    assert!(
        w.len().is_multiple_of(wb) && x.len() == w.len() / wb * Q8_0_BYTES,
        "vec_dot_sequential: rows of different lengths"
    );
    let mut acc = 0.0f32;
    for (bw, bx) in w.chunks_exact(wb).zip(x.as_chunks::<Q8_0_BYTES>().0) {
        let xq = &bx[2..];
        let sumi: i32 = match ty {
            GgmlType::Q4_0 => (0..16)
                .map(|j| {
                    let q = bw[2 + j];
                    ((q & 0xF) as i32 - 8) * xq[j] as i8 as i32
                        + ((q >> 4) as i32 - 8) * xq[j + 16] as i8 as i32
                })
                .sum(),
            _ => (0..32)
                .map(|j| bw[2 + j] as i8 as i32 * xq[j] as i8 as i32)
                .sum(),
        };
        acc = (sumi as f32).mul_add(f16_at(bw) * f16_at(bx), acc);
    }
    acc
}
