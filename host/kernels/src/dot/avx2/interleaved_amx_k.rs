//! AMX tile kernel over interleaved Q4_K and Q5_K weights ([`crate::matmul::Interleaved`]) for
//! 16 tokens at a time: per super-block, the 8 sub-blocks' levels, then one `TDPBSUD` each
//! ([`super::interleaved_amx::tile_products`]) forms the 16 tokens × 16 rows sums `Σ u·x`, then
//! each token's lane takes the rows' 6-bit scales (`vpmulld`) into the super-block's integer
//! sum and runs the float step of [`super::interleaved_k`].
//!
//! `B` is a sub-block's levels unpacked from the interleaved chunks (low or high nibbles; Q5_K
//! ORs in the fifth bit) into the task's scratch; `A` is the 16 tokens' Q8_K values of the
//! sub-block, packed by the driver. No weight copy.
//! Invariant (bits): every integer sum is exact (the VNNI kernel's lane values), and
//! `acc = fma(f32(Σ_j sc_j·Σ u·x), d·dx, acc)` then `acc = fma(-f32(Σ_j m_j·Σ x), dmin·dx, acc)`
//! run super-block by super-block from 0 as there: the [`crate::dot::sequential`] reference,
//! bit for bit, for any token tiling.

use std::arch::x86_64::*;

use super::interleaved_amx::{Scratch, TokenTile, tile_products};
use super::interleaved_k::{KInfo, Q4K_GROUP_BYTES, Q5K_GROUP_BYTES};
use crate::amx::{M, TileUnit};
use crate::matmul::interleave::Q4K_QUANTS;
use crate::matmul::interleave::{Q4K_DMIN, Q4K_MINS, Q4K_SCALES, Q5K_MASKS, Q5K_QUANTS};

/// `out[t][r] = dot(row r of the group, x[t])` for the 16 rows of one interleaved Q4_K group
/// (`q5`: Q5_K) and the 16 tokens of `tile`, on `tiles` (configured for `A` = 16 × 32 bytes).
///
/// # Safety
/// avx512f/bw/vl/vnni + avx2/fma/f16c; `w` points to `nb` group blocks of the format; the
/// tile's 16 Q8_K activation rows, their `nb` [`KInfo`]s each and their 16 outputs each are
/// valid as described on [`TokenTile`] (outputs writable).
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(crate) unsafe fn group_amx_k4<U: TileUnit>(
    tiles: &mut U,
    scratch: &mut Scratch,
    q5: bool,
    w: *const u8,
    nb: usize,
    tile: TokenTile<KInfo>,
) {
    // SAFETY: forwarded.
    unsafe {
        if q5 {
            group_amx_k4_f::<U, true>(tiles, scratch, w, nb, tile)
        } else {
            group_amx_k4_f::<U, false>(tiles, scratch, w, nb, tile)
        }
    }
}

/// [`group_amx_k4`] for Q4_K or Q5_K (`Q5`): per super-block, the 8 sub-blocks' levels, then
/// their 8 tile products ([`tile_products`]), then each token's scale and float steps.
///
/// # Safety
/// As [`group_amx_k4`].
#[inline(always)]
unsafe fn group_amx_k4_f<U: TileUnit, const Q5: bool>(
    tiles: &mut U,
    scratch: &mut Scratch,
    w: *const u8,
    nb: usize,
    tile: TokenTile<KInfo>,
) {
    let (bytes, quants) = if Q5 {
        (Q5K_GROUP_BYTES, Q5K_QUANTS)
    } else {
        (Q4K_GROUP_BYTES, Q4K_QUANTS)
    };
    let Scratch { sums, levels } = scratch;
    // SAFETY: features and pointer ranges are the caller's contract; vector loads unaligned.
    unsafe {
        let mut acc = [_mm512_setzero_ps(); M];
        let (low, sixteen) = (_mm512_set1_epi8(0x0F), _mm512_set1_epi8(16));
        for b in 0..nb {
            let blk = w.add(b * bytes);
            for (j, lv) in levels[..8].iter_mut().enumerate() {
                let chunks = blk.add(quants + 64 * 8 * (j / 2));
                for c in 0..8 {
                    let raw = _mm512_loadu_si512(chunks.add(64 * c).cast());
                    let mut v = if j % 2 == 0 {
                        _mm512_and_si512(raw, low)
                    } else {
                        _mm512_and_si512(_mm512_srli_epi16::<4>(raw), low)
                    };
                    if Q5 {
                        let m = blk
                            .add(Q5K_MASKS + 8 * (8 * j + c))
                            .cast::<u64>()
                            .read_unaligned();
                        v = _mm512_or_si512(v, _mm512_maskz_mov_epi8(m, sixteen));
                    }
                    _mm512_store_si512(lv.0.as_mut_ptr().add(64 * c).cast(), v);
                }
            }
            let a = |j: usize| tile.a(8 * b + j);
            let lv = |j: usize| levels[j].0.as_ptr();
            tile_products(tiles, 8, a, tile.k, lv, false, &mut sums[..]);
            let sc: [__m512i; 8] = std::array::from_fn(|j| {
                _mm512_cvtepu8_epi32(_mm_loadu_si128(blk.add(Q4K_SCALES + 16 * j).cast()))
            });
            let dw = _mm512_cvtph_ps(_mm256_loadu_si256(blk.cast()));
            let dm = _mm512_cvtph_ps(_mm256_loadu_si256(blk.add(Q4K_DMIN).cast()));
            for (t, at) in acc[..tile.m].iter_mut().enumerate() {
                let mut isum = _mm512_setzero_si512();
                for (j, scj) in sc.iter().enumerate() {
                    let s = _mm512_load_si512(sums[j].0[t].as_ptr().cast());
                    isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(s, *scj));
                }
                let inf = tile.info.add(t * nb + b).read();
                let mut mins = _mm512_setzero_si512();
                for k in 0..4 {
                    let pairs = _mm256_loadu_si256(blk.add(Q4K_MINS + 32 * k).cast());
                    let mv = _mm512_cvtepu8_epi16(pairs);
                    mins = _mm512_dpwssd_epi32(mins, mv, _mm512_set1_epi32(inf.sums[k]));
                }
                let dx = _mm512_set1_ps(inf.dx);
                *at = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dw, dx), *at);
                *at = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(mins), _mm512_mul_ps(dm, dx), *at);
            }
        }
        for (t, a) in acc[..tile.m].iter().enumerate() {
            _mm512_storeu_ps(tile.out.add(t * tile.out_stride), *a);
        }
    }
}
