//! AMX tile kernel over interleaved Q4_K and Q5_K weights ([`crate::matmul::Interleaved`]) for
//! 16 tokens at a time: per 32-element sub-block, one `TDPBSUD` forms the 16 tokens × 16 rows
//! sums `Σ u·x`, each token's lane then takes the rows' 6-bit scale (`vpmulld`) into the
//! super-block's integer sum, and the float step of [`super::interleaved_k`] runs once per
//! super-block.
//!
//! `B` is a sub-block's levels unpacked from the interleaved chunks (low or high nibbles; Q5_K
//! ORs in the fifth bit) into a 512-byte scratch; `A` is the 16 tokens' Q8_K values of the
//! sub-block, read in place (tile stride = activation row bytes). No weight copy.
//! Invariant (bits): every integer sum is exact (the VNNI kernel's lane values), and
//! `acc = fma(f32(Σ_j sc_j·Σ u·x), d·dx, acc)` then `acc = fma(-f32(Σ_j m_j·Σ x), dmin·dx, acc)`
//! run super-block by super-block from 0 as there: the [`crate::dot::sequential`] reference,
//! bit for bit, for any token tiling.

use std::arch::x86_64::*;

use super::interleaved_amx::TokenTile;
use super::interleaved_k::{KInfo, Q4K_GROUP_BYTES, Q5K_GROUP_BYTES};
use crate::amx::{CBuf, M, TileUnit};
use crate::matmul::interleave::Q4K_QUANTS;
use crate::matmul::interleave::{Q4K_DMIN, Q4K_MINS, Q4K_SCALES, Q5K_MASKS, Q5K_QUANTS};

/// Bytes of one Q8_K activation block, and the offset of its values.
const XB: usize = 292;
const XQ: usize = 4;

/// A sub-block's unpacked levels: tile `B`, 8 rows of 64 bytes.
#[repr(C, align(64))]
struct Levels([u8; 512]);

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
    q5: bool,
    w: *const u8,
    nb: usize,
    tile: TokenTile<KInfo>,
) {
    // SAFETY: forwarded.
    unsafe {
        if q5 {
            group_amx_k4_f::<U, true>(tiles, w, nb, tile)
        } else {
            group_amx_k4_f::<U, false>(tiles, w, nb, tile)
        }
    }
}

/// [`group_amx_k4`] for Q4_K or Q5_K (`Q5`).
///
/// # Safety
/// As [`group_amx_k4`].
#[inline(always)]
unsafe fn group_amx_k4_f<U: TileUnit, const Q5: bool>(
    tiles: &mut U,
    w: *const u8,
    nb: usize,
    tile: TokenTile<KInfo>,
) {
    let (bytes, quants) = if Q5 {
        (Q5K_GROUP_BYTES, Q5K_QUANTS)
    } else {
        (Q4K_GROUP_BYTES, Q4K_QUANTS)
    };
    let mut levels = Levels([0; 512]);
    let mut sums = CBuf::default();
    // SAFETY: features and pointer ranges are the caller's contract; vector loads unaligned.
    unsafe {
        let mut acc = [_mm512_setzero_ps(); M];
        let (low, sixteen) = (_mm512_set1_epi8(0x0F), _mm512_set1_epi8(16));
        for b in 0..nb {
            let blk = w.add(b * bytes);
            let mut isum = [_mm512_setzero_si512(); M];
            for j in 0..8 {
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
                    _mm512_store_si512(levels.0.as_mut_ptr().add(64 * c).cast(), v);
                }
                tiles.zero_c();
                tiles.load_a(tile.x.add(b * XB + XQ + 32 * j), tile.x_stride);
                tiles.load_b(levels.0.as_ptr());
                tiles.dot();
                tiles.store_c(&mut sums);
                let sc = _mm512_cvtepu8_epi32(_mm_loadu_si128(blk.add(Q4K_SCALES + 16 * j).cast()));
                for t in 0..M {
                    let s = _mm512_load_si512(sums.0[t].as_ptr().cast());
                    isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(s, sc));
                }
            }
            let dw = _mm512_cvtph_ps(_mm256_loadu_si256(blk.cast()));
            let dm = _mm512_cvtph_ps(_mm256_loadu_si256(blk.add(Q4K_DMIN).cast()));
            for t in 0..M {
                let inf = tile.info.add(t * nb + b).read();
                let mut mins = _mm512_setzero_si512();
                for k in 0..4 {
                    let pairs = _mm256_loadu_si256(blk.add(Q4K_MINS + 32 * k).cast());
                    let mv = _mm512_cvtepu8_epi16(pairs);
                    mins = _mm512_dpwssd_epi32(mins, mv, _mm512_set1_epi32(inf.sums[k]));
                }
                let dx = _mm512_set1_ps(inf.dx);
                acc[t] =
                    _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_mul_ps(dw, dx), acc[t]);
                acc[t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(mins), _mm512_mul_ps(dm, dx), acc[t]);
            }
        }
        for (t, a) in acc.iter().enumerate() {
            _mm512_storeu_ps(tile.out.add(t * tile.out_stride), *a);
        }
    }
}
