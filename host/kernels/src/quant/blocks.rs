//! GGML block layouts, bit-exact with llama.cpp's `ggml-common.h`.
//!
//! Invariant: every block is `#[repr(C, packed)]` (alignment 1) and `Pod`, so any `&[u8]` whose
//! length is a multiple of the block size can be viewed as `&[Block]` with `bytemuck::cast_slice`
//! whatever its address: GGUF tensor data is only 32-byte aligned at the tensor start, and e.g.
//! Q8_0 blocks (34 B) are not even 4-aligned. Multi-byte fields are read by value (copied), never
//! by reference.

use bytemuck::{Pod, Zeroable};
use half::f16;

use crate::types::QK_K;

/// `block_q4_0`: 32 weights as 4-bit unsigned nibbles with an implicit offset of 8.
/// Element `j` (< 16) is the low nibble of `qs[j]`, element `j + 16` the high nibble.
#[repr(C, packed)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ4_0 {
    pub d: f16,
    pub qs: [u8; 16],
}

/// `block_q4_1`: 32 weights as 4-bit unsigned levels, `x = d * level + m`; nibble layout as Q4_0.
#[repr(C, packed)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ4_1 {
    pub d: f16,
    pub m: f16,
    pub qs: [u8; 16],
}

/// `block_q5_0`: 32 weights of 5 bits with an implicit offset of 16: low 4 bits as Q4_0's
/// nibbles, bit 4 of element `j` in bit `j` of the little-endian u32 `qh`.
#[repr(C, packed)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ5_0 {
    pub d: f16,
    pub qh: [u8; 4],
    pub qs: [u8; 16],
}

/// `block_q5_1`: 32 weights of 5 bits, `x = d * level + m`; bits as Q5_0.
#[repr(C, packed)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ5_1 {
    pub d: f16,
    pub m: f16,
    pub qh: [u8; 4],
    pub qs: [u8; 16],
}

/// `block_q8_1`: 32 signed 8-bit values, the f16 scale `d` and `s = d * Σqs` (rounded to f16).
#[repr(C, packed)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ8_1 {
    pub d: f16,
    pub s: f16,
    pub qs: [i8; 32],
}

/// `block_iq4_nl`: 32 weights as 4-bit indices into the non-linear table
/// [`KVALUES_IQ4NL`](super::KVALUES_IQ4NL), nibble layout as Q4_0.
#[repr(C, packed)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockIq4Nl {
    pub d: f16,
    pub qs: [u8; 16],
}

/// `block_iq4_xs`: 256 weights as IQ4_NL indices in 8 sub-blocks of 32, each with a 6-bit scale
/// (offset 32: low 4 bits in `scales_l`, nibble `ib % 2` of byte `ib / 2`; high 2 bits at bit
/// `2 ib` of `scales_h`). Sub-block `ib` uses `qs[16 ib..16 ib + 16]` like an IQ4_NL block.
#[repr(C, packed)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockIq4Xs {
    pub d: f16,
    pub scales_h: u16,
    pub scales_l: [u8; QK_K / 64],
    pub qs: [u8; QK_K / 2],
}

/// `block_mxfp4`: 32 weights as 4-bit E2M1 codes, indices into
/// [`KVALUES_MXFP4`](super::KVALUES_MXFP4) (the E2M1 values doubled), nibble layout as Q4_0,
/// and one shared E8M0 exponent `e`: element `j` is `KVALUES_MXFP4[code_j] * 2^(e - 128)`
/// ([`e8m0_to_f32_half`](super::e8m0_to_f32_half)).
#[repr(C, packed)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockMxfp4 {
    pub e: u8,
    pub qs: [u8; 16],
}

/// `block_q8_0`: 32 signed 8-bit values and one f16 scale.
#[repr(C, packed)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ8_0 {
    pub d: f16,
    pub qs: [i8; 32],
}

/// `block_q2_K`: 256 weights of 2 bits, `x = d * sc * level - dmin * m` with a 4-bit scale `sc`
/// (low nibble of `scales[j]`) and min `m` (high nibble) per 16 elements. Element
/// `e = 128h + 32j + l` is `(qs[32h + l] >> 2j) & 3`.
#[repr(C, packed)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ2K {
    pub scales: [u8; QK_K / 16],
    pub qs: [u8; QK_K / 4],
    pub d: f16,
    pub dmin: f16,
}

/// `block_q3_K`: 256 weights of 3 bits (low 2 in `qs`, the high bit in `hmask`), 16 6-bit
/// scales (offset 32) packed in `scales`, one f16 super-block scale. Element `e = 128h + 32j + l`
/// has its low bits at `qs[32h + l] >> 2j` and its high bit at bit `4h + j` of `hmask[l]`; the
/// stored level minus 4 when that bit is clear is the signed value.
#[repr(C, packed)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ3K {
    pub hmask: [u8; QK_K / 8],
    pub qs: [u8; QK_K / 4],
    pub scales: [u8; 12],
    pub d: f16,
}

/// `block_q4_K`: 256 weights in 8 sub-blocks of 32, 6-bit scales and mins packed in `scales`.
#[repr(C, packed)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ4K {
    pub d: f16,
    pub dmin: f16,
    pub scales: [u8; 12],
    pub qs: [u8; QK_K / 2],
}

