//! AVX-512 VNNI kernel over interleaved IQ4_XS weights ([`crate::matmul::Interleaved`]) against
//! Q8_K activations: per 32-element sub-block, one byte shuffle turns 4-bit indices into the
//! table's values + 128 for 16 rows at once, 8 `vpdpbusd` sum them against the token's int8
//! values from the token's `-128·Σx` (so the i32 lanes are the exact signed sums), and one
//! `vpmulld` applies the 16 rows' signed 6-bit scales. The float step runs once per 256
//! elements.
//!
//! Invariant (batch invariance): lane `r` of token `t` runs, super-block by super-block from 0,
//! `acc = fma(f32(Σ_j sc_j·Σ v·x), d·dx, acc)` with exact integer sums, whatever the tile's
//! token count: the order of [`crate::dot::sequential`], bit for bit.

use std::arch::x86_64::*;

use super::interleaved_k::{add_scaled_sums, fma_super_block};
use crate::matmul::interleave::{IQ4XS_QUANTS, IQ4XS_SCALES};

/// Per token and super-block: the activation scale and each sub-block's `-128·Σx`.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
pub(crate) struct XsInfo {
    pub dx: f32,
    pub base: [i32; 8],
}

/// Bytes of one IQ4_XS group block.
pub(crate) const IQ4XS_GROUP_BYTES: usize = IQ4XS_QUANTS + 32 * 64;
/// Bytes of one Q8_K activation block, and the offset of its values.
const XB: usize = 292;
const XQ: usize = 4;

/// IQ4_NL's table as unsigned levels (`value + 128`), for `vpshufb` (repeated per 128-bit lane).
pub(crate) const IQ4NL_LEVELS: [u8; 16] = {
    let mut u = [0u8; 16];
    let mut i = 0;
    while i < 16 {
        u[i] = (crate::quant::KVALUES_IQ4NL[i] as i16 + 128) as u8;
        i += 1;
    }
    u
};

/// `out[t][r] = dot(row r of the group, x[t])` for the 16 rows of one interleaved IQ4_XS group.
///
/// # Safety
/// avx512f/bw/vl/vnni + avx2/fma/f16c; `w` points to `nb` IQ4_XS group blocks
/// ([`crate::matmul::interleave`]); each `x[t]` to `nb` Q8_K blocks, `info[t]` to their `nb`
/// [`XsInfo`]s; each `out[t]` to 16 writable f32.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(crate) unsafe fn group_iq4xs<const T: usize>(
    w: *const u8,
    nb: usize,
    x: [*const u8; T],
    info: [*const XsInfo; T],
    out: [*mut f32; T],
) {
    // SAFETY: features and pointer ranges are the caller's contract; all loads are unaligned.
    unsafe {
        let mut acc = [_mm512_setzero_ps(); T];
        let table = _mm512_broadcast_i32x4(_mm_loadu_si128(IQ4NL_LEVELS.as_ptr().cast()));
        for b in 0..nb {
            let blk = w.add(b * IQ4XS_GROUP_BYTES);
            let mut isum = [_mm512_setzero_si512(); T];
            for j in 0..8 {
                let wq = iq4xs_levels(blk, j, table);
                let sc =
                    _mm512_cvtepi8_epi32(_mm_loadu_si128(blk.add(IQ4XS_SCALES + 16 * j).cast()));
                let xq = x.map(|p| p.add(b * XB + XQ + 32 * j));
                let base = |t: usize| (*info[t].add(b)).base[j];
                add_scaled_sums(&wq, sc, xq, base, &mut isum);
            }
            let dw = _mm512_cvtph_ps(_mm256_loadu_si256(blk.cast()));
            fma_super_block(&mut acc, &isum, dw, |t| (*info[t].add(b)).dx);
        }
        for t in 0..T {
            _mm512_storeu_ps(out[t], acc[t]);
        }
    }
}

/// The unsigned levels (table value + 128) of sub-block `j` of the IQ4_XS group block at
/// `blk` as 8 chunks of 4 elements × 16 rows; `table` holds [`IQ4NL_LEVELS`] in every lane.
///
/// # Safety
/// avx512f/bw enabled in the caller; `blk` points to one IQ4_XS group block.
#[inline(always)]
pub(crate) unsafe fn iq4xs_levels(blk: *const u8, j: usize, table: __m512i) -> [__m512i; 8] {
    // SAFETY: the caller's contract; the loads are unaligned.
    unsafe {
        let low = _mm512_set1_epi8(0x0F);
        let chunks = blk.add(IQ4XS_QUANTS + 64 * 8 * (j / 2));
        let mut wq = [_mm512_setzero_si512(); 8];
        for (c, v) in wq.iter_mut().enumerate() {
            let raw = _mm512_loadu_si512(chunks.add(64 * c).cast());
            let idx = if j.is_multiple_of(2) {
                _mm512_and_si512(raw, low)
            } else {
                _mm512_and_si512(_mm512_srli_epi16::<4>(raw), low)
            };
            *v = _mm512_shuffle_epi8(table, idx);
        }
        wq
    }
}

/// The [`XsInfo`]s of one Q8_K activation row (`nb` blocks) into `dst`.
pub(crate) fn infos(row: &[u8], dst: &mut [XsInfo]) {
    for (blk, slot) in row.chunks_exact(XB).zip(dst.iter_mut()) {
        let bsum = |g: usize| i16::from_le_bytes([blk[260 + 2 * g], blk[261 + 2 * g]]) as i32;
        *slot = XsInfo {
            dx: f32::from_le_bytes([blk[0], blk[1], blk[2], blk[3]]),
            base: std::array::from_fn(|j| -128 * (bsum(2 * j) + bsum(2 * j + 1))),
        };
    }
}
