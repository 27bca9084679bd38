//! AMX tile kernel over interleaved Q4_K and Q5_K weights ([`crate::matmul::Interleaved`]) for
//! up to 2 groups × 2 tiles of 16 tokens on the shared 2×2 pipeline
//! ([`super::interleaved_amx_pipe::pipeline`]): one `TDPBSUD` per (sub-block, token tile,
//! group) forms the 16 tokens × 16 rows sums `Σ u·x`; per chunk of 4 sub-blocks each token's
//! lane takes the rows' 6-bit scales (`vpmulld`) into the super-block's integer sum, and after
//! the super-block's last chunk runs the float step of [`super::interleaved_k`].
//!
//! `B` is a sub-block's levels unpacked from the interleaved chunks (low or high nibbles; Q5_K
//! ORs in the fifth bit) into the task's scratch, a chunk ahead; `A` is the tokens' Q8_K
//! values of the sub-block, packed by the driver. No weight copy.
//! Invariant (bits): every integer sum is exact (the VNNI kernel's lane values), and
//! `acc = fma(f32(Σ_j sc_j·Σ u·x), d·dx, acc)` then `acc = fma(-f32(Σ_j m_j·Σ x), dmin·dx, acc)`
//! run super-block by super-block from 0 as there: the [`crate::dot::sequential`] reference,
//! bit for bit, for any token tiling.

use std::arch::x86_64::*;

use super::interleaved_amx_pipe::{
    ChunkSums, Levels, Scratch, TokenTile, UNITS, acc_get, acc_put, chunk_isum, pipeline,
};
use super::interleaved_k::{KInfo, Q4K_GROUP_BYTES, Q5K_GROUP_BYTES};
use crate::amx::TileUnit;
use crate::matmul::interleave::Q4K_QUANTS;
use crate::matmul::interleave::{Q4K_DMIN, Q4K_MINS, Q4K_SCALES, Q5K_MASKS, Q5K_QUANTS};

/// `out[t][r] = dot(row r of group g, x[t])` for the 16 rows of each of the `GB` interleaved
/// Q4_K groups at `w[g]` (`q5`: Q5_K) and the tokens of the `TA` tiles `tt`, on `tiles`
/// (configured for `A` = `m` × 32 bytes).
///
/// # Safety
/// avx512f/bw/vl/vnni + avx2/fma/f16c; each `w[g]` points to `nb` group blocks of the format;
/// each tile's Q8_K activation rows, their `nb` [`KInfo`]s each and their 16 outputs per group
/// each are valid as described on [`TokenTile`] (outputs writable).
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(crate) unsafe fn group_amx_k4<U: TileUnit, const TA: usize, const GB: usize>(
    tiles: &mut U,
    scratch: &mut Scratch,
    q5: bool,
    w: [*const u8; GB],
    nb: usize,
    tt: [TokenTile<KInfo>; TA],
) {
    // SAFETY: forwarded.
    unsafe {
        if q5 {
            group_amx_k4_f::<U, true, TA, GB>(tiles, scratch, w, nb, tt)
        } else {
            group_amx_k4_f::<U, false, TA, GB>(tiles, scratch, w, nb, tt)
        }
    }
}

/// [`group_amx_k4`] for Q4_K or Q5_K (`Q5`).
///
/// # Safety
/// As [`group_amx_k4`].
// The closures inside take the features from here (not from an inlined caller).
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
#[inline]
unsafe fn group_amx_k4_f<U: TileUnit, const Q5: bool, const TA: usize, const GB: usize>(
    tiles: &mut U,
    scratch: &mut Scratch,
    w: [*const u8; GB],
    nb: usize,
    tt: [TokenTile<KInfo>; TA],
) {
    let (bytes, quants) = if Q5 {
        (Q5K_GROUP_BYTES, Q5K_QUANTS)
    } else {
        (Q4K_GROUP_BYTES, Q4K_QUANTS)
    };
    let Scratch {
        sums,
        levels,
        acc,
        isum,
    } = scratch;
    // SAFETY: features and pointer ranges are the caller's contract; vector loads unaligned.
    unsafe {
        let (low, sixteen) = (_mm512_set1_epi8(0x0F), _mm512_set1_epi8(16));
        let prep = |g: usize, u: usize, lv: &mut Levels| {
            let (blk, j) = (w[g].add(u / 8 * bytes), u % 8);
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
        };
        let b = |_: usize, _: usize, lv: &Levels| lv.0.as_ptr();
        let a = |ta: usize, u: usize| tt[ta].a(u);
        let consume = |q: usize, u0: usize, cnt: usize, s: &ChunkSums| {
            let tile = tt[q % 2];
            let (sb, j0) = (u0 / 8, u0 % 8);
            let blk = w[q / 2].add(sb * bytes);
            let sc: [__m512i; UNITS] = std::array::from_fn(|u| {
                _mm512_cvtepu8_epi32(_mm_loadu_si128(blk.add(Q4K_SCALES + 16 * (j0 + u)).cast()))
            });
            let last = j0 + cnt == 8;
            let dw = _mm512_cvtph_ps(_mm256_loadu_si256(blk.cast()));
            let dm = _mm512_cvtph_ps(_mm256_loadu_si256(blk.add(Q4K_DMIN).cast()));
            for t in 0..tile.m {
                let part = (j0 != 0).then_some(&isum[q].0[t]);
                let v = chunk_isum(s, q, t, cnt, part, &sc, |_| 0);
                if !last {
                    _mm512_store_si512(isum[q].0[t].as_mut_ptr().cast(), v);
                    continue;
                }
                let inf = tile.info.add(t * nb + sb).read();
                let mut mins = _mm512_setzero_si512();
                for k in 0..4 {
                    let pairs = _mm256_loadu_si256(blk.add(Q4K_MINS + 32 * k).cast());
                    let mv = _mm512_cvtepu8_epi16(pairs);
                    mins = _mm512_dpwssd_epi32(mins, mv, _mm512_set1_epi32(inf.sums[k]));
                }
                let dx = _mm512_set1_ps(inf.dx);
                let mut at = acc_get(acc, q, t, sb == 0);
                at = _mm512_fmadd_ps(_mm512_cvtepi32_ps(v), _mm512_mul_ps(dw, dx), at);
                at = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(mins), _mm512_mul_ps(dm, dx), at);
                acc_put(acc, q, t, sb + 1 == nb, &tile, at);
            }
        };
        let stride = tt[0].k;
        pipeline::<U, TA, GB>(
            tiles,
            sums,
            levels,
            8 * nb,
            a,
            stride,
            prep,
            b,
            false,
            consume,
        );
    }
}
