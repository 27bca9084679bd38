//! AMX tile kernels over interleaved Q6_K, Q3_K, Q2_K (16-element sub-blocks) and IQ4_XS
//! (32-element sub-blocks) weights ([`crate::matmul::Interleaved`]) for 16 tokens at a time:
//! per super-block, the sub-blocks' levels the VNNI kernels build (into the task's scratch),
//! one `TDPBSUD` per sub-block ([`super::interleaved_amx::tile_products`]; `A` is the tokens'
//! Q8_K values packed by the driver) for the 16 tokens × 16 rows sums `Σ u·x`, then each
//! token's lane adds its `base` and takes the rows' scale (`vpmulld`) into the super-block's
//! integer sum and runs the float step of [`super::interleaved_k`]. The 16-element sub-blocks
//! use a quarter of a tile product each: slower than the VNNI kernels here, so only
//! `MEMORIA_SIMD=amx` runs them ([`crate::simd::amx_all`]).
//!
//! Invariant (bits): `isum += sc · (base + Σ u·x)` with exact integers, as
//! [`super::interleaved_k::add_scaled_sums`] forms it; then `acc = fma(f32(isum), d·dx, acc)`
//! (Q2_K: then `acc = fma(-f32(Σ_j m_j·Σ x), dmin·dx, acc)`) super-block by super-block from 0:
//! the [`crate::dot::sequential`] reference, bit for bit, for any token tiling.

use std::arch::x86_64::*;

use super::interleaved_amx::{Levels, Scratch, TokenTile, tile_products};
use super::interleaved_iq4xs::{IQ4NL_LEVELS, IQ4XS_GROUP_BYTES, XsInfo, iq4xs_levels};
use super::interleaved_k::{Q6Info, Q6K_GROUP_BYTES, q6k_levels};
use super::interleaved_k_low::{q3k_levels, two_bits};
use crate::amx::{CBuf, M, TileUnit};
use crate::matmul::interleave::{
    IQ4XS_SCALES, Q2K_BYTES, Q2K_DMIN, Q2K_LOW, Q2K_SCALES, Q3K_BYTES, Q3K_SCALES, Q6K_SCALES,
};
use crate::types::GgmlType;

/// `isum += sc_j · (base_j + sums[j][t])` over the `n` sub-blocks' stored tile sums for token
/// `t`, in sub-block order (the VNNI kernels' exact integers).
///
/// # Safety
/// avx512f enabled in the caller.
#[inline(always)]
unsafe fn scaled_sum(
    sums: &[CBuf],
    t: usize,
    sc: impl Fn(usize) -> __m512i,
    base: impl Fn(usize) -> i32,
    n: usize,
) -> __m512i {
    // SAFETY: the caller's contract; `sums` rows are 64-byte aligned.
    unsafe {
        let mut isum = _mm512_setzero_si512();
        for (j, s) in sums[..n].iter().enumerate() {
            let raw = _mm512_load_si512(s.0[t].as_ptr().cast());
            let v = _mm512_add_epi32(_mm512_set1_epi32(base(j)), raw);
            isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(v, sc(j)));
        }
        isum
    }
}

/// Writes `C` level chunks into `dst` (tile `B`).
///
/// # Safety
/// avx512f enabled in the caller.
#[inline(always)]
unsafe fn put_levels<const C: usize>(wq: &[__m512i; C], dst: &mut Levels) {
    // SAFETY: `dst` holds 8 aligned chunks of 64 bytes, C ≤ 8.
    unsafe {
        for (c, v) in wq.iter().enumerate() {
            _mm512_store_si512(dst.0.as_mut_ptr().add(64 * c).cast(), *v);
        }
    }
}

