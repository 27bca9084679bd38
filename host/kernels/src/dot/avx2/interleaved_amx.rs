//! AMX tile kernel over interleaved 32-element-block weights ([`crate::matmul::Interleaved`]:
//! Q4_0, Q8_0, Q5_0, Q4_1, Q5_1, IQ4_NL, MXFP4) for up to 2 groups × 2 tiles of 16 tokens at a
//! time on the shared 2×2 pipeline ([`super::interleaved_amx_pipe::pipeline`]): one tile
//! product per (block, token tile, group) forms the 16 tokens × 16 rows integer sums, and each
//! quadrant's float step runs over a chunk of blocks while the next chunk's products run.
//!
//! The interleaved quant chunks are already a tile's `B` operand (chunk `c` = 4 elements × 16
//! rows = tile row `c`): every format's levels are made signed (`TDPBSSD`, so no per-token
//! offset to add: Q8_0's stored `q + 128` flipped back to `q`, the 4- and 5-bit formats
//! unpacked less their offset; Q4_1 / Q5_1 keep unsigned levels, `TDPBSUD`) into the task's
//! scratch a chunk ahead of their tile loads; the work is shared by every token of the step. `A` is the tokens' int8 values of the block, packed once per matmul by
//! the driver. No weight copy: the memory cost is a task's [`Scratch`] and the packed
//! activations.
//! Invariant (bits): the tile's i32 sum is `Σ x·q` exactly (no saturation), the VNNI kernel's
//! lane value, and `acc = fma(f32(s), dw · dx, acc)` (Q4_1, Q5_1: then `fma(m_w, s_x, acc)`) runs
//! block by block from 0 as there: the [`crate::dot::sequential`] reference, bit for bit, for
//! any token tiling.

use std::arch::x86_64::*;

use super::interleaved::{
    IQ4_NL, MXFP4, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, XInfo, block_layout, e8m0_half_x16, format_of,
    level_table, unpack_block,
};
use super::interleaved_amx_pipe::{
    ChunkSums, Levels, Scratch, TokenTile, UNITS, acc_get, acc_put, pipeline,
};
use crate::amx::TileUnit;
use crate::types::GgmlType;

/// `out[t][r] = dot(row r of group g, x[t])` for the 16 rows of each of the `GB` interleaved
/// groups of `ty` at `w[g]` and the tokens of the `TA` tiles `tt`, on `tiles` (configured for
/// `A` = `m` × 32 bytes, `m` every tile's token count).
///
/// # Safety
/// avx512f/bw/vl + avx2/fma/f16c; each `w[g]` points to `nb` group blocks of `ty`'s layout;
/// each tile's activation rows, their `nb` infos each and their 16 outputs per group each are
/// valid as described on [`TokenTile`] (outputs writable).
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
pub(crate) unsafe fn group_amx<U: TileUnit, const TA: usize, const GB: usize>(
    tiles: &mut U,
    scratch: &mut Scratch,
    ty: GgmlType,
    w: [*const u8; GB],
    nb: usize,
    tt: [TokenTile<XInfo>; TA],
) {
    // SAFETY: forwarded.
    unsafe {
        match format_of(ty) {
            Q8_0 => group_amx_f::<U, Q8_0, TA, GB>(tiles, scratch, w, nb, tt),
            Q5_0 => group_amx_f::<U, Q5_0, TA, GB>(tiles, scratch, w, nb, tt),
            Q4_1 => group_amx_f::<U, Q4_1, TA, GB>(tiles, scratch, w, nb, tt),
            Q5_1 => group_amx_f::<U, Q5_1, TA, GB>(tiles, scratch, w, nb, tt),
            IQ4_NL => group_amx_f::<U, IQ4_NL, TA, GB>(tiles, scratch, w, nb, tt),
            MXFP4 => group_amx_f::<U, MXFP4, TA, GB>(tiles, scratch, w, nb, tt),
            _ => group_amx_f::<U, Q4_0, TA, GB>(tiles, scratch, w, nb, tt),
        }
    }
}

