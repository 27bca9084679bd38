//! Tiles of the other 32-element formats: Q4_1·Q8_1, Q5_1·Q8_1, Q5_0·Q8_0 and Q8_1·Q8_1.
//!
//! Q4_1 levels (0..15) are unsigned, so `dot_us(levels, x)` is exact with no sign trick; the
//! block's min enters as `m * s` (Q8_1's `s = d * Σx`) in a second accumulator per token, one
//! lane per weight row. Q5_0 adds bit 4 from `qh` (32 bits expanded to 32 byte masks); batches decode
//! it to signed int8 (`level - 16`) shared across tokens, single tokens keep unsigned levels and
//! subtract `16 * Σx` over the same lanes (the same exact i32 lanes either way). Every tile has
//! a VNNI build with bit-identical results (see `q8`). Invariant: per (row, token) the op
//! sequence is independent of `R`, `C`.

use std::arch::x86_64::*;

use super::q8::{Int8Dot, Madd, Vnni, tile_blocks32, tile_blocks32_x};
use super::{hsum, load_f16, load128, load256};

/// Q4_1: 2 f16 (d, m) + 16 bytes of nibbles.
const Q4_1_SIZE: usize = 20;
/// Q5_1: 2 f16 (d, m), u32 qh, 16 bytes of nibbles.
const Q5_1_SIZE: usize = 24;
/// Q5_0: f16 d, u32 qh, 16 bytes of nibbles.
const Q5_0_SIZE: usize = 22;
/// Q8_1: 2 f16 (d, s) + 32 int8.
const Q8_1_SIZE: usize = 36;
/// Q8_0: f16 d + 32 int8.
const Q8_0_SIZE: usize = 34;

/// Two consecutive little-endian f16 at `p` (any alignment) as f32 lanes 0 and 1.
///
/// # Safety
/// `p` must point to 4 readable bytes; f16c present.
#[inline(always)]
pub(super) unsafe fn load_f16x2(p: *const u8) -> (f32, f32) {
    // SAFETY: 4 readable bytes at p (caller); unaligned read; f16c enabled (caller).
    unsafe {
        let bits = p.cast::<u32>().read_unaligned();
        let v = _mm_cvtph_ps(_mm_cvtsi32_si128(bits as i32));
        (_mm_cvtss_f32(v), _mm_cvtss_f32(_mm_movehdup_ps(v)))
    }
}

/// The 32 nibbles of 16 bytes in element order: low nibbles (elements 0..16), then high.
///
/// # Safety
/// `p` must point to 16 readable bytes; avx2 present.
#[inline(always)]
pub(super) unsafe fn nibbles(p: *const u8) -> __m256i {
    // SAFETY: 16 readable bytes (caller); avx2 enabled (caller).
    unsafe {
        // Both halves from one broadcast load; the upper half shifted by 4 within 64-bit lanes
        // (each byte's high nibble lands in its low nibble), then masked.
        let q = _mm256_broadcastsi128_si256(load128(p));
        let v = _mm256_srlv_epi64(q, _mm256_set_epi64x(4, 4, 0, 0));
        _mm256_and_si256(v, _mm256_set1_epi8(0x0F))
    }
}

/// Byte `i` is 0xFF if bit `i` of the little-endian u32 at `p` is set, else 0
/// (ggml's `bytes_from_bits_32`).
///
/// # Safety
/// `p` must point to 4 readable bytes; avx2 present.
#[inline(always)]
pub(super) unsafe fn bit_masks(p: *const u8) -> __m256i {
    // SAFETY: 4 readable bytes (caller); avx2 enabled (caller).
    unsafe {
        let bits = p.cast::<u32>().read_unaligned();
        let spread = _mm256_set_epi64x(
            0x0303_0303_0303_0303,
            0x0202_0202_0202_0202,
            0x0101_0101_0101_0101,
            0,
        );
        let bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(bits as i32), spread);
        // Every bit set except bit i % 8: all ones iff that bit was set.
        let others = _mm256_set1_epi64x(0x7fbf_dfef_f7fb_fdfe);
        _mm256_cmpeq_epi8(_mm256_or_si256(bytes, others), _mm256_set1_epi64x(-1))
    }
}