/// `out[t][r] = dot(row r of the group, x[t])` for the 16 rows of one interleaved Q6_K, Q3_K or
/// Q2_K group (`ty`; another type is treated as Q6_K) and the 16 tokens of `tile`, on `tiles`
/// (configured for `A` = 16 × 16 bytes); the infos as the VNNI kernels take them. Per
/// super-block: the 16 sub-blocks' levels, their tile products ([`tile_products`]), then each
/// token's scale and float steps.
///
/// # Safety
/// avx512f/bw/vl/vnni + avx2/fma/f16c; `w` points to `nb` group blocks of the format; the
/// tile's 16 Q8_K activation rows, their `nb` [`Q6Info`]s each and their 16 outputs each are
/// valid as described on [`TokenTile`] (outputs writable).
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(crate) unsafe fn group_amx_sub16<U: TileUnit>(
    tiles: &mut U,
    scratch: &mut Scratch,
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
    let Scratch { sums, levels } = scratch;
    // SAFETY: features and pointer ranges are the caller's contract; vector loads unaligned.
    unsafe {
        let mut acc = [_mm512_setzero_ps(); M];
        let nibble = _mm512_set1_epi32(0xF);
        for b in 0..nb {
            let blk = w.add(b * bytes);
            let info = |t: usize| tile.info.add(t * nb + b).read();
            for (j, lv) in levels[..16].iter_mut().enumerate() {
                let wq: [__m512i; 4] = std::array::from_fn(|c| match ty {
                    GgmlType::Q3K => q3k_levels(blk, 4 * j + c),
                    GgmlType::Q2K => two_bits(blk.add(Q2K_LOW), 4 * j + c),
                    _ => q6k_levels(blk, 4 * j + c),
                });
                put_levels(&wq, lv);
            }
            let a = |j: usize| tile.a(16 * b + j);
            let lv = |j: usize| levels[j].0.as_ptr();
            tile_products(tiles, 16, a, tile.k, lv, false, &mut sums[..]);
            let raw = |j: usize| _mm_loadu_si128(blk.add(scales + 16 * j).cast());
            let dw = _mm512_cvtph_ps(_mm256_loadu_si256(blk.cast()));
            let dm = _mm512_cvtph_ps(_mm256_loadu_si256(blk.add(Q2K_DMIN).cast()));
            for (t, at) in acc[..tile.m].iter_mut().enumerate() {
                let inf = info(t);
                let dx = _mm512_set1_ps(inf.dx);
                if ty == GgmlType::Q2K {
                    let packed = |j: usize| _mm512_cvtepu8_epi32(raw(j));
                    let sc = |j: usize| _mm512_and_si512(packed(j), nibble);
                    let isum = scaled_sum(&sums[..], t, sc, |_| 0, 16);
                    let mut mins = _mm512_setzero_si512();
                    for j in 0..16 {
                        let m = _mm512_srli_epi32::<4>(packed(j));
                        let sx = _mm512_set1_epi32(inf.base[j]);
                        mins = _mm512_add_epi32(mins, _mm512_mullo_epi32(m, sx));
                    }
                    *at = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dw, dx), *at);
                    *at = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(mins), _mm512_mul_ps(dm, dx), *at);
                } else {
                    let sc = |j: usize| _mm512_cvtepi8_epi32(raw(j));
                    let isum = scaled_sum(&sums[..], t, sc, |j| inf.base[j], 16);
                    *at = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dw, dx), *at);
                }
            }
        }
        for (t, a) in acc[..tile.m].iter().enumerate() {
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
    scratch: &mut Scratch,
    w: *const u8,
    nb: usize,
    tile: TokenTile<XsInfo>,
) {
    let Scratch { sums, levels } = scratch;
    // SAFETY: features and pointer ranges are the caller's contract; vector loads unaligned.
    unsafe {
        let mut acc = [_mm512_setzero_ps(); M];
        let table = _mm512_broadcast_i32x4(_mm_loadu_si128(IQ4NL_LEVELS.as_ptr().cast()));
        for b in 0..nb {
            let blk = w.add(b * IQ4XS_GROUP_BYTES);
            for (j, lv) in levels[..8].iter_mut().enumerate() {
                put_levels(&iq4xs_levels(blk, j, table), lv);
            }
            let a = |j: usize| tile.a(8 * b + j);
            let lv = |j: usize| levels[j].0.as_ptr();
            tile_products(tiles, 8, a, tile.k, lv, false, &mut sums[..]);
            let sc = |j: usize| {
                _mm512_cvtepi8_epi32(_mm_loadu_si128(blk.add(IQ4XS_SCALES + 16 * j).cast()))
            };
            let dw = _mm512_cvtph_ps(_mm256_loadu_si256(blk.cast()));
            for (t, at) in acc[..tile.m].iter_mut().enumerate() {
                let inf = tile.info.add(t * nb + b).read();
                let isum = scaled_sum(&sums[..], t, sc, |j| inf.base[j], 8);
                let scale = _mm512_mul_ps(dw, _mm512_set1_ps(inf.dx));
                *at = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), scale, *at);
            }
        }
        for (t, a) in acc[..tile.m].iter().enumerate() {
            _mm512_storeu_ps(tile.out.add(t * tile.out_stride), *a);
        }
    }
}