/// The signed levels of one group block of format `F` (the VNNI kernel's unsigned levels less
/// the format's offset: `q` for Q8_0, `q - 8` for Q4_0, `q - 16` for Q5_0, the table's value
/// for IQ4_NL / MXFP4; Q4_1 / Q5_1 keep their unsigned levels) into `dst`: tile `B`. The sums
/// over them are the VNNI kernel's lane values plus its `base` (`-offset · Σx`), exactly.
///
/// # Safety
/// avx512f/bw; `blk` points to one group block of the format.
#[inline(always)]
unsafe fn prepare_b<const F: u8>(blk: *const u8, quants: usize, table: __m512i, dst: &mut Levels) {
    // SAFETY: the block's bytes are readable (caller); the stores stay inside `dst`.
    unsafe {
        let wq = unpack_block::<F>(blk, quants, table);
        for (c, v) in wq.iter().enumerate() {
            let v = match F {
                Q8_0 | IQ4_NL | MXFP4 => _mm512_xor_si512(*v, _mm512_set1_epi8(-128)),
                Q4_0 => _mm512_sub_epi8(*v, _mm512_set1_epi8(8)),
                Q5_0 => _mm512_sub_epi8(*v, _mm512_set1_epi8(16)),
                _ => *v,
            };
            _mm512_store_si512(dst.0.as_mut_ptr().add(64 * c).cast(), v);
        }
    }
}

/// [`group_amx`] for format `F` on the pipeline: each quadrant's float steps run over a
/// chunk of blocks in block order, token by token.
///
/// # Safety
/// As [`group_amx`].
// The closures inside take the features from here (not from an inlined caller).
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
#[inline]
unsafe fn group_amx_f<U: TileUnit, const F: u8, const TA: usize, const GB: usize>(
    tiles: &mut U,
    scratch: &mut Scratch,
    w: [*const u8; GB],
    nb: usize,
    tt: [TokenTile<XInfo>; TA],
) {
    let (gb, quants) = block_layout::<F>();
    let Scratch {
        sums, levels, acc, ..
    } = scratch;
    // SAFETY: features and pointer ranges are the caller's contract; vector loads unaligned.
    unsafe {
        let table = level_table::<F>();
        let prep = |g: usize, u: usize, lv: &mut Levels| {
            prepare_b::<F>(w[g].add(u * gb), quants, table, lv);
        };
        let b = |_: usize, _: usize, lv: &Levels| lv.0.as_ptr();
        let a = |ta: usize, u: usize| tt[ta].a(u);
        let consume = |q: usize, u0: usize, cnt: usize, s: &ChunkSums| {
            let (tile, blk) = (tt[q % 2], w[q / 2].add(u0 * gb));
            let dw: [__m512; UNITS] = std::array::from_fn(|u| {
                let blk = blk.add(u.min(cnt - 1) * gb);
                if F == MXFP4 {
                    e8m0_half_x16(blk)
                } else {
                    _mm512_cvtph_ps(_mm256_loadu_si256(blk.cast()))
                }
            });
            let mw: [__m512; UNITS] = std::array::from_fn(|u| {
                if F == Q4_1 || F == Q5_1 {
                    let blk = blk.add(u.min(cnt - 1) * gb);
                    _mm512_cvtph_ps(_mm256_loadu_si256(blk.add(32).cast()))
                } else {
                    _mm512_setzero_ps()
                }
            });
            let (first, last) = (u0 == 0, u0 + cnt == nb);
            for t in 0..tile.m {
                let mut at = acc_get(acc, q, t, first);
                let info = tile.info.add(t * nb + u0);
                for u in 0..UNITS {
                    if u < cnt {
                        let inf = info.add(u);
                        let raw = _mm512_load_si512(s[u][q].0[t].as_ptr().cast());
                        let scale = _mm512_mul_ps(dw[u], _mm512_set1_ps((*inf).dx));
                        at = _mm512_fmadd_ps(_mm512_cvtepi32_ps(raw), scale, at);
                        if F == Q4_1 || F == Q5_1 {
                            at = _mm512_fmadd_ps(mw[u], _mm512_set1_ps((*inf).sx), at);
                        }
                    }
                }
                acc_put(acc, q, t, last, &tile, at);
            }
        };
        // Signed levels but Q4_1 / Q5_1's (their sums need no offset).
        let signed = !(F == Q4_1 || F == Q5_1);
        let stride = tt[0].k;
        pipeline::<U, TA, GB>(tiles, sums, levels, nb, a, stride, prep, b, signed, consume);
    }
}