/// Body of the affine formats (`x = d * level + m`) against Q8_1: `decode(r, b)` yields
/// (d, m, unsigned levels ≤ 31) of a block. The min term `m * s` of row `r` and token `t` is
/// accumulated in lane `r` of a vector per token (one `fma` for all rows; a lane's arithmetic
/// does not depend on the other lanes, so it is the same for every `R`).
///
/// # Safety
/// avx2/fma/f16c and `D`'s features; `decode(r, b)` must be safe for r < R, b < nb; every
/// `x[t]` points to `nb` Q8_1 blocks.
#[inline(always)]
unsafe fn tile_affine32<D: Int8Dot, const R: usize, const C: usize>(
    decode: impl Fn(usize, usize) -> (f32, f32, __m256i),
    x: [*const u8; C],
    nb: usize,
    out: &mut [[f32; C]; R],
) {
    const { assert!(R <= 8, "one min lane per row") };
    // SAFETY: the caller guarantees the features and readable blocks; all loads are unaligned.
    unsafe {
        let mut acc = [[_mm256_setzero_ps(); C]; R];
        let mut accm = [_mm256_setzero_ps(); C];
        for b in 0..nb {
            let mut wd = [_mm256_setzero_ps(); R];
            let mut wm = [0.0f32; 8];
            let mut wq = [_mm256_setzero_si256(); R];
            for r in 0..R {
                let (d, m, q) = decode(r, b);
                wd[r] = _mm256_set1_ps(d);
                wm[r] = m;
                wq[r] = q;
            }
            let wm = _mm256_loadu_ps(wm.as_ptr());
            for t in 0..C {
                let p = x[t].add(b * Q8_1_SIZE);
                let (xd, xs) = load_f16x2(p);
                let xd = _mm256_set1_ps(xd);
                let xq = load256(p.add(4));
                for r in 0..R {
                    let s = _mm256_cvtepi32_ps(D::dot_us(wq[r], xq));
                    acc[r][t] = _mm256_fmadd_ps(_mm256_mul_ps(wd[r], xd), s, acc[r][t]);
                }
                accm[t] = _mm256_fmadd_ps(wm, _mm256_set1_ps(xs), accm[t]);
            }
        }
        for t in 0..C {
            let mut mins = [0.0f32; 8];
            _mm256_storeu_ps(mins.as_mut_ptr(), accm[t]);
            for r in 0..R {
                out[r][t] = hsum(acc[r][t]) + mins[r];
            }
        }
    }
}

/// Body of the offset formats (`x = d * (level - offset)`) against Q8_0 with unsigned levels:
/// `dot_us(levels, x) - dot_us(offset, x)` gives the same exact i32 lanes as the signed values.
///
/// # Safety
/// avx2/fma/f16c and `D`'s features; `decode(r, b)` must be safe for r < R, b < nb; every
/// `x[t]` points to `nb` Q8_0 blocks; levels ≤ 63 and `offset` ≤ 63.
#[inline(always)]
unsafe fn tile_offset32<D: Int8Dot, const R: usize, const C: usize>(
    decode: impl Fn(usize, usize) -> (f32, __m256i),
    offset: i8,
    x: [*const u8; C],
    nb: usize,
    out: &mut [[f32; C]; R],
) {
    // SAFETY: the caller guarantees the features and readable blocks; all loads are unaligned.
    unsafe {
        let off = _mm256_set1_epi8(offset);
        let mut acc = [[_mm256_setzero_ps(); C]; R];
        for b in 0..nb {
            let mut wd = [_mm256_setzero_ps(); R];
            let mut wq = [_mm256_setzero_si256(); R];
            for r in 0..R {
                let (d, q) = decode(r, b);
                wd[r] = _mm256_set1_ps(d);
                wq[r] = q;
            }
            for t in 0..C {
                let p = x[t].add(b * Q8_0_SIZE);
                let xd = _mm256_set1_ps(load_f16(p));
                let xq = load256(p.add(2));
                let offset = D::dot_us(off, xq);
                for r in 0..R {
                    let dot = D::dot_us(wq[r], xq);
                    let s = _mm256_cvtepi32_ps(_mm256_sub_epi32(dot, offset));
                    acc[r][t] = _mm256_fmadd_ps(_mm256_mul_ps(wd[r], xd), s, acc[r][t]);
                }
            }
        }
        for r in 0..R {
            for t in 0..C {
                out[r][t] = hsum(acc[r][t]);
            }
        }
    }
}

