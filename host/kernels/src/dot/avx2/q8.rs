//! Int8-based tiles: Q8_0·Q8_0, Q4_0·Q8_0 and Q8_K·Q8_K.
//!
//! Per 32 elements: `maddubs(|w|, sign(x, w))` then `madd` with ones gives 8 exact i32 partial
//! sums (lane m = elements 4m..4m+4); per block `acc = fma(dw * dx, f32(sumi), acc)`. Requires
//! activations in [-127, 127] (the sign trick cannot negate -128). Single-token Q4_0 computes
//! the same i32 lanes from unsigned levels minus `8 * Σx`.
//!
//! Every tile also comes in an AVX-512 VNNI build ([`Vnni`]: one `vpdpbusd` from zero on 256-bit
//! vectors instead of `maddubs` + `madd`; from zero, so no accumulation chain waits on its
//! latency). No i16 pair sum saturates here (|w| ≤ 128, |x| ≤ 127), so both builds give the
//! same exact i32 lanes and then run the same float operations: their results are bit-identical,
//! and which one a process uses changes no output. (K-quant tiles stay on `madd`: folding their
//! scale `madd` + `add` into `vpdpwssd` chains the accumulator through its latency and measured
//! slower.)
//! Invariant: per (row, token) the op sequence is independent of `R`, `C`.

use std::arch::x86_64::*;

use super::{hsum, load_f16, load_f32, load128, load256};

/// How 32 unsigned-by-signed int8 products become 8 exact i32 lane sums (lane m = 4m..4m+4).
pub(crate) trait Int8Dot {
    /// `Σ u[i] * s[i]` per lane, `u` read as unsigned bytes, `s` as signed.
    ///
    /// # Safety
    /// The CPU must support the features of the implementing build.
    unsafe fn dot_us(u: __m256i, s: __m256i) -> __m256i;
}

/// AVX2: `madd(maddubs(u, s), 1)` (exact while pair sums fit i16, as they do here).
pub(crate) struct Madd;

/// AVX-512 VNNI + VL: `vpdpbusd` from zero.
pub(crate) struct Vnni;

impl Int8Dot for Madd {
    #[inline(always)]
    unsafe fn dot_us(u: __m256i, s: __m256i) -> __m256i {
        // SAFETY: avx2 is present (caller).
        unsafe { _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)) }
    }
}

impl Int8Dot for Vnni {
    #[inline(always)]
    unsafe fn dot_us(u: __m256i, s: __m256i) -> __m256i {
        // SAFETY: avx512vnni and avx512vl are present (caller).
        unsafe { _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s) }
    }
}

/// Exact i32x8 partial sums of `w · x` over 32 int8 values.
#[inline(always)]
pub(super) unsafe fn dot32<D: Int8Dot>(wabs: __m256i, wsgn: __m256i, x: __m256i) -> __m256i {
    // SAFETY: the build's features are present (caller).
    unsafe { D::dot_us(wabs, _mm256_sign_epi8(x, wsgn)) }
}

/// Shared body of the 32-element-block formats; `decode` yields (scale, int8 values) of a block.
/// Activations are Q8_0 blocks ([`tile_blocks32_x`] for other activation layouts).
///
/// # Safety
/// avx2/fma/f16c and `D`'s features; `decode(r, b)` must be safe to call for r < R, b < nb;
/// every `x[t]` points to `nb` Q8_0 blocks.
#[inline(always)]
pub(super) unsafe fn tile_blocks32<D: Int8Dot, const R: usize, const C: usize>(
    decode: impl Fn(usize, usize) -> (f32, __m256i),
    x: [*const u8; C],
    nb: usize,
    out: &mut [[f32; C]; R],
) {
    // SAFETY: same contract; a Q8_0 block is 34 bytes with its f16 scale at 0, values at 2.
    unsafe { tile_blocks32_x::<D, R, C, 34, 2>(decode, x, nb, out) }
}

/// [`tile_blocks32`] for activation blocks of `XB` bytes: f16 scale at 0, 32 int8 values at
/// `XQ` (Q8_0: 34, 2; Q8_1: 36, 4).
///
/// # Safety
/// avx2/fma/f16c and `D`'s features; `decode(r, b)` must be safe to call for r < R, b < nb;
/// every `x[t]` points to `nb` blocks of that layout.
#[inline(always)]
pub(super) unsafe fn tile_blocks32_x<
    D: Int8Dot,
    const R: usize,
    const C: usize,
    const XB: usize,
    const XQ: usize,
