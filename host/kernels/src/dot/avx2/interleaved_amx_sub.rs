//! AMX tile kernels over interleaved Q6_K, Q3_K, Q2_K weights (16-element sub-blocks,
//! [`crate::matmul::Interleaved`]) for up to 2 groups × 2 tiles of 16 tokens on the shared
//! 2×2 pipeline ([`super::interleaved_amx_pipe::pipeline`]): the sub-blocks' levels the VNNI
//! kernels build (into the task's scratch, a chunk ahead), one `TDPBSUD` per (sub-block, token
//! tile, group) (`A` is the tokens' Q8_K values packed by the driver) for the 16 tokens × 16
//! rows sums `Σ u·x`; per chunk of sub-blocks each token's lane adds its `base` and takes the
//! rows' scale (`vpmulld`) into the super-block's integer sum, and after the super-block's
//! last chunk runs the float step of [`super::interleaved_k`]. A 16-element sub-block costs a
//! whole tile product: about as fast as the VNNI kernels here, so only `MEMORIA_SIMD=amx` runs
//! them ([`crate::simd::amx_all`]).
//!
//! Invariant (bits): `isum += sc · (base + Σ u·x)` with exact integers, as
//! [`super::interleaved_k::add_scaled_sums`] forms it; then `acc = fma(f32(isum), d·dx, acc)`
//! (Q2_K: then `acc = fma(-f32(Σ_j m_j·Σ x), dmin·dx, acc)`) super-block by super-block from 0:
//! the [`crate::dot::sequential`] reference, bit for bit, for any token tiling.

use std::arch::x86_64::*;

use super::interleaved_amx_pipe::{
    ChunkSums, Levels, Scratch, TokenTile, UNITS, acc_get, acc_put, chunk_isum, pipeline,
};
use super::interleaved_k::{Q6Info, Q6K_GROUP_BYTES, q6k_levels};
use super::interleaved_k_low::{q3k_levels, two_bits};
use crate::amx::TileUnit;
use crate::matmul::interleave::{
    Q2K_BYTES, Q2K_DMIN, Q2K_LOW, Q2K_SCALES, Q3K_BYTES, Q3K_SCALES, Q6K_SCALES,
};
use crate::types::GgmlType;

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

/// `out[t][r] = dot(row r of group g, x[t])` for the 16 rows of each of the `GB` interleaved
/// Q6_K, Q3_K or Q2_K groups at `w[g]` (`ty`; another type is treated as Q6_K) and the tokens
/// of the `TA` tiles `tt`, on `tiles` (configured for `A` = `m` × 16 bytes); the infos as the
/// VNNI kernels take them.
///
/// # Safety
/// avx512f/bw/vl/vnni + avx2/fma/f16c; each `w[g]` points to `nb` group blocks of the format;
/// each tile's Q8_K activation rows, their `nb` [`Q6Info`]s each and their 16 outputs per
/// group each are valid as described on [`TokenTile`] (outputs writable).
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(crate) unsafe fn group_amx_sub16<U: TileUnit, const TA: usize, const GB: usize>(
    tiles: &mut U,
    scratch: &mut Scratch,
    ty: GgmlType,
    w: [*const u8; GB],
    nb: usize,
    tt: [TokenTile<Q6Info>; TA],
) {
    let (bytes, scales) = match ty {
        GgmlType::Q3K => (Q3K_BYTES, Q3K_SCALES),
        GgmlType::Q2K => (Q2K_BYTES, Q2K_SCALES),
        _ => (Q6K_GROUP_BYTES, Q6K_SCALES),
    };
    let q2 = ty == GgmlType::Q2K;
    let Scratch {
        sums,
        levels,
        acc,
        isum,
    } = scratch;
    // SAFETY: features and pointer ranges are the caller's contract; vector loads unaligned.
    unsafe {
        let nibble = _mm512_set1_epi32(0xF);
        let prep = |g: usize, u: usize, lv: &mut Levels| {
            let (blk, j) = (w[g].add(u / 16 * bytes), u % 16);
            let wq: [__m512i; 4] = std::array::from_fn(|c| match ty {
                GgmlType::Q3K => q3k_levels(blk, 4 * j + c),
                GgmlType::Q2K => two_bits(blk.add(Q2K_LOW), 4 * j + c),
                _ => q6k_levels(blk, 4 * j + c),
            });
            put_levels(&wq, lv);
        };
        let b = |_: usize, _: usize, lv: &Levels| lv.0.as_ptr();
        let a = |ta: usize, u: usize| tt[ta].a(u);
        let consume = |q: usize, u0: usize, cnt: usize, s: &ChunkSums| {
            let tile = tt[q % 2];
            let (sb, j0) = (u0 / 16, u0 % 16);
            let blk = w[q / 2].add(sb * bytes);
            let raw = |j: usize| _mm_loadu_si128(blk.add(scales + 16 * j).cast());
            let sc: [__m512i; UNITS] = std::array::from_fn(|u| {
                if q2 {
                    _mm512_and_si512(_mm512_cvtepu8_epi32(raw(j0 + u)), nibble)
                } else {
                    _mm512_cvtepi8_epi32(raw(j0 + u))
                }
            });
            let last = j0 + cnt == 16;
            let dw = _mm512_cvtph_ps(_mm256_loadu_si256(blk.cast()));
            let dm = _mm512_cvtph_ps(_mm256_loadu_si256(blk.add(Q2K_DMIN).cast()));
            for t in 0..tile.m {
                let inf = tile.info.add(t * nb + sb);
                let part = (j0 != 0).then_some(&isum[q].0[t]);
                let base = |u: usize| if q2 { 0 } else { (*inf).base[j0 + u] };
                let v = chunk_isum(s, q, t, cnt, part, &sc, base);
                if !last {
                    _mm512_store_si512(isum[q].0[t].as_mut_ptr().cast(), v);
                    continue;
                }
                let dx = _mm512_set1_ps((*inf).dx);
                let mut at = acc_get(acc, q, t, sb == 0);
                at = _mm512_fmadd_ps(_mm512_cvtepi32_ps(v), _mm512_mul_ps(dw, dx), at);
                if q2 {
                    let mut mins = _mm512_setzero_si512();
                    for j in 0..16 {
                        let m = _mm512_srli_epi32::<4>(_mm512_cvtepu8_epi32(raw(j)));
                        let sx = _mm512_set1_epi32((*inf).base[j]);
                        mins = _mm512_add_epi32(mins, _mm512_mullo_epi32(m, sx));
                    }
                    at = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(mins), _mm512_mul_ps(dm, dx), at);
                }
                acc_put(acc, q, t, sb + 1 == nb, &tile, at);
            }
        };
        let stride = tt[0].k;
        pipeline::<U, TA, GB>(
            tiles,
            sums,
            levels,
            16 * nb,
            a,
            stride,
            prep,
            b,
            false,
            consume,
        );
    }
}
