//! AMX tile kernel over interleaved 32-element-block weights ([`crate::matmul::Interleaved`]:
//! Q4_0, Q8_0, Q5_0, Q4_1, Q5_1, IQ4_NL, MXFP4) for 16 tokens at a time: per block, one
//! `TDPBSUD` forms the 16 tokens × 16 rows integer sums, then each token's lane runs the float
//! step of [`super::interleaved`].
//!
//! The interleaved quant chunks are already a tile's `B` operand (chunk `c` = 4 elements × 16
//! rows = tile row `c`): Q8_0's `q + 128` levels load straight from the weights, the 4- and
//! 5-bit formats are unpacked to the same levels as the VNNI kernel's (`unpack_block`) into a
//! 512-byte scratch first. `A` is the 16 tokens' int8 values of the block, read in place from
//! the quantized activations (tile stride = activation row bytes). No weight copy: the memory
//! cost is the kernel's 1.5 KiB of stack.
//! Invariant (bits): the tile's i32 sum is `Σ x·u` exactly (no saturation), so `base + sum` is
//! the VNNI kernel's lane value, and `acc = fma(f32(s), dw · dx, acc)` (Q4_1, Q5_1: then
//! `fma(m_w, s_x, acc)`) runs block by block from 0 as there: the result is the
//! [`crate::dot::sequential`] reference, bit for bit, for any token tiling.

use std::arch::x86_64::*;

use super::interleaved::{
    IQ4_NL, MXFP4, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, XInfo, block_layout, e8m0_half_x16, format_of,
    level_table, unpack_block,
};
use crate::amx::{CBuf, M, TileUnit};
use crate::types::GgmlType;

/// The unpacked levels of one block: tile `B`, 8 rows of 64 bytes.
#[repr(C, align(64))]
struct Levels([u8; 512]);

/// Where one 16-token tile of a group's product reads and writes (`I`: the format's
/// per-(token, block) activation facts).
#[derive(Clone, Copy)]
pub(crate) struct TokenTile<I> {
    /// Token 0's activation row (`nb` blocks of the format's `vec_dot_type`).
    pub x: *const u8,
    /// Bytes from one token's activation row to the next.
    pub x_stride: usize,
    /// Token 0's `nb` infos; token `t`'s start `t · nb` later.
    pub info: *const I,
    /// Token 0's 16 outputs; token `t`'s start `t · out_stride` later.
    pub out: *mut f32,
    pub out_stride: usize,
}

/// `out[t][r] = dot(row r of the group, x[t])` for the 16 rows of one interleaved group of
/// `ty` and the 16 tokens of `tile`, on `tiles` (configured for `A` = 16 × 32 bytes).
///
/// # Safety
/// avx512f/bw/vl + avx2/fma/f16c; `w` points to `nb` group blocks of `ty`'s layout; the tile's
/// 16 activation rows, their `nb` infos each and their 16 outputs each are valid as described
/// on [`TokenTile`] (outputs writable).
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
pub(crate) unsafe fn group_amx<U: TileUnit>(
    tiles: &mut U,
    ty: GgmlType,
    w: *const u8,
    nb: usize,
    tile: TokenTile<XInfo>,
) {
    // SAFETY: forwarded.
    unsafe {
        match format_of(ty) {
            Q8_0 => group_amx_f::<U, Q8_0>(tiles, w, nb, tile),
            Q5_0 => group_amx_f::<U, Q5_0>(tiles, w, nb, tile),
            Q4_1 => group_amx_f::<U, Q4_1>(tiles, w, nb, tile),
            Q5_1 => group_amx_f::<U, Q5_1>(tiles, w, nb, tile),
            IQ4_NL => group_amx_f::<U, IQ4_NL>(tiles, w, nb, tile),
            MXFP4 => group_amx_f::<U, MXFP4>(tiles, w, nb, tile),
            _ => group_amx_f::<U, Q4_0>(tiles, w, nb, tile),
        }
    }
}

/// [`group_amx`] for format `F`.
///
/// # Safety
/// As [`group_amx`].
#[inline(always)]
unsafe fn group_amx_f<U: TileUnit, const F: u8>(
    tiles: &mut U,
    w: *const u8,
    nb: usize,
    tile: TokenTile<XInfo>,
) {
    let (gb, quants) = block_layout::<F>();
    let with_min = F == Q4_1 || F == Q5_1;
    // Activation block bytes and the offset of its int8 values (Q8_1 for Q4_1 / Q5_1).
    let (xb, xq_off) = if with_min { (36, 4) } else { (34, 2) };
    let mut levels = Levels([0; 512]);
    let mut sums = CBuf::default();
    // SAFETY: features and pointer ranges are the caller's contract; vector loads unaligned.
    unsafe {
        let mut acc = [_mm512_setzero_ps(); M];
        let table = level_table::<F>();
        for b in 0..nb {
            let blk = w.add(b * gb);
            tiles.zero_c();
            // 16 rows of 32 bytes: token t's block b values.
            tiles.load_a(tile.x.add(b * xb + xq_off), tile.x_stride);
            if F == Q8_0 {
                // The 8 chunks at `quants` are the levels (512 bytes of the block).
                tiles.load_b(blk.add(quants));
            } else {
                let wq = unpack_block::<F>(blk, quants, table);
                for (c, v) in wq.iter().enumerate() {
                    _mm512_store_si512(levels.0.as_mut_ptr().add(64 * c).cast(), *v);
                }
                tiles.load_b(levels.0.as_ptr());
            }
            tiles.dot();
            tiles.store_c(&mut sums);
            let dw = if F == MXFP4 {
                e8m0_half_x16(blk)
            } else {
                _mm512_cvtph_ps(_mm256_loadu_si256(blk.cast()))
            };
            let mw = if with_min {
                _mm512_cvtph_ps(_mm256_loadu_si256(blk.add(32).cast()))
            } else {
                _mm512_setzero_ps()
            };
            for t in 0..M {
                let inf = tile.info.add(t * nb + b).read();
                let raw = _mm512_load_si512(sums.0[t].as_ptr().cast());
                let s = _mm512_add_epi32(_mm512_set1_epi32(inf.base), raw);
                let scale = _mm512_mul_ps(dw, _mm512_set1_ps(inf.dx));
                acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), scale, acc[t]);
                if with_min {
                    acc[t] = _mm512_fmadd_ps(mw, _mm512_set1_ps(inf.sx), acc[t]);
                }
            }
        }
        for (t, a) in acc.iter().enumerate() {
            _mm512_storeu_ps(tile.out.add(t * tile.out_stride), *a);
        }
    }
}