>(
    decode: impl Fn(usize, usize) -> (f32, __m256i),
    x: [*const u8; C],
    nb: usize,
    out: &mut [[f32; C]; R],
) {
    // SAFETY: the caller guarantees the features and readable blocks; all loads are unaligned.
    unsafe {
        let mut acc = [[_mm256_setzero_ps(); C]; R];
        for b in 0..nb {
            let mut wd = [_mm256_setzero_ps(); R];
            let mut wabs = [_mm256_setzero_si256(); R];
            let mut wsgn = [_mm256_setzero_si256(); R];
            for r in 0..R {
                let (d, q) = decode(r, b);
                wd[r] = _mm256_set1_ps(d);
                wabs[r] = _mm256_abs_epi8(q);
                wsgn[r] = q;
            }
            for t in 0..C {
                let p = x[t].add(b * XB);
                let xd = _mm256_set1_ps(load_f16(p));
                let xq = load256(p.add(XQ));
                for r in 0..R {
                    let s = _mm256_cvtepi32_ps(dot32::<D>(wabs[r], wsgn[r], xq));
                    // Lane-wise product == the scalar product dw * dx in every lane.
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

/// Q8_0 body.
///
/// # Safety
/// avx2/fma/f16c and `D`'s features; every `w[r]` and `x[t]` points to `nb` Q8_0 blocks.
#[inline(always)]
unsafe fn q8_0<D: Int8Dot, const R: usize, const C: usize>(
    w: [*const u8; R],
    x: [*const u8; C],
    nb: usize,
    out: &mut [[f32; C]; R],
) {
    let decode = |r: usize, b: usize| {
        // SAFETY: b < nb blocks of 34 bytes at w[r] (caller); features enabled (caller).
        unsafe {
            let p = w[r].add(b * 34);
            (load_f16(p), load256(p.add(2)))
        }
    };
    // SAFETY: same contract.
    unsafe { tile_blocks32::<D, R, C>(decode, x, nb, out) }
}

/// Q4_0 body. For a single token the weights stay unsigned (levels 0..15): `dot(levels, x)` minus
/// `8 * Σx` over the same 4-element lane groups (cheaper per-row decode). For batches they are
/// decoded to signed int8 once and shared. Both forms produce the same exact i32 lanes followed
/// by the same float operations, so results are bit-identical whichever form a pair goes through.
///
/// # Safety
/// avx2/fma/f16c and `D`'s features; every `w[r]` points to `nb` Q4_0 blocks, every `x[t]` to
/// `nb` Q8_0 blocks.
#[inline(always)]
unsafe fn q4_0<D: Int8Dot, const R: usize, const C: usize>(
    w: [*const u8; R],
    x: [*const u8; C],
    nb: usize,
    out: &mut [[f32; C]; R],
) {
    if C > 1 {
        // Batches: decode to signed int8 once per block and share it across the C tokens.
        let decode = |r: usize, b: usize| {
            // SAFETY: b < nb blocks of 18 bytes at w[r] (caller); features enabled (caller).
            unsafe {
                let p = w[r].add(b * 18);
                let q = load128(p.add(2));
                let v = _mm256_set_m128i(_mm_srli_epi16::<4>(q), q);
                let v = _mm256_and_si256(v, _mm256_set1_epi8(0x0F));
                (load_f16(p), _mm256_sub_epi8(v, _mm256_set1_epi8(8)))
            }
        };
        // SAFETY: same contract.
        unsafe { tile_blocks32::<D, R, C>(decode, x, nb, out) };
        return;
    }
    // SAFETY: blocks readable (caller); all loads unaligned.
    unsafe {
        let mask = _mm256_set1_epi8(0x0F);
        let eights = _mm256_set1_epi8(8);
        let mut acc = [[_mm256_setzero_ps(); C]; R];
        for b in 0..nb {
            let mut wd = [_mm256_setzero_ps(); R];
            let mut wq = [_mm256_setzero_si256(); R];
            for r in 0..R {
                let p = w[r].add(b * 18);
                let q = load128(p.add(2));
                // Low nibbles are elements 0..16, high nibbles 16..32.
                let v = _mm256_set_m128i(_mm_srli_epi16::<4>(q), q);
                wq[r] = _mm256_and_si256(v, mask);
                wd[r] = _mm256_set1_ps(load_f16(p));
            }
            for t in 0..C {
                let p = x[t].add(b * 34);
                let xd = _mm256_set1_ps(load_f16(p));
                let xq = load256(p.add(2));
                let offset = D::dot_us(eights, xq);
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

/// # Safety
/// avx2/fma/f16c; every `w[r]` and `x[t]` points to `nb` Q8_0 blocks.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn tile_q8_0<const R: usize, const C: usize>(
    w: [*const u8; R],
    x: [*const u8; C],
    nb: usize,
    out: &mut [[f32; C]; R],
) {
    // SAFETY: same contract; Madd needs only avx2.
    unsafe { q8_0::<Madd, R, C>(w, x, nb, out) }
}

/// [`tile_q8_0`] with VNNI (bit-identical results).
///
/// # Safety
/// avx2/fma/f16c/avx512vnni/avx512vl; every `w[r]` and `x[t]` points to `nb` Q8_0 blocks.
#[target_feature(enable = "avx2,fma,f16c,avx512vnni,avx512vl")]
pub unsafe fn tile_q8_0_vnni<const R: usize, const C: usize>(
    w: [*const u8; R],
    x: [*const u8; C],
    nb: usize,
    out: &mut [[f32; C]; R],
) {
    // SAFETY: same contract; every feature Vnni needs is enabled here.
    unsafe { q8_0::<Vnni, R, C>(w, x, nb, out) }
}

/// # Safety
/// avx2/fma/f16c; every `w[r]` points to `nb` Q4_0 blocks, every `x[t]` to `nb` Q8_0 blocks.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn tile_q4_0<const R: usize, const C: usize>(
    w: [*const u8; R],
    x: [*const u8; C],
    nb: usize,
    out: &mut [[f32; C]; R],
) {
    // SAFETY: same contract; Madd needs only avx2.
    unsafe { q4_0::<Madd, R, C>(w, x, nb, out) }
}

/// [`tile_q4_0`] with VNNI (bit-identical results).
///
/// # Safety
/// avx2/fma/f16c/avx512vnni/avx512vl; every `w[r]` points to `nb` Q4_0 blocks, every `x[t]` to
/// `nb` Q8_0 blocks.
#[target_feature(enable = "avx2,fma,f16c,avx512vnni,avx512vl")]
pub unsafe fn tile_q4_0_vnni<const R: usize, const C: usize>(
    w: [*const u8; R],
    x: [*const u8; C],
    nb: usize,
    out: &mut [[f32; C]; R],
) {
    // SAFETY: same contract; every feature Vnni needs is enabled here.
    unsafe { q4_0::<Vnni, R, C>(w, x, nb, out) }
}

/// Q8_K body.
///
/// # Safety
/// avx2/fma/f16c and `D`'s features; every `w[r]` and `x[t]` points to `nb` Q8_K blocks.
#[inline(always)]
unsafe fn q8k<D: Int8Dot, const R: usize, const C: usize>(
    w: [*const u8; R],
    x: [*const u8; C],
    nb: usize,
    out: &mut [[f32; C]; R],
) {
    // SAFETY: blocks readable (caller); unaligned loads.
    unsafe {
        let mut acc = [[_mm256_setzero_ps(); C]; R];
        for b in 0..nb {
            for t in 0..C {
                let px = x[t].add(b * 292);
                let xd = load_f32(px);
                for r in 0..R {
                    let pw = w[r].add(b * 292);
                    let mut sumi = _mm256_setzero_si256();
                    for c in 0..8 {
                        let q = load256(pw.add(4 + 32 * c));
                        let xq = load256(px.add(4 + 32 * c));
                        sumi = _mm256_add_epi32(sumi, dot32::<D>(_mm256_abs_epi8(q), q, xq));
                    }
                    let s = _mm256_cvtepi32_ps(sumi);
                    acc[r][t] = _mm256_fmadd_ps(_mm256_set1_ps(load_f32(pw) * xd), s, acc[r][t]);
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

/// # Safety
/// avx2/fma/f16c; every `w[r]` and `x[t]` points to `nb` Q8_K blocks.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn tile_q8k<const R: usize, const C: usize>(
    w: [*const u8; R],
    x: [*const u8; C],
    nb: usize,
    out: &mut [[f32; C]; R],
) {
    // SAFETY: same contract; Madd needs only avx2.
    unsafe { q8k::<Madd, R, C>(w, x, nb, out) }
}

/// [`tile_q8k`] with VNNI (bit-identical results).
///
/// # Safety
/// avx2/fma/f16c/avx512vnni/avx512vl; every `w[r]` and `x[t]` points to `nb` Q8_K blocks.
#[target_feature(enable = "avx2,fma,f16c,avx512vnni,avx512vl")]
pub unsafe fn tile_q8k_vnni<const R: usize, const C: usize>(
    w: [*const u8; R],
    x: [*const u8; C],
    nb: usize,
    out: &mut [[f32; C]; R],
) {
    // SAFETY: same contract; every feature Vnni needs is enabled here.
    unsafe { q8k::<Vnni, R, C>(w, x, nb, out) }
}