/// `block_q5_K`: Q4_K plus bit 4 of each level in `qh`: element `l` of sub-block `j` has its
/// bit 4 in bit `j` of `qh[l]`.
#[repr(C, packed)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ5K {
    pub d: f16,
    pub dmin: f16,
    pub scales: [u8; 12],
    pub qh: [u8; QK_K / 8],
    pub qs: [u8; QK_K / 2],
}

/// `block_q6_K`: 256 weights of 6 bits (low 4 in `ql`, high 2 in `qh`), 16 signed 8-bit scales.
#[repr(C, packed)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ6K {
    pub ql: [u8; QK_K / 2],
    pub qh: [u8; QK_K / 4],
    pub scales: [i8; QK_K / 16],
    pub d: f16,
}

/// `block_q8_K`: 256 signed 8-bit values, an f32 scale and the sums of each group of 16.
#[repr(C, packed)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ8K {
    pub d: f32,
    pub qs: [i8; QK_K],
    pub bsums: [i16; QK_K / 16],
}

const _: () = assert!(size_of::<BlockQ4_0>() == 18);
const _: () = assert!(size_of::<BlockQ8_0>() == 34);
const _: () = assert!(size_of::<BlockQ4_1>() == 20);
const _: () = assert!(size_of::<BlockQ5_0>() == 22);
const _: () = assert!(size_of::<BlockQ8_1>() == 36);
const _: () = assert!(size_of::<BlockQ5_1>() == 24);
const _: () = assert!(align_of::<BlockQ5_1>() == 1);
const _: () = assert!(align_of::<BlockQ4_1>() == 1);
const _: () = assert!(align_of::<BlockQ5_0>() == 1);
const _: () = assert!(align_of::<BlockQ8_1>() == 1);
const _: () = assert!(size_of::<BlockQ4K>() == 144);
const _: () = assert!(size_of::<BlockQ6K>() == 210);
const _: () = assert!(size_of::<BlockQ5K>() == 176);
const _: () = assert!(size_of::<BlockQ3K>() == 110);
const _: () = assert!(size_of::<BlockQ2K>() == 84);
const _: () = assert!(size_of::<BlockIq4Nl>() == 18);
const _: () = assert!(size_of::<BlockIq4Xs>() == 136);
const _: () = assert!(align_of::<BlockIq4Nl>() == 1);
const _: () = assert!(size_of::<BlockMxfp4>() == 17);
const _: () = assert!(align_of::<BlockMxfp4>() == 1);
const _: () = assert!(align_of::<BlockIq4Xs>() == 1);
const _: () = assert!(align_of::<BlockQ2K>() == 1);
const _: () = assert!(align_of::<BlockQ3K>() == 1);
const _: () = assert!(align_of::<BlockQ5K>() == 1);
const _: () = assert!(size_of::<BlockQ8K>() == 292);
const _: () = assert!(align_of::<BlockQ4_0>() == 1);
const _: () = assert!(align_of::<BlockQ8_0>() == 1);
const _: () = assert!(align_of::<BlockQ4K>() == 1);
const _: () = assert!(align_of::<BlockQ6K>() == 1);
const _: () = assert!(align_of::<BlockQ8K>() == 1);

/// Decodes the 6-bit scale and min of sub-block `j` (0..8) of a Q4_K block
/// (`get_scale_min_k4` in ggml).
#[inline(always)]
pub fn scale_min_k4(j: usize, q: &[u8; 12]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::GgmlType;

    #[test]
    fn block_sizes_match_type_sizes() {
        assert_eq!(size_of::<BlockQ4_0>(), GgmlType::Q4_0.type_size());
        assert_eq!(size_of::<BlockQ8_0>(), GgmlType::Q8_0.type_size());
        assert_eq!(size_of::<BlockQ4_1>(), GgmlType::Q4_1.type_size());
        assert_eq!(size_of::<BlockQ5_0>(), GgmlType::Q5_0.type_size());
        assert_eq!(size_of::<BlockQ8_1>(), GgmlType::Q8_1.type_size());
        assert_eq!(size_of::<BlockQ5_1>(), GgmlType::Q5_1.type_size());
        assert_eq!(size_of::<BlockQ4K>(), GgmlType::Q4K.type_size());
        assert_eq!(size_of::<BlockQ6K>(), GgmlType::Q6K.type_size());
        assert_eq!(size_of::<BlockQ5K>(), GgmlType::Q5K.type_size());
        assert_eq!(size_of::<BlockQ3K>(), GgmlType::Q3K.type_size());
        assert_eq!(size_of::<BlockQ2K>(), GgmlType::Q2K.type_size());
        assert_eq!(size_of::<BlockIq4Nl>(), GgmlType::IQ4NL.type_size());
        assert_eq!(size_of::<BlockIq4Xs>(), GgmlType::IQ4XS.type_size());
        assert_eq!(size_of::<BlockMxfp4>(), GgmlType::Mxfp4.type_size());
        assert_eq!(size_of::<BlockQ8K>(), GgmlType::Q8K.type_size());
    }

    #[test]
    fn blocks_cast_from_unaligned_bytes() {
        let buf = vec![0u8; 292 * 2 + 1];
        let blocks: &[BlockQ8K] = bytemuck::cast_slice(&buf[1..]);
        assert_eq!(blocks.len(), 2);
        let d = blocks[1].d;
        assert_eq!(d, 0.0);
    }
}