/// Q4_1 body.
///
/// # Safety
/// avx2/fma/f16c and `D`'s features; every `w[r]` points to `nb` Q4_1 blocks, every `x[t]` to
/// `nb` Q8_1 blocks.
#[inline(always)]
unsafe fn q4_1<D: Int8Dot, const R: usize, const C: usize>(
    w: [*const u8; R],
    x: [*const u8; C],
    nb: usize,
    out: &mut [[f32; C]; R],
) {
    let decode = |r: usize, b: usize| {
        // SAFETY: b < nb blocks of 20 bytes at w[r] (caller); features enabled (caller).
        unsafe {
            let p = w[r].add(b * Q4_1_SIZE);
            let (d, m) = load_f16x2(p);
            (d, m, nibbles(p.add(4)))
        }
    };
    // SAFETY: same contract.
    unsafe { tile_affine32::<D, R, C>(decode, x, nb, out) }
}

/// Q5_1 body.
///
/// # Safety
/// avx2/fma/f16c and `D`'s features; every `w[r]` points to `nb` Q5_1 blocks, every `x[t]` to
/// `nb` Q8_1 blocks.
#[inline(always)]
unsafe fn q5_1<D: Int8Dot, const R: usize, const C: usize>(
    w: [*const u8; R],
    x: [*const u8; C],
    nb: usize,
    out: &mut [[f32; C]; R],
) {
    let decode = |r: usize, b: usize| {
        // SAFETY: b < nb blocks of 24 bytes at w[r] (caller); features enabled (caller).
        unsafe {
            let p = w[r].add(b * Q5_1_SIZE);
            let (d, m) = load_f16x2(p);
            let hi = _mm256_and_si256(bit_masks(p.add(4)), _mm256_set1_epi8(0x10));
            (d, m, _mm256_or_si256(nibbles(p.add(8)), hi))
        }
    };
    // SAFETY: same contract; levels ≤ 31.
    unsafe { tile_affine32::<D, R, C>(decode, x, nb, out) }
}

/// Q5_0 body: signed values shared across a batch, unsigned levels minus 16 for one token.
///
/// # Safety
/// avx2/fma/f16c and `D`'s features; every `w[r]` points to `nb` Q5_0 blocks, every `x[t]` to
/// `nb` Q8_0 blocks.
#[inline(always)]
unsafe fn q5_0<D: Int8Dot, const R: usize, const C: usize>(
    w: [*const u8; R],
    x: [*const u8; C],
    nb: usize,
    out: &mut [[f32; C]; R],
) {
    if C > 1 {
        let decode = |r: usize, b: usize| {
            // SAFETY: b < nb blocks of 22 bytes at w[r] (caller); features enabled (caller).
            unsafe {
                let p = w[r].add(b * Q5_0_SIZE);
                // Bit clear: nibble | 0xF0 == nibble - 16 as int8; bit set: nibble + 16 - 16.
                let hi = _mm256_andnot_si256(bit_masks(p.add(2)), _mm256_set1_epi8(-16));
                (load_f16(p), _mm256_or_si256(nibbles(p.add(6)), hi))
            }
        };
        // SAFETY: same contract.
        unsafe { tile_blocks32::<D, R, C>(decode, x, nb, out) };
        return;
    }
    let decode = |r: usize, b: usize| {
        // SAFETY: b < nb blocks of 22 bytes at w[r] (caller); features enabled (caller).
        unsafe {
            let p = w[r].add(b * Q5_0_SIZE);
            let hi = _mm256_and_si256(bit_masks(p.add(2)), _mm256_set1_epi8(0x10));
            (load_f16(p), _mm256_or_si256(nibbles(p.add(6)), hi))
        }
    };
    // SAFETY: same contract; levels ≤ 31.
    unsafe { tile_offset32::<D, R, C>(decode, 16, x, nb, out) }
}

