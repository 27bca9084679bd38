//! AVX2 kernels (no AVX-512) over interleaved Q4_K and Q5_K weights against Q8_K activations:
//! the 512-bit kernels' arithmetic ([`super::interleaved_k`]) on each 8-row half of a group.
//! Per sub-block, 8 `maddubs` of the unsigned levels (Q4_K ≤ 15: all 8 chunks add up in i16,
//! `8 · 2 · 15 · 128` < 2^15; Q5_K ≤ 31: 4 at a time) and one `madd` give the exact integer
//! sums, `mullo` applies the 8 rows' 6-bit scales; the mins enter through one `madd` per
//! sub-block pair of the rows' min pairs against the token's sub-block sums.
//!
//! Invariant (bits): lane `r` of token `t` runs, super-block by super-block from 0,
//! `acc = fma(f32(Σ_j sc_j·Σ u·x), d·dx, acc)` then `acc = fma(-f32(Σ_j m_j·Σ x), dmin·dx, acc)`
//! with exact integer sums, whatever the tile's token count: the order of
//! [`crate::dot::sequential`], the 512-bit kernels' bits.

use std::arch::x86_64::*;

use super::interleaved_avx2::{SubTile, chunk_sums, high_bits, in_token_tiles};
use super::interleaved_k::{KInfo, Q4K_GROUP_BYTES, Q5K_GROUP_BYTES};
use crate::matmul::interleave::{
    Q4K_DMIN, Q4K_MINS, Q4K_QUANTS, Q4K_SCALES, Q5K_MASKS, Q5K_QUANTS,
};

/// Bytes of one Q8_K activation block, and the offset of its values.
const XB: usize = 292;
const XQ: usize = 4;

/// Half `h` (rows `8h..8h + 8`) of one group × `T` (≤ [`TOKENS`](super::interleaved_avx2::TOKENS)) tokens.
///
/// # Safety
/// As [`group_k4_avx2`].
#[inline(always)]
unsafe fn half_tile<const T: usize, const Q5: bool>(
    w: *const u8,
    nb: usize,
    h: usize,
    x: [*const u8; T],
    info: [*const KInfo; T],
    out: [*mut f32; T],
) {
    let (bytes, quants) = if Q5 {
        (Q5K_GROUP_BYTES, Q5K_QUANTS)
    } else {
        (Q4K_GROUP_BYTES, Q4K_QUANTS)
    };
    // Chunks whose i16 pair sums add up before one `madd`.
    let chain = if Q5 { 4 } else { 8 };
    // SAFETY: features and pointer ranges are the caller's contract; all loads are unaligned.
    unsafe {
        let low = _mm256_set1_epi8(0x0F);
        let mut acc = [_mm256_setzero_ps(); T];
        for b in 0..nb {
            let blk = w.add(b * bytes);
            let mut isum = [_mm256_setzero_si256(); T];
            for j in 0..8 {
                let chunks = blk.add(quants + 64 * 8 * (j / 2) + 32 * h);
                let mut wq = [_mm256_setzero_si256(); 8];
                for (c, v) in wq.iter_mut().enumerate() {
                    let raw = _mm256_loadu_si256(chunks.add(64 * c).cast());
                    *v = if j % 2 == 0 {
                        _mm256_and_si256(raw, low)
                    } else {
                        _mm256_and_si256(_mm256_srli_epi16::<4>(raw), low)
                    };
                    if Q5 {
                        let m = blk
                            .add(Q5K_MASKS + 8 * (8 * j + c))
                            .cast::<u64>()
                            .read_unaligned();
                        *v = _mm256_or_si256(*v, high_bits((m >> (32 * h)) as u32, 16));
                    }
                }
                let sc = _mm256_cvtepu8_epi32(_mm_loadl_epi64(
                    blk.add(Q4K_SCALES + 16 * j + 8 * h).cast(),
                ));
                for t in 0..T {
                    let xq = x[t].add(b * XB + XQ + 32 * j);
                    let s = chunk_sums(_mm256_setzero_si256(), &wq, None, xq, chain);
                    isum[t] = _mm256_add_epi32(isum[t], _mm256_mullo_epi32(s, sc));
                }
            }
            let dw = _mm256_cvtph_ps(_mm_loadu_si128(blk.add(16 * h).cast()));
            let dm = _mm256_cvtph_ps(_mm_loadu_si128(blk.add(Q4K_DMIN + 16 * h).cast()));
            for t in 0..T {
                let inf = info[t].add(b).read();
                let mut mins = _mm256_setzero_si256();
                for k in 0..4 {
                    let pairs = _mm_loadu_si128(blk.add(Q4K_MINS + 32 * k + 16 * h).cast());
                    let mv = _mm256_cvtepu8_epi16(pairs);
                    let m = _mm256_madd_epi16(mv, _mm256_set1_epi32(inf.sums[k]));
                    mins = _mm256_add_epi32(mins, m);
                }
                let dx = _mm256_set1_ps(inf.dx);
                acc[t] =
                    _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_mul_ps(dw, dx), acc[t]);
                acc[t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mins), _mm256_mul_ps(dm, dx), acc[t]);
            }
        }
        for t in 0..T {
            _mm256_storeu_ps(out[t].add(8 * h), acc[t]);
        }
    }
}

/// `out[t][r] = dot(row r of the group, x[t])` for the 16 rows of one interleaved Q4_K group
/// (Q5_K where `q5`), on AVX2: the bits of [`super::interleaved_k::group_q4k`] /
/// [`super::interleaved_k::group_q5k`].
///
/// # Safety
/// avx2/fma/f16c; `w` points to `nb` group blocks of the format
/// ([`crate::matmul::interleave`]); each `x[t]` to `nb` Q8_K blocks, `info[t]` to their `nb`
/// [`KInfo`]s; each `out[t]` to 16 writable f32.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn group_k4_avx2<const T: usize>(
    q5: bool,
    w: *const u8,
    nb: usize,
    x: [*const u8; T],
    info: [*const KInfo; T],
    out: [*mut f32; T],
) {
    // SAFETY: forwarded.
    unsafe { in_token_tiles(&Group { q5, w, nb }, x, info, out) }
}

/// One Q4_K / Q5_K (`q5`) group (`nb` super-blocks at `w`) as a [`SubTile`].
struct Group {
    q5: bool,
    w: *const u8,
    nb: usize,
}

impl SubTile<KInfo> for Group {
    #[inline(always)]
    unsafe fn run<const C: usize>(
        &self,
        h: usize,
        x: [*const u8; C],
        info: [*const KInfo; C],
        out: [*mut f32; C],
    ) {
        // SAFETY: forwarded.
        unsafe {
            if self.q5 {
                half_tile::<C, true>(self.w, self.nb, h, x, info, out);
            } else {
                half_tile::<C, false>(self.w, self.nb, h, x, info, out);
            }
        }
    }
}
