//! AMX tile kernels over interleaved Q6_K, Q3_K, Q2_K (16-element sub-blocks) and IQ4_XS
//! (32-element sub-blocks) weights ([`crate::matmul::Interleaved`]) for 16 tokens at a time:
//! per sub-block, one `TDPBSUD` forms the 16 tokens × 16 rows sums `Σ u·x` over the levels the
//! VNNI kernels build (unpacked into a scratch `B`; `A` is the tokens' Q8_K values read in
//! place), each token's lane adds its `base` and takes the rows' scale (`vpmulld`) into the
//! super-block's integer sum, and the float step of [`super::interleaved_k`] runs once per
//! super-block.
//!
//! Invariant (bits): `isum += sc · (base + Σ u·x)` with exact integers, as
//! [`super::interleaved_k::add_scaled_sums`] forms it; then `acc = fma(f32(isum), d·dx, acc)`
//! (Q2_K: then `acc = fma(-f32(Σ_j m_j·Σ x), dmin·dx, acc)`) super-block by super-block from 0:
//! the [`crate::dot::sequential`] reference, bit for bit, for any token tiling.

use std::arch::x86_64::*;

use super::interleaved_amx::TokenTile;
use super::interleaved_iq4xs::{IQ4NL_LEVELS, IQ4XS_GROUP_BYTES, XsInfo, iq4xs_levels};
use super::interleaved_k::{Q6Info, Q6K_GROUP_BYTES, fma_super_block, q6k_levels};
use super::interleaved_k_low::{q3k_levels, two_bits};
use crate::amx::{CBuf, M, TileUnit};
use crate::matmul::interleave::{
    IQ4XS_SCALES, Q2K_BYTES, Q2K_DMIN, Q2K_LOW, Q2K_SCALES, Q3K_BYTES, Q3K_SCALES, Q6K_SCALES,
};
use crate::types::GgmlType;

/// Bytes of one Q8_K activation block, and the offset of its values.
const XB: usize = 292;
const XQ: usize = 4;

/// A sub-block's unpacked levels (tile `B`) and the tile's sums, reused across sub-blocks.
#[repr(C, align(64))]
struct Scratch {
    levels: [u8; 512],
    sums: CBuf,
}

/// `isum[t] += sc · (base(t) + Σ_c wq[c] · A[t][4c..])` for the 16 tokens: the tile product of
/// the `C` level chunks `wq` against `A` (token `t`'s `4·C` values at `a + t·stride`).
///
/// # Safety
/// avx512f enabled in the caller; `tiles` configured for `A` = 16 × `4·C` bytes; the 16 rows
/// of `4·C` bytes at `a` readable.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn tile_scaled_sums<U: TileUnit, const C: usize>(
    tiles: &mut U,
    scratch: &mut Scratch,
    wq: &[__m512i; C],
    sc: __m512i,
    (a, stride): (*const u8, usize),
    base: impl Fn(usize) -> i32,
    isum: &mut [__m512i; M],
) {
    // SAFETY: the caller's contract; `levels` and `sums` are 64-byte aligned.
    unsafe {
        for (c, v) in wq.iter().enumerate() {
            _mm512_store_si512(scratch.levels.as_mut_ptr().add(64 * c).cast(), *v);
        }
        tiles.zero_c();
        tiles.load_a(a, stride);
        tiles.load_b(scratch.levels.as_ptr());
        tiles.dot();
        tiles.store_c(&mut scratch.sums);
        for t in 0..M {
            let raw = _mm512_load_si512(scratch.sums.0[t].as_ptr().cast());
            let s = _mm512_add_epi32(_mm512_set1_epi32(base(t)), raw);
            isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(s, sc));
        }
    }
}

