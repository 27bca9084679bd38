//! [`Interleaved`]: a Q4_0 or Q8_0 weight matrix re-laid 16 rows at a time for the AVX-512 VNNI
//! kernels, built once at load from the GGML rows.
//!
//! Layout: groups of [`GROUP`] consecutive rows, each group all its blocks in order; a group
//! block is the 16 rows' f16 scales (32 bytes), then the quants as 64-byte chunks where chunk
//! `c` holds bytes `4c..4c + 4` of each of the 16 rows (row `r` at bytes `4r..4r + 4`). Q4_0
//! keeps its nibbles (4 chunks: low nibbles are elements `4c..`, high nibbles `16 + 4c..`);
//! Q8_0 stores `q + 128` as unsigned levels (8 chunks). Same size as the GGML rows.
//! Invariant: built only from a validated [`WeightMatrix`] whose rows are a multiple of
//! [`GROUP`]; the kernels read each group block linearly.

use crate::matmul::WeightMatrix;
use crate::simd::{self, SimdLevel};
use crate::types::GgmlType;

/// Rows per interleaved group (one 512-bit vector of i32 lanes).
pub const GROUP: usize = 16;
/// Bytes of one Q4_0 group block: 16 scales + 4 chunks of 64 bytes.
pub(crate) const Q4_0_GROUP_BLOCK: usize = 32 + 4 * 64;
/// Bytes of one Q8_0 group block: 16 scales + 8 chunks of 64 bytes.
pub(crate) const Q8_0_GROUP_BLOCK: usize = 32 + 8 * 64;

/// One cache line (keeps group blocks' loads from splitting lines more than they must).
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u8; 64]);

/// A weight matrix in the interleaved layout (see the module doc).
pub struct Interleaved {
    ty: GgmlType,
    rows: usize,
    cols: usize,
    data: Vec<Line>,
}

impl std::fmt::Debug for Interleaved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Interleaved")
            .field("ty", &self.ty)
            .field("rows", &self.rows)
            .field("cols", &self.cols)
            .finish()
    }
}

impl Interleaved {
    /// Whether this process's kernels use interleaved weights: the AVX2 level with 512-bit
    /// VNNI (avx512f/bw/vl/vnni), fixed once per process like the rest of the dispatch.
    pub fn in_use() -> bool {
        simd::level() == SimdLevel::Avx2 && simd::vnni() && simd::avx512_detected()
    }

    /// The interleaved copy of `w` when this process uses one ([`Self::in_use`]) and `w` is
    /// Q4_0 or Q8_0 with a whole number of groups; `None` otherwise (the GGML rows are used).
    pub fn build(w: &WeightMatrix) -> Option<Interleaved> {
        if Self::in_use() {
            Self::repack(w)
        } else {
            None
        }
    }

    /// The interleaved copy whatever the CPU (tests check the layout with it).
    pub(crate) fn repack(w: &WeightMatrix) -> Option<Interleaved> {
        let (wb, gb) = match w.ty {
            GgmlType::Q4_0 => (18, Q4_0_GROUP_BLOCK),
            GgmlType::Q8_0 => (34, Q8_0_GROUP_BLOCK),
            _ => return None,
        };
        if w.rows == 0 || !w.rows.is_multiple_of(GROUP) {
            return None;
        }
        let nb = w.cols / 32;
        let total = (w.rows / GROUP) * nb * gb;
        let mut data = vec![Line([0; 64]); total.div_ceil(64)];
        let bytes = bytemuck_lines(&mut data);
        for g in 0..w.rows / GROUP {
            for b in 0..nb {
                let dst = &mut bytes[(g * nb + b) * gb..][..gb];
                for r in 0..GROUP {
                    let src = &w.row(g * GROUP + r)[b * wb..][..wb];
                    dst[2 * r..2 * r + 2].copy_from_slice(&src[..2]);
                    for c in 0..(wb - 2) / 4 {
                        let to = &mut dst[32 + 64 * c + 4 * r..][..4];
                        to.copy_from_slice(&src[2 + 4 * c..][..4]);
                        if w.ty == GgmlType::Q8_0 {
                            to.iter_mut().for_each(|v| *v ^= 0x80);
                        }
                    }
                }
            }
        }
        Some(Interleaved {
            ty: w.ty,
            rows: w.rows,
            cols: w.cols,
            data,
        })
    }

    /// Whether this is the interleaved copy of a matrix shaped like `w`.
    pub fn fits(&self, w: &WeightMatrix) -> bool {
        self.ty == w.ty && self.rows == w.rows && self.cols == w.cols
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.data.len() * 64
    }

    pub(crate) fn ty(&self) -> GgmlType {
        self.ty
    }

    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    pub(crate) fn cols(&self) -> usize {
        self.cols
    }

    /// Bytes of one group block of this matrix's type.
    pub(crate) fn group_block(&self) -> usize {
        if self.ty == GgmlType::Q8_0 {
            Q8_0_GROUP_BLOCK
        } else {
            Q4_0_GROUP_BLOCK
        }
    }

    /// The first byte of group `g` (`g < rows / GROUP`; its `cols / 32` blocks follow).
    pub(crate) fn group_ptr(&self, g: usize) -> *const u8 {
        let off = g * (self.cols / 32) * self.group_block();
        assert!(off < self.bytes(), "group {g} out of range");
        // SAFETY: off < bytes(): inside the allocation.
        unsafe { self.data.as_ptr().cast::<u8>().add(off) }
    }
}

/// The lines as one byte slice.
fn bytemuck_lines(lines: &mut [Line]) -> &mut [u8] {
    // SAFETY: `Line` is 64 plain bytes with no padding; the slice covers exactly the lines.
    unsafe { std::slice::from_raw_parts_mut(lines.as_mut_ptr().cast::<u8>(), lines.len() * 64) }
}
