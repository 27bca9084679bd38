//! Byte-level entry to the scalar reference dots: views rows of any alignment as blocks (block
//! structs have alignment 1) or decodes little-endian floats element by element.
//!
//! Invariant: callers have checked that `a`/`b` hold exactly one row of `n` elements.

use half::{bf16, f16};

use super::reference;
use crate::quant::bf16_to_f32;
use crate::types::GgmlType;

/// Sum in f64 of f32 products, like ggml's `ggml_float` accumulators.
fn dot_pairs(it: impl Iterator<Item = (f32, f32)>) -> f32 {
    let mut sum = 0.0f64;
    for (x, y) in it {
        sum += (x * y) as f64;
    }
    sum as f32
}

fn f32_at(c: &[u8]) -> f32 {
    f32::from_le_bytes([c[0], c[1], c[2], c[3]])
}

fn f16_at(c: &[u8]) -> f32 {
    f16::from_le_bytes([c[0], c[1]]).to_f32()
}

fn bf16_at(c: &[u8]) -> f32 {
    bf16_to_f32(bf16::from_le_bytes([c[0], c[1]]))
}

/// The scalar reference of [`super::vec_dot`].
pub(crate) fn vec_dot_scalar(ty: GgmlType, a: &[u8], b: &[u8], _n: usize) -> f32 {
    use bytemuck::cast_slice as cs;
    match ty {
        GgmlType::F32 => dot_pairs(
            a.as_chunks::<4>()
                .0
                .iter()
                .zip(b.as_chunks::<4>().0.iter())
                .map(|(x, y)| (f32_at(x), f32_at(y))),
        ),
        GgmlType::F16 => dot_pairs(
            a.as_chunks::<2>()
                .0
                .iter()
                .zip(b.as_chunks::<2>().0.iter())
                .map(|(x, y)| (f16_at(x), f16_at(y))),
        ),
        GgmlType::BF16 => dot_pairs(
            a.as_chunks::<2>()
                .0
                .iter()
                .zip(b.as_chunks::<2>().0.iter())
                .map(|(x, y)| (bf16_at(x), bf16_at(y))),
        ),
        GgmlType::Q4_0 => reference::dot_q4_0_q8_0(cs(a), cs(b)),
        GgmlType::Q4_1 => reference::dot_q4_1_q8_1(cs(a), cs(b)),
        GgmlType::Q5_0 => reference::dot_q5_0_q8_0(cs(a), cs(b)),
        GgmlType::Q5_1 => reference::dot_q5_1_q8_1(cs(a), cs(b)),
        GgmlType::Q8_0 => reference::dot_q8_0_q8_0(cs(a), cs(b)),
        GgmlType::Q8_1 => reference::dot_q8_1_q8_1(cs(a), cs(b)),
        GgmlType::Q2K => reference::dot_q2k_q8k(cs(a), cs(b)),
        GgmlType::Q3K => reference::dot_q3k_q8k(cs(a), cs(b)),
        GgmlType::Q4K => reference::dot_q4k_q8k(cs(a), cs(b)),
        GgmlType::Q5K => reference::dot_q5k_q8k(cs(a), cs(b)),
        GgmlType::Q6K => reference::dot_q6k_q8k(cs(a), cs(b)),
        // Q8_K weights (never produced by llama.cpp) are dotted like Q8_0 without blocks of 32.
        GgmlType::Q8K => reference::dot_q8k_q8k(cs(a), cs(b)),
        GgmlType::IQ4NL => reference::dot_iq4nl_q8_0(cs(a), cs(b)),
        GgmlType::IQ4XS => reference::dot_iq4xs_q8k(cs(a), cs(b)),
        GgmlType::Mxfp4 => reference::dot_mxfp4_q8_0(cs(a), cs(b)),
    }
}