/// `out[t][r] = dot(row r of the group, x[t])` for the 16 rows of one interleaved Q6_K, Q3_K or
/// Q2_K group (`ty`; another type is treated as Q6_K) and the 16 tokens of `tile`, on `tiles`
/// (configured for `A` = 16 × 16 bytes); the infos as the VNNI kernels take them.
///
/// # Safety
/// avx512f/bw/vl/vnni + avx2/fma/f16c; `w` points to `nb` group blocks of the format; the
/// tile's 16 Q8_K activation rows, their `nb` [`Q6Info`]s each and their 16 outputs each are
/// valid as described on [`TokenTile`] (outputs writable).
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(crate) unsafe fn group_amx_sub16<U: TileUnit>(
    tiles: &mut U,
    ty: GgmlType,
    w: *const u8,
    nb: usize,
    tile: TokenTile<Q6Info>,
) {
    let (bytes, scales) = match ty {
        GgmlType::Q3K => (Q3K_BYTES, Q3K_SCALES),
        GgmlType::Q2K => (Q2K_BYTES, Q2K_SCALES),
        _ => (Q6K_GROUP_BYTES, Q6K_SCALES),
    };
    let mut scratch = Scratch {
        levels: [0; 512],
        sums: CBuf::default(),
    };
    // SAFETY: features and pointer ranges are the caller's contract; vector loads unaligned.
    unsafe {
        let mut acc = [_mm512_setzero_ps(); M];
        let nibble = _mm512_set1_epi32(0xF);
        for b in 0..nb {
            let blk = w.add(b * bytes);
            let info = |t: usize| tile.info.add(t * nb + b).read();
            let mut isum = [_mm512_setzero_si512(); M];
            let mut mins = [_mm512_setzero_si512(); M];
            for j in 0..16 {
                let wq: [__m512i; 4] = std::array::from_fn(|c| match ty {
                    GgmlType::Q3K => q3k_levels(blk, 4 * j + c),
                    GgmlType::Q2K => two_bits(blk.add(Q2K_LOW), 4 * j + c),
                    _ => q6k_levels(blk, 4 * j + c),
                });
                let a = (tile.x.add(b * XB + XQ + 16 * j), tile.x_stride);
                let raw = _mm_loadu_si128(blk.add(scales + 16 * j).cast());
                if ty == GgmlType::Q2K {
                    let packed = _mm512_cvtepu8_epi32(raw);
                    let sc = _mm512_and_si512(packed, nibble);
                    tile_scaled_sums(tiles, &mut scratch, &wq, sc, a, |_| 0, &mut isum);
                    let m = _mm512_srli_epi32::<4>(packed);
                    for (t, mt) in mins.iter_mut().enumerate() {
                        let sx = _mm512_set1_epi32(info(t).base[j]);
                        *mt = _mm512_add_epi32(*mt, _mm512_mullo_epi32(m, sx));
                    }
                } else {
                    let sc = _mm512_cvtepi8_epi32(raw);
                    let base = |t: usize| info(t).base[j];
                    tile_scaled_sums(tiles, &mut scratch, &wq, sc, a, base, &mut isum);
                }
            }
            let dw = _mm512_cvtph_ps(_mm256_loadu_si256(blk.cast()));
            fma_super_block(&mut acc, &isum, dw, |t| info(t).dx);
            if ty == GgmlType::Q2K {
                let dm = _mm512_cvtph_ps(_mm256_loadu_si256(blk.add(Q2K_DMIN).cast()));
                for (t, a) in acc.iter_mut().enumerate() {
                    let scale = _mm512_mul_ps(dm, _mm512_set1_ps(info(t).dx));
                    *a = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(mins[t]), scale, *a);
                }
            }
        }
        for (t, a) in acc.iter().enumerate() {
            _mm512_storeu_ps(tile.out.add(t * tile.out_stride), *a);
        }
    }
}

/// `out[t][r] = dot(row r of the group, x[t])` for the 16 rows of one interleaved IQ4_XS group
/// and the 16 tokens of `tile`, on `tiles` (configured for `A` = 16 × 32 bytes).
///
/// # Safety
/// As [`group_amx_sub16`], with IQ4_XS group blocks and [`XsInfo`]s.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(crate) unsafe fn group_amx_iq4xs<U: TileUnit>(
    tiles: &mut U,
    w: *const u8,
    nb: usize,
    tile: TokenTile<XsInfo>,
) {
    let mut scratch = Scratch {
        levels: [0; 512],
        sums: CBuf::default(),
    };
    // SAFETY: features and pointer ranges are the caller's contract; vector loads unaligned.
    unsafe {
        let mut acc = [_mm512_setzero_ps(); M];
        let table = _mm512_broadcast_i32x4(_mm_loadu_si128(IQ4NL_LEVELS.as_ptr().cast()));
        for b in 0..nb {
            let blk = w.add(b * IQ4XS_GROUP_BYTES);
            let info = |t: usize| tile.info.add(t * nb + b).read();
            let mut isum = [_mm512_setzero_si512(); M];
            for j in 0..8 {
                let wq = iq4xs_levels(blk, j, table);
                let sc =
                    _mm512_cvtepi8_epi32(_mm_loadu_si128(blk.add(IQ4XS_SCALES + 16 * j).cast()));
                let a = (tile.x.add(b * XB + XQ + 32 * j), tile.x_stride);
                let base = |t: usize| info(t).base[j];
                tile_scaled_sums(tiles, &mut scratch, &wq, sc, a, base, &mut isum);
            }
            let dw = _mm512_cvtph_ps(_mm256_loadu_si256(blk.cast()));
            fma_super_block(&mut acc, &isum, dw, |t| info(t).dx);
        }
        for (t, a) in acc.iter().enumerate() {
            _mm512_storeu_ps(tile.out.add(t * tile.out_stride), *a);
        }
    }
}
