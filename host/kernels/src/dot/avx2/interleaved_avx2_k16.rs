//! AVX2 kernels (no AVX-512) over interleaved Q6_K, Q3_K, Q2_K and IQ4_XS weights against Q8_K
//! activations: the 512-bit kernels' arithmetic ([`super::interleaved_k`],
//! [`super::interleaved_k_low`], [`super::interleaved_iq4xs`]) on each 8-row half of a group.
//!
//! Q6_K, Q3_K and Q2_K: per 16-element sub-block, 4 `maddubs` of the unsigned levels against
//! the token's int8 values (Q6_K ≤ 63: two chunks add up in i16, `2 · 2 · 63 · 127` < 2^15;
//! Q3_K ≤ 7 and Q2_K ≤ 3: all four) and one `madd` per i16 sum give the exact integer sums;
//! Q6_K and Q3_K start them from the token's `-K·Σx` (so they are the signed sums) and `mullo`
//! applies the 8 rows' signed scales; Q2_K's mins enter as `Σ_j m_j·Σx_j` (one `mullo` per
//! sub-block). IQ4_XS's table values reach ±127, so it runs signed as IQ4_NL does on AVX2
//! (`maddubs(|v|, sign(x, v))`, exact for activations in [-127, 127], Q8_K's range), each
//! chunk's pair sums widened by its own `madd`.
//!
//! Invariant (bits): lane `r` of token `t` runs, super-block by super-block from 0,
//! `acc = fma(f32(Σ_j sc_j·Σ v·x), d·dx, acc)`, then for Q2_K `acc = fma(-f32(Σ_j m_j·Σ x),
//! dmin·dx, acc)`, with exact integer sums, whatever the tile's token count: the order of
//! [`crate::dot::sequential`], the 512-bit kernels' bits.

use std::arch::x86_64::*;

use super::interleaved::IQ4_NL;
use super::interleaved_avx2::{SubTile, chunk_sums, high_bits, in_token_tiles, signed_table};
use super::interleaved_iq4xs::{IQ4XS_GROUP_BYTES, XsInfo};
use super::interleaved_k::{Q6Info, Q6K_GROUP_BYTES};
use crate::matmul::interleave::{
    IQ4XS_QUANTS, IQ4XS_SCALES, Q2K_BYTES, Q2K_DMIN, Q2K_LOW, Q2K_SCALES, Q3K_BYTES, Q3K_LOW,
    Q3K_MASKS, Q3K_SCALES, Q6K_HIGH, Q6K_LOW, Q6K_SCALES,
};
use crate::types::GgmlType;

/// Bytes of one Q8_K activation block, and the offset of its values.
const XB: usize = 292;
const XQ: usize = 4;

/// The formats of [`group_k16_avx2`].
const Q6K: u8 = 0;
const Q3K: u8 = 1;
const Q2K: u8 = 2;

/// The unsigned levels of element chunk `e` (elements `4e..4e + 4`) of half `h` (rows
/// `8h..8h + 8`) of the group block at `blk` of format `F`: Q6_K's `q + 32` from its nibble and
/// top-bit chunks, Q3_K's `q + 4` from its 2-bit chunks and third-bit masks, Q2_K's 2-bit levels.
///
/// # Safety
/// avx2; `blk` points to one group block of the format.
#[inline(always)]
unsafe fn levels<const F: u8>(blk: *const u8, e: usize, h: usize) -> __m256i {
    // SAFETY: the block's bytes are readable (caller); all loads unaligned.
    unsafe {
        if F == Q6K {
            let low = _mm256_set1_epi8(0x0F);
            let lo = _mm256_loadu_si256(blk.add(Q6K_LOW + 64 * (e % 32) + 32 * h).cast());
            let lo = if e < 32 {
                _mm256_and_si256(lo, low)
            } else {
                _mm256_and_si256(_mm256_srli_epi16::<4>(lo), low)
            };
            let hi = _mm256_loadu_si256(blk.add(Q6K_HIGH + 64 * (e % 16) + 32 * h).cast());
            let hi = match e / 16 {
                0 => _mm256_slli_epi16::<4>(hi),
                1 => _mm256_slli_epi16::<2>(hi),
                2 => hi,
                _ => _mm256_srli_epi16::<2>(hi),
            };
            return _mm256_or_si256(lo, _mm256_and_si256(hi, _mm256_set1_epi8(0x30)));
        }
        let at = if F == Q3K { Q3K_LOW } else { Q2K_LOW };
        let raw = _mm256_loadu_si256(blk.add(at + 64 * (e % 16) + 32 * h).cast());
        let shifted = match e / 16 {
            0 => raw,
            1 => _mm256_srli_epi16::<2>(raw),
            2 => _mm256_srli_epi16::<4>(raw),
            _ => _mm256_srli_epi16::<6>(raw),
        };
        let two = _mm256_and_si256(shifted, _mm256_set1_epi8(3));
        if F == Q3K {
            let m = blk.add(Q3K_MASKS + 8 * e).cast::<u64>().read_unaligned();
            _mm256_or_si256(two, high_bits((m >> (32 * h)) as u32, 4))
        } else {
            two
        }
    }
}