/// Q8_1 body (Q8_0's with Q8_1 blocks on both sides).
///
/// # Safety
/// avx2/fma/f16c and `D`'s features; every `w[r]` and `x[t]` points to `nb` Q8_1 blocks.
#[inline(always)]
unsafe fn q8_1<D: Int8Dot, const R: usize, const C: usize>(
    w: [*const u8; R],
    x: [*const u8; C],
    nb: usize,
    out: &mut [[f32; C]; R],
) {
    let decode = |r: usize, b: usize| {
        // SAFETY: b < nb blocks of 36 bytes at w[r] (caller); features enabled (caller).
        unsafe {
            let p = w[r].add(b * Q8_1_SIZE);
            (load_f16(p), load256(p.add(4)))
        }
    };
    // SAFETY: same contract; a Q8_1 block is 36 bytes with its values at 4.
    unsafe { tile_blocks32_x::<D, R, C, Q8_1_SIZE, 4>(decode, x, nb, out) }
}

/// Declares the AVX2 entry point of a body and its VNNI build (bit-identical results).
macro_rules! entries {
    ($body:ident, $avx2:ident, $vnni:ident, $what:literal) => {
        #[doc = concat!("AVX2 tile of ", $what, ".")]
        ///
        /// # Safety
        #[doc = concat!("avx2/fma/f16c; every `w[r]` and `x[t]` points to `nb` blocks of ", $what, ".")]
        #[target_feature(enable = "avx2,fma,f16c")]
        pub unsafe fn $avx2<const R: usize, const C: usize>(
            w: [*const u8; R],
            x: [*const u8; C],
            nb: usize,
            out: &mut [[f32; C]; R],
        ) {
            // SAFETY: same contract; Madd needs only avx2.
            unsafe { $body::<Madd, R, C>(w, x, nb, out) }
        }

        #[doc = concat!("VNNI tile of ", $what, " (bit-identical to the AVX2 one).")]
        ///
        /// # Safety
        #[doc = concat!("avx2/fma/f16c/avx512vnni/avx512vl; every `w[r]` and `x[t]` points to `nb` blocks of ", $what, ".")]
        #[target_feature(enable = "avx2,fma,f16c,avx512vnni,avx512vl")]
        pub unsafe fn $vnni<const R: usize, const C: usize>(
            w: [*const u8; R],
            x: [*const u8; C],
            nb: usize,
            out: &mut [[f32; C]; R],
        ) {
            // SAFETY: same contract; every feature Vnni needs is enabled here.
            unsafe { $body::<Vnni, R, C>(w, x, nb, out) }
        }
    };
}

entries!(q4_1, tile_q4_1, tile_q4_1_vnni, "Q4_1 · Q8_1");
entries!(q5_0, tile_q5_0, tile_q5_0_vnni, "Q5_0 · Q8_0");
entries!(q5_1, tile_q5_1, tile_q5_1_vnni, "Q5_1 · Q8_1");
entries!(q8_1, tile_q8_1, tile_q8_1_vnni, "Q8_1 · Q8_1");
