//! AVX-512 VNNI kernels over interleaved Q3_K and Q2_K weights ([`crate::matmul::Interleaved`])
//! against Q8_K activations, 16 rows at once. Both have 16 sub-blocks of 16 elements whose
//! 2-bit levels sit in 2-bit chunks (chunk `e % 16` holds element chunk `e`'s levels at bits
//! `2·(e / 16)`); Q3_K adds each level's third bit from a byte mask (`vmovdqu8` zero-masked),
//! so `u = q + 4·hbit`, and a sub-block's sum starts from the token's `-4·Σx` to become the exact
//! signed sum before its signed scale (`vpmulld`); Q2_K's levels are unsigned, its 4-bit scales
//! and mins share a byte, and the mins enter as `Σ_j m_j·Σx_j` (one `vpmulld` per sub-block).
//!
//! Invariant (batch invariance): lane `r` of token `t` runs, super-block by super-block from 0,
//! `acc = fma(f32(Σ_j sc_j·Σ v·x), d·dx, acc)`, then for Q2_K `acc = fma(-f32(Σ_j m_j·Σ x),
//! dmin·dx, acc)`, with exact integer sums, whatever the tile's token count: the order of
//! [`crate::dot::sequential`], bit for bit.

use std::arch::x86_64::*;

use super::interleaved_k::{Q6Info, add_scaled_sums, fma_super_block, signed_sub16};
use crate::matmul::interleave::{
    Q2K_BYTES, Q2K_DMIN, Q2K_LOW, Q2K_SCALES, Q3K_BYTES, Q3K_LOW, Q3K_MASKS, Q3K_SCALES,
};

/// Bytes of one Q8_K activation block, and the offset of its values.
const XB: usize = 292;
const XQ: usize = 4;

/// The 2-bit levels of element chunk `e` (elements `4e..4e + 4` of 16 rows) from the 2-bit
/// chunks at `low`.
///
/// # Safety
/// avx512f/bw enabled in the caller; `low` readable for 16 chunks of 64 bytes.
#[inline(always)]
pub(crate) unsafe fn two_bits(low: *const u8, e: usize) -> __m512i {
    // SAFETY: the caller's contract; the load is unaligned.
    unsafe {
        let raw = _mm512_loadu_si512(low.add(64 * (e % 16)).cast());
        let shifted = match e / 16 {
            0 => raw,
            1 => _mm512_srli_epi16::<2>(raw),
            2 => _mm512_srli_epi16::<4>(raw),
            _ => _mm512_srli_epi16::<6>(raw),
        };
        _mm512_and_si512(shifted, _mm512_set1_epi8(3))
    }
}

/// `out[t][r] = dot(row r of the group, x[t])` for the 16 rows of one interleaved Q3_K group;
/// `info[t]` holds each sub-block's `-4·Σx`.
///
/// # Safety
/// avx512f/bw/vl/vnni + avx2/fma/f16c; `w` points to `nb` Q3_K group blocks
/// ([`crate::matmul::interleave`]); each `x[t]` to `nb` Q8_K blocks, `info[t]` to their `nb`
/// [`Q6Info`]s; each `out[t]` to 16 writable f32.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(crate) unsafe fn group_q3k<const T: usize>(
    w: *const u8,
    nb: usize,
    x: [*const u8; T],
    info: [*const Q6Info; T],
    out: [*mut f32; T],
) {
    // SAFETY: features and pointer ranges are the caller's contract.
    unsafe {
        let levels = |blk: *const u8, e: usize| q3k_levels(blk, e);
        signed_sub16(w, nb, x, info, out, (Q3K_BYTES, Q3K_SCALES), levels);
    }
}

/// The levels `u = q + 4` of element chunk `e` (elements `4e..4e + 4` of 16 rows) of the Q3_K
/// group block at `blk`: the 2-bit levels with the third bit ORed in.
///
/// # Safety
/// avx512f/bw enabled in the caller; `blk` points to one Q3_K group block.
#[inline(always)]
pub(crate) unsafe fn q3k_levels(blk: *const u8, e: usize) -> __m512i {
    // SAFETY: the caller's contract; the loads are unaligned.
    unsafe {
        let m = blk.add(Q3K_MASKS + 8 * e).cast::<u64>().read_unaligned();
        _mm512_or_si512(
            two_bits(blk.add(Q3K_LOW), e),
            _mm512_maskz_mov_epi8(m, _mm512_set1_epi8(4)),
        )
    }
}

/// `out[t][r] = dot(row r of the group, x[t])` for the 16 rows of one interleaved Q2_K group;
/// `info[t]` holds each sub-block's `Σx` (not negated).
///
/// # Safety
/// As [`group_q3k`], with Q2_K group blocks.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(crate) unsafe fn group_q2k<const T: usize>(
    w: *const u8,
    nb: usize,
    x: [*const u8; T],
    info: [*const Q6Info; T],
    out: [*mut f32; T],
) {
    // SAFETY: features and pointer ranges are the caller's contract; all loads are unaligned.
    unsafe {
        let mut acc = [_mm512_setzero_ps(); T];
        let nibble = _mm512_set1_epi32(0xF);
        for b in 0..nb {
            let blk = w.add(b * Q2K_BYTES);
            let mut isum = [_mm512_setzero_si512(); T];
            let mut mins = [_mm512_setzero_si512(); T];
            for j in 0..16 {
                let mut wq = [_mm512_setzero_si512(); 4];
                for (c, v) in wq.iter_mut().enumerate() {
                    *v = two_bits(blk.add(Q2K_LOW), 4 * j + c);
                }
                let packed =
                    _mm512_cvtepu8_epi32(_mm_loadu_si128(blk.add(Q2K_SCALES + 16 * j).cast()));
                let sc = _mm512_and_si512(packed, nibble);
                let m = _mm512_srli_epi32::<4>(packed);
                let xq = x.map(|p| p.add(b * XB + XQ + 16 * j));
                add_scaled_sums(&wq, sc, xq, |_| 0, &mut isum);
                for t in 0..T {
                    let sx = _mm512_set1_epi32((*info[t].add(b)).base[j]);
                    mins[t] = _mm512_add_epi32(mins[t], _mm512_mullo_epi32(m, sx));
                }
            }
            let dw = _mm512_cvtph_ps(_mm256_loadu_si256(blk.cast()));
            fma_super_block(&mut acc, &isum, dw, |t| (*info[t].add(b)).dx);
            let dm = _mm512_cvtph_ps(_mm256_loadu_si256(blk.add(Q2K_DMIN).cast()));
            for t in 0..T {
                let scale = _mm512_mul_ps(dm, _mm512_set1_ps((*info[t].add(b)).dx));
                acc[t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(mins[t]), scale, acc[t]);
            }
        }
        for t in 0..T {
            _mm512_storeu_ps(out[t], acc[t]);
        }
    }
}