/// Half `h` of one Q6_K / Q3_K / Q2_K group × `T` (≤ [`TOKENS`](super::interleaved_avx2::TOKENS))
/// tokens.
///
/// # Safety
/// As [`group_k16_avx2`].
#[inline(always)]
unsafe fn half_tile<const T: usize, const F: u8>(
    w: *const u8,
    nb: usize,
    h: usize,
    x: [*const u8; T],
    info: [*const Q6Info; T],
    out: [*mut f32; T],
) {
    let (bytes, scales) = match F {
        Q6K => (Q6K_GROUP_BYTES, Q6K_SCALES),
        Q3K => (Q3K_BYTES, Q3K_SCALES),
        _ => (Q2K_BYTES, Q2K_SCALES),
    };
    // Chunks whose i16 pair sums add up before one `madd` (see the module doc).
    let chain = if F == Q6K { 2 } else { 4 };
    // SAFETY: features and pointer ranges are the caller's contract; all loads are unaligned.
    unsafe {
        let mut acc = [_mm256_setzero_ps(); T];
        for b in 0..nb {
            let blk = w.add(b * bytes);
            let mut isum = [_mm256_setzero_si256(); T];
            let mut mins = [_mm256_setzero_si256(); T];
            for j in 0..16 {
                // Plain loops, not closures: a closure does not inherit `target_feature`, and
                // its intrinsics would not inline.
                let mut wq = [_mm256_setzero_si256(); 4];
                for (c, v) in wq.iter_mut().enumerate() {
                    *v = levels::<F>(blk, 4 * j + c, h);
                }
                let raw = _mm_loadl_epi64(blk.add(scales + 16 * j + 8 * h).cast());
                let (sc, m) = if F == Q2K {
                    let packed = _mm256_cvtepu8_epi32(raw);
                    let sc = _mm256_and_si256(packed, _mm256_set1_epi32(0xF));
                    (sc, _mm256_srli_epi32::<4>(packed))
                } else {
                    (_mm256_cvtepi8_epi32(raw), _mm256_setzero_si256())
                };
                for t in 0..T {
                    let xq = x[t].add(b * XB + XQ + 16 * j);
                    let base = (*info[t].add(b)).base[j];
                    let start = if F == Q2K {
                        _mm256_setzero_si256()
                    } else {
                        _mm256_set1_epi32(base)
                    };
                    let s = chunk_sums(start, &wq, None, xq, chain);
                    isum[t] = _mm256_add_epi32(isum[t], _mm256_mullo_epi32(s, sc));
                    if F == Q2K {
                        let sx = _mm256_mullo_epi32(m, _mm256_set1_epi32(base));
                        mins[t] = _mm256_add_epi32(mins[t], sx);
                    }
                }
            }
            let dw = _mm256_cvtph_ps(_mm_loadu_si128(blk.add(16 * h).cast()));
            for t in 0..T {
                let dx = _mm256_set1_ps((*info[t].add(b)).dx);
                acc[t] =
                    _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_mul_ps(dw, dx), acc[t]);
            }
            if F == Q2K {
                let dm = _mm256_cvtph_ps(_mm_loadu_si128(blk.add(Q2K_DMIN + 16 * h).cast()));
                for t in 0..T {
                    let dx = _mm256_set1_ps((*info[t].add(b)).dx);
                    let scale = _mm256_mul_ps(dm, dx);
                    acc[t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mins[t]), scale, acc[t]);
                }
            }
        }
        for t in 0..T {
            _mm256_storeu_ps(out[t].add(8 * h), acc[t]);
        }
    }
}

/// `out[t][r] = dot(row r of the group, x[t])` for the 16 rows of one interleaved Q6_K, Q3_K or
/// Q2_K group (`ty`; another type is treated as Q6_K), on AVX2: the bits of
/// [`super::interleaved_k::group_q6k`] and [`super::interleaved_k_low`]'s kernels.
///
/// # Safety
/// avx2/fma/f16c; `w` points to `nb` group blocks of the format
/// ([`crate::matmul::interleave`]); each `x[t]` to `nb` Q8_K blocks, `info[t]` to their `nb`
/// [`Q6Info`]s (as [`super::interleaved_k::sub16_infos`] gives them for the format); each
/// `out[t]` to 16 writable f32.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn group_k16_avx2<const T: usize>(
    ty: GgmlType,
    w: *const u8,
    nb: usize,
    x: [*const u8; T],
    info: [*const Q6Info; T],
    out: [*mut f32; T],
) {
    // SAFETY: forwarded.
    unsafe {
        match ty {
            GgmlType::Q3K => in_token_tiles(&Sub16::<Q3K> { w, nb }, x, info, out),
            GgmlType::Q2K => in_token_tiles(&Sub16::<Q2K> { w, nb }, x, info, out),
            _ => in_token_tiles(&Sub16::<Q6K> { w, nb }, x, info, out),
        }
    }
}

/// One group of format `F` (`nb` super-blocks at `w`) as a [`SubTile`].
struct Sub16<const F: u8> {
    w: *const u8,
    nb: usize,
}

impl<const F: u8> SubTile<Q6Info> for Sub16<F> {
    #[inline(always)]
    unsafe fn run<const C: usize>(
        &self,
        h: usize,
        x: [*const u8; C],
        info: [*const Q6Info; C],
        out: [*mut f32; C],
    ) {
        // SAFETY: forwarded.
        unsafe { half_tile::<C, F>(self.w, self.nb, h, x, info, out) }
    }
}

/// Half `h` of one IQ4_XS group × `T` tokens.
///
/// # Safety
/// As [`group_iq4xs_avx2`].
#[inline(always)]
unsafe fn iq4xs_half<const T: usize>(
    w: *const u8,
    nb: usize,
    h: usize,
    x: [*const u8; T],
    info: [*const XsInfo; T],
    out: [*mut f32; T],
) {
    // SAFETY: features and pointer ranges are the caller's contract; all loads are unaligned.
    unsafe {
        let low = _mm256_set1_epi8(0x0F);
        let table = signed_table::<IQ4_NL>();
        let mut acc = [_mm256_setzero_ps(); T];
        for b in 0..nb {
            let blk = w.add(b * IQ4XS_GROUP_BYTES);
            let mut isum = [_mm256_setzero_si256(); T];
            for j in 0..8 {
                let chunks = blk.add(IQ4XS_QUANTS + 64 * 8 * (j / 2) + 32 * h);
                let (mut wq, mut wabs) = ([_mm256_setzero_si256(); 8], [_mm256_setzero_si256(); 8]);
                for c in 0..8 {
                    let raw = _mm256_loadu_si256(chunks.add(64 * c).cast());
                    let idx = if j % 2 == 0 {
                        _mm256_and_si256(raw, low)
                    } else {
                        _mm256_and_si256(_mm256_srli_epi16::<4>(raw), low)
                    };
                    wq[c] = _mm256_shuffle_epi8(table, idx);
                    wabs[c] = _mm256_abs_epi8(wq[c]);
                }
                let sc = _mm256_cvtepi8_epi32(_mm_loadl_epi64(
                    blk.add(IQ4XS_SCALES + 16 * j + 8 * h).cast(),
                ));
                for t in 0..T {
                    let xq = x[t].add(b * XB + XQ + 32 * j);
                    let s = chunk_sums(_mm256_setzero_si256(), &wabs, Some(&wq), xq, 1);
                    isum[t] = _mm256_add_epi32(isum[t], _mm256_mullo_epi32(s, sc));
                }
            }
            let dw = _mm256_cvtph_ps(_mm_loadu_si128(blk.add(16 * h).cast()));
            for t in 0..T {
                let dx = _mm256_set1_ps((*info[t].add(b)).dx);
                acc[t] =
                    _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_mul_ps(dw, dx), acc[t]);
            }
        }
        for t in 0..T {
            _mm256_storeu_ps(out[t].add(8 * h), acc[t]);
        }
    }
}

/// `out[t][r] = dot(row r of the group, x[t])` for the 16 rows of one interleaved IQ4_XS group,
/// on AVX2: the bits of [`super::interleaved_iq4xs::group_iq4xs`].
///
/// # Safety
/// avx2/fma/f16c; `w` points to `nb` IQ4_XS group blocks ([`crate::matmul::interleave`]); each
/// `x[t]` to `nb` Q8_K blocks (values in [-127, 127]), `info[t]` to their `nb` [`XsInfo`]s; each
/// `out[t]` to 16 writable f32.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn group_iq4xs_avx2<const T: usize>(
    w: *const u8,
    nb: usize,
    x: [*const u8; T],
    info: [*const XsInfo; T],
    out: [*mut f32; T],
) {
    // SAFETY: forwarded.
    unsafe { in_token_tiles(&Xs { w, nb }, x, info, out) }
}

/// One IQ4_XS group (`nb` super-blocks at `w`) as a [`SubTile`].
struct Xs {
    w: *const u8,
    nb: usize,
}

impl SubTile<XsInfo> for Xs {
    #[inline(always)]
    unsafe fn run<const C: usize>(
        &self,
        h: usize,
        x: [*const u8; C],
        info: [*const XsInfo; C],
        out: [*mut f32; C],
    ) {
        // SAFETY: forwarded.
        unsafe { iq4xs_half::<C>(self.w, self.nb, h, x, info, out) }
    }
}
