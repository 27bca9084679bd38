//! K-quant tiles: Q2_K·Q8_K, Q3_K·Q8_K, Q4_K·Q8_K, Q5_K·Q8_K and Q6_K·Q8_K.
//!
//! Weights are decoded per super-block into unsigned levels (Q2_K: 0..3, Q3_K: 0..7, Q4_K: 0..15, Q5_K:
//! 0..31, Q6_K: 0..63), so `maddubs(levels, x)` is exact without sign tricks; sub-block scales
//! are applied with `madd`. Q2_K / Q4_K / Q5_K mins and the Q3_K / Q6_K offsets of 4 / 32 are folded in
//! through Q8_K's `bsums`. All integer sums are exact; per (row, token) the op sequence is independent of `R`,
//! `C`. Every tile has a VNNI build (`*_vnni`): `vpdpwssd` fuses each `madd` and its `add` into
//! the same exact i32 lanes, so both builds give the same bits.

use std::arch::x86_64::*;

use super::{hsum, load_f16, load_f32, load128, load256};
use crate::quant::{q3k_scales_of, scale_min_k4};

/// How a sub-block's i16 pair products `p` (from `maddubs`) are scaled and added to the i32
/// lanes: `acc + madd(p, sc)`, exactly (no lane overflows for K-quant scales and levels).
pub(crate) trait WordDot {
    /// `acc[l] + p[2l] * sc[2l] + p[2l + 1] * sc[2l + 1]`.
    ///
    /// # Safety
    /// The CPU must support the features of the implementing build.
    unsafe fn madd_add(acc: __m256i, p: __m256i, sc: __m256i) -> __m256i;
}

/// AVX2: `add(acc, madd(p, sc))`.
pub(crate) struct MaddAdd;

/// AVX-512 VNNI + VL: one `vpdpwssd`.
pub(crate) struct Dpwssd;

impl WordDot for MaddAdd {
    #[inline(always)]
    unsafe fn madd_add(acc: __m256i, p: __m256i, sc: __m256i) -> __m256i {
        // SAFETY: avx2 is present (caller).
        unsafe { _mm256_add_epi32(acc, _mm256_madd_epi16(p, sc)) }
    }
}

impl WordDot for Dpwssd {
    #[inline(always)]
    unsafe fn madd_add(acc: __m256i, p: __m256i, sc: __m256i) -> __m256i {
        // SAFETY: avx512vnni and avx512vl are present (caller).
        unsafe { _mm256_dpwssd_epi32(acc, p, sc) }
    }
}

/// Q8_K field offsets: d: f32 at 0, qs at 4, bsums at 260; 292 bytes per block.
const Q8K_QS: usize = 4;
const Q8K_BSUMS: usize = 260;
const Q8K_SIZE: usize = 292;

/// Q4_K body.
///
/// # Safety
/// avx2/fma/f16c and `D`'s features; every `w[r]` points to `nb` Q4_K blocks, every `x[t]` to
/// `nb` Q8_K blocks.
#[inline(always)]
unsafe fn q4k<D: WordDot, const R: usize, const C: usize>(
    w: [*const u8; R],
    x: [*const u8; C],
    nb: usize,
    out: &mut [[f32; C]; R],
) {
    let levels = |p: *const u8| {
        // SAFETY: `p` is a whole Q4_K block (caller); avx2 enabled here.
        unsafe {
            let mask = _mm256_set1_epi8(0x0F);
            let mut lv = [_mm256_setzero_si256(); 8];
            for k in 0..4 {
                let q = load256(p.add(16 + 32 * k));
                lv[2 * k] = _mm256_and_si256(q, mask);
                lv[2 * k + 1] = _mm256_and_si256(_mm256_srli_epi16::<4>(q), mask);
            }
            lv
        }
    };
    // SAFETY: same contract; Q4_K blocks are 144 bytes.
    unsafe { tile_scale_min::<D, R, C, 144>(levels, w, x, nb, out) }
}

/// Q5_K body.
///
/// # Safety
/// avx2/fma/f16c and `D`'s features; every `w[r]` points to `nb` Q5_K blocks, every `x[t]` to
/// `nb` Q8_K blocks.
#[inline(always)]
unsafe fn q5k<D: WordDot, const R: usize, const C: usize>(
    w: [*const u8; R],
    x: [*const u8; C],
    nb: usize,
    out: &mut [[f32; C]; R],
) {
    let levels = |p: *const u8| {
        // SAFETY: `p` is a whole Q5_K block (caller); avx2 enabled here.
        unsafe {
            let mask = _mm256_set1_epi8(0x0F);
            let bit4 = _mm256_set1_epi8(0x10);
            let qh = load256(p.add(16));
            // Bit 4 of sub-block j's levels: bit j of qh, as 0x10 per byte.
            let high = |j: i32| {
                let m = _mm256_set1_epi8(1 << j);
                _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, m), m), bit4)
            };
            let mut lv = [_mm256_setzero_si256(); 8];
            for k in 0..4 {
                let q = load256(p.add(48 + 32 * k));
                let lo = _mm256_and_si256(q, mask);
                let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(q), mask);
                lv[2 * k] = _mm256_or_si256(lo, high(2 * k as i32));
                lv[2 * k + 1] = _mm256_or_si256(hi, high(2 * k as i32 + 1));
            }
            lv
        }
    };
    // SAFETY: same contract; Q5_K blocks are 176 bytes.
    unsafe { tile_scale_min::<D, R, C, 176>(levels, w, x, nb, out) }
}

/// Body of the scale + min K-quants (Q4_K, Q5_K: d at 0, dmin at 2, 6-bit scales/mins at 4,
/// blocks of `BS` bytes); `levels(block)` yields the unsigned levels (≤ 31) of the 8
/// sub-blocks.
///
/// # Safety
/// avx2/fma/f16c; every `w[r]` points to `nb` such blocks, every `x[t]` to `nb` Q8_K blocks;
/// `levels` must be safe to call on any of those blocks.
#[inline(always)]
unsafe fn tile_scale_min<D: WordDot, const R: usize, const C: usize, const BS: usize>(
    levels: impl Fn(*const u8) -> [__m256i; 8],
    w: [*const u8; R],
    x: [*const u8; C],
    nb: usize,
    out: &mut [[f32; C]; R],
) {
    // SAFETY: blocks readable (caller); all loads unaligned.
    unsafe {
        let mut acc = [[_mm256_setzero_ps(); C]; R];
        let mut accm = [[0.0f32; C]; R];
        for b in 0..nb {
            let mut wd = [0.0f32; R];
            let mut wdmin = [0.0f32; R];
            let mut lv = [[_mm256_setzero_si256(); 8]; R];
            let mut scales = [[_mm256_setzero_si256(); 8]; R];
            let mut mins = [[0i32; 8]; R];
            for r in 0..R {
                let p = w[r].add(b * BS);
                wd[r] = load_f16(p);
                wdmin[r] = load_f16(p.add(2));
                let packed: [u8; 12] = p.add(4).cast::<[u8; 12]>().read_unaligned();
                for j in 0..8 {
                    let (sc, m) = scale_min_k4(j, &packed);
                    scales[r][j] = _mm256_set1_epi16(sc as i16);
                    mins[r][j] = m as i32;
                }
                lv[r] = levels(p);
            }
            for t in 0..C {
                let px = x[t].add(b * Q8K_SIZE);
                let xd = load_f32(px);
                let xdv = _mm256_set1_ps(xd);
                let bsums: [i16; 16] = px.add(Q8K_BSUMS).cast::<[i16; 16]>().read_unaligned();
                let mut xq = [_mm256_setzero_si256(); 8];
                for (j, v) in xq.iter_mut().enumerate() {
                    *v = load256(px.add(Q8K_QS + 32 * j));
                }
                for r in 0..R {
                    let mut sumi = _mm256_setzero_si256();
                    for j in 0..8 {
                        let p = _mm256_maddubs_epi16(lv[r][j], xq[j]);
                        sumi = D::madd_add(sumi, p, scales[r][j]);
                    }
                    let mut summ = 0i32;
                    for j in 0..8 {
                        summ += mins[r][j] * (bsums[2 * j] as i32 + bsums[2 * j + 1] as i32);
                    }
                    let s = _mm256_cvtepi32_ps(sumi);
                    let d = _mm256_mul_ps(_mm256_set1_ps(wd[r]), xdv);
                    acc[r][t] = _mm256_fmadd_ps(d, s, acc[r][t]);
                    accm[r][t] += (wdmin[r] * xd) * summ as f32;
                }
            }
        }
        for r in 0..R {
            for t in 0..C {
                out[r][t] = hsum(acc[r][t]) - accm[r][t];
            }
        }
    }
}

/// Q2_K body.
///
/// # Safety
/// avx2/fma/f16c and `D`'s features; every `w[r]` points to `nb` Q2_K blocks, every `x[t]` to
/// `nb` Q8_K blocks.
#[inline(always)]
unsafe fn q2k<D: WordDot, const R: usize, const C: usize>(
    w: [*const u8; R],
    x: [*const u8; C],
    nb: usize,
    out: &mut [[f32; C]; R],
) {
    // SAFETY: blocks readable (caller); all loads unaligned.
    unsafe {
        let m3 = _mm256_set1_epi8(3);
        let m4 = _mm_set1_epi8(0x0F);
        let mut acc = [[_mm256_setzero_ps(); C]; R];
        let mut accm = [[0.0f32; C]; R];
        for b in 0..nb {
            let mut wd = [0.0f32; R];
            let mut wdmin = [0.0f32; R];
            let mut levels = [[_mm256_setzero_si256(); 8]; R];
            let mut scales = [[_mm256_setzero_si256(); 8]; R];
            let mut mins16 = [_mm256_setzero_si256(); R];
            for r in 0..R {
                // scales at 0 (16 bytes), qs at 16 (64), d at 80, dmin at 82.
                let p = w[r].add(b * 84);
                wd[r] = load_f16(p.add(80));
                wdmin[r] = load_f16(p.add(82));
                for h in 0..2 {
                    let q = load256(p.add(16 + 32 * h));
                    let lv = &mut levels[r][4 * h..4 * h + 4];
                    lv[0] = _mm256_and_si256(q, m3);
                    lv[1] = _mm256_and_si256(_mm256_srli_epi16::<2>(q), m3);
                    lv[2] = _mm256_and_si256(_mm256_srli_epi16::<4>(q), m3);
                    lv[3] = _mm256_and_si256(_mm256_srli_epi16::<6>(q), m3);
                }
                let sc = load128(p);
                let s: [u8; 16] = p.cast::<[u8; 16]>().read_unaligned();
                for c in 0..8 {
                    let lo = _mm_set1_epi16((s[2 * c] & 0xF) as i16);
                    let hi = _mm_set1_epi16((s[2 * c + 1] & 0xF) as i16);
                    scales[r][c] = _mm256_set_m128i(hi, lo);
                }
                mins16[r] = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16::<4>(sc), m4));
            }
            for t in 0..C {
                let px = x[t].add(b * Q8K_SIZE);
                let xd = load_f32(px);
                let xdv = _mm256_set1_ps(xd);
                let bsums = load256(px.add(Q8K_BSUMS));
                let mut xq = [_mm256_setzero_si256(); 8];
                for (j, v) in xq.iter_mut().enumerate() {
                    *v = load256(px.add(Q8K_QS + 32 * j));
                }
                for r in 0..R {
                    let mut sumi = _mm256_setzero_si256();
                    for c in 0..8 {
                        let p = _mm256_maddubs_epi16(levels[r][c], xq[c]);
                        sumi = D::madd_add(sumi, p, scales[r][c]);
                    }
                    let summ = hsum_i32(_mm256_madd_epi16(bsums, mins16[r]));
                    let s = _mm256_cvtepi32_ps(sumi);
                    let d = _mm256_mul_ps(_mm256_set1_ps(wd[r]), xdv);
                    acc[r][t] = _mm256_fmadd_ps(d, s, acc[r][t]);
                    accm[r][t] += (wdmin[r] * xd) * summ as f32;
                }
            }
        }
        for r in 0..R {
            for t in 0..C {
                out[r][t] = hsum(acc[r][t]) - accm[r][t];
            }
        }
    }
}

/// Exact sum of 8 i32 lanes (no overflow for the bsum · min products here).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn hsum_i32(v: __m256i) -> i32 {
    let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
    let s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<1>(s));
    _mm_cvtsi128_si32(s)
}

/// Q3_K body.
///
/// # Safety
/// avx2/fma/f16c and `D`'s features; every `w[r]` points to `nb` Q3_K blocks, every `x[t]` to
/// `nb` Q8_K blocks.
#[inline(always)]
unsafe fn q3k<D: WordDot, const R: usize, const C: usize>(
    w: [*const u8; R],
    x: [*const u8; C],
    nb: usize,
    out: &mut [[f32; C]; R],
) {
    // SAFETY: blocks readable (caller); all loads unaligned.
    unsafe {
        let m3 = _mm256_set1_epi8(3);
        let four = _mm256_set1_epi8(4);
        let mut acc = [[_mm256_setzero_ps(); C]; R];
        for b in 0..nb {
            let mut wd = [0.0f32; R];
            let mut levels = [[_mm256_setzero_si256(); 8]; R];
            let mut scales = [[_mm256_setzero_si256(); 8]; R];
            let mut sc16 = [_mm256_setzero_si256(); R];
            for r in 0..R {
                // hmask at 0 (32 bytes), qs at 32 (64), scales at 96 (12), d at 108.
                let p = w[r].add(b * 110);
                wd[r] = load_f16(p.add(108));
                let hm = load256(p);
                // Level = low 2 bits | 4 if the high bit is set (value + 4, in 0..7).
                let high = |bit: i32| {
                    let m = _mm256_set1_epi8(1 << bit);
                    _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hm, m), m), four)
                };
                for h in 0..2 {
                    let q = load256(p.add(32 + 32 * h));
                    let low = [
                        _mm256_and_si256(q, m3),
                        _mm256_and_si256(_mm256_srli_epi16::<2>(q), m3),
                        _mm256_and_si256(_mm256_srli_epi16::<4>(q), m3),
                        _mm256_and_si256(_mm256_srli_epi16::<6>(q), m3),
                    ];
                    for (j, lo) in low.into_iter().enumerate() {
                        levels[r][4 * h + j] = _mm256_or_si256(lo, high((4 * h + j) as i32));
                    }
                }
                let packed: [u8; 12] = p.add(96).cast::<[u8; 12]>().read_unaligned();
                let s = q3k_scales_of(&packed);
                for c in 0..8 {
                    let lo = _mm_set1_epi16(s[2 * c] as i16);
                    let hi = _mm_set1_epi16(s[2 * c + 1] as i16);
                    scales[r][c] = _mm256_set_m128i(hi, lo);
                }
                sc16[r] = _mm256_cvtepi8_epi16(load128(s.as_ptr().cast()));
            }
            for t in 0..C {
                let px = x[t].add(b * Q8K_SIZE);
                let xdv = _mm256_set1_ps(load_f32(px));
                let bsums = load256(px.add(Q8K_BSUMS));
                let mut xq = [_mm256_setzero_si256(); 8];
                for (j, v) in xq.iter_mut().enumerate() {
                    *v = load256(px.add(Q8K_QS + 32 * j));
                }
                for r in 0..R {
                    let mut sumi = _mm256_setzero_si256();
                    for c in 0..8 {
                        let p = _mm256_maddubs_epi16(levels[r][c], xq[c]);
                        sumi = D::madd_add(sumi, p, scales[r][c]);
                    }
                    // Remove the offset: 4 * sum_j scale_j * bsum_j.
                    let corr = _mm256_madd_epi16(bsums, sc16[r]);
                    sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32::<2>(corr));
                    let s = _mm256_cvtepi32_ps(sumi);
                    let d = _mm256_mul_ps(_mm256_set1_ps(wd[r]), xdv);
                    acc[r][t] = _mm256_fmadd_ps(d, s, acc[r][t]);
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

/// Q6_K body.
///
/// # Safety
/// avx2/fma/f16c and `D`'s features; every `w[r]` points to `nb` Q6_K blocks, every `x[t]` to
/// `nb` Q8_K blocks.
#[inline(always)]
unsafe fn q6k<D: WordDot, const R: usize, const C: usize>(
    w: [*const u8; R],
    x: [*const u8; C],
    nb: usize,
    out: &mut [[f32; C]; R],
) {
    // SAFETY: blocks readable (caller); all loads unaligned.
    unsafe {
        let m4 = _mm256_set1_epi8(0x0F);
        let m30 = _mm256_set1_epi8(0x30);
        let mut acc = [[_mm256_setzero_ps(); C]; R];
        for b in 0..nb {
            let mut wd = [0.0f32; R];
            let mut levels = [[_mm256_setzero_si256(); 8]; R];
            let mut scales = [[_mm256_setzero_si256(); 8]; R];
            let mut sc16 = [_mm256_setzero_si256(); R];
            for r in 0..R {
                let p = w[r].add(b * 210);
                let (ql, qh, sc) = (p, p.add(128), p.add(192));
                wd[r] = load_f16(p.add(208));
                for h in 0..2 {
                    let ql0 = load256(ql.add(64 * h));
                    let ql1 = load256(ql.add(64 * h + 32));
                    let qh = load256(qh.add(32 * h));
                    let hi0 = _mm256_and_si256(_mm256_slli_epi16::<4>(qh), m30);
                    let hi1 = _mm256_and_si256(_mm256_slli_epi16::<2>(qh), m30);
                    let hi2 = _mm256_and_si256(qh, m30);
                    let hi3 = _mm256_and_si256(_mm256_srli_epi16::<2>(qh), m30);
                    let lv = &mut levels[r][4 * h..4 * h + 4];
                    lv[0] = _mm256_or_si256(_mm256_and_si256(ql0, m4), hi0);
                    lv[1] = _mm256_or_si256(_mm256_and_si256(ql1, m4), hi1);
                    lv[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16::<4>(ql0), m4), hi2);
                    lv[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16::<4>(ql1), m4), hi3);
                }
                let s: [i8; 16] = sc.cast::<[i8; 16]>().read_unaligned();
                for c in 0..8 {
                    let lo = _mm_set1_epi16(s[2 * c] as i16);
                    let hi = _mm_set1_epi16(s[2 * c + 1] as i16);
                    scales[r][c] = _mm256_set_m128i(hi, lo);
                }
                sc16[r] = _mm256_cvtepi8_epi16(load128(sc));
            }
            for t in 0..C {
                let px = x[t].add(b * Q8K_SIZE);
                let xdv = _mm256_set1_ps(load_f32(px));
                let bsums = load256(px.add(Q8K_BSUMS));
                let mut xq = [_mm256_setzero_si256(); 8];
                for (j, v) in xq.iter_mut().enumerate() {
                    *v = load256(px.add(Q8K_QS + 32 * j));
                }
                for r in 0..R {
                    let mut sumi = _mm256_setzero_si256();
                    for c in 0..8 {
                        let p = _mm256_maddubs_epi16(levels[r][c], xq[c]);
                        sumi = D::madd_add(sumi, p, scales[r][c]);
                    }
                    // Remove the offset: 32 * sum_j scale_j * bsum_j.
                    let corr = _mm256_madd_epi16(bsums, sc16[r]);
                    sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32::<5>(corr));
                    let s = _mm256_cvtepi32_ps(sumi);
                    let d = _mm256_mul_ps(_mm256_set1_ps(wd[r]), xdv);
                    acc[r][t] = _mm256_fmadd_ps(d, s, acc[r][t]);
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

/// The two entry points of a K-quant body: AVX2 (`madd` + `add`) and VNNI (`vpdpwssd`).
macro_rules! entries {
    ($($body:ident: $plain:ident, $vnni:ident, $ty:literal;)*) => {$(
        #[doc = concat!("# Safety\navx2/fma/f16c; every `w[r]` points to `nb` ", $ty,
            " blocks, every `x[t]` to `nb` Q8_K blocks.")]
        #[target_feature(enable = "avx2,fma,f16c")]
        pub unsafe fn $plain<const R: usize, const C: usize>(
            w: [*const u8; R],
            x: [*const u8; C],
            nb: usize,
            out: &mut [[f32; C]; R],
        ) {
            // SAFETY: same contract; MaddAdd needs only avx2.
            unsafe { $body::<MaddAdd, R, C>(w, x, nb, out) }
        }

        #[doc = concat!("VNNI build of the ", $ty, " tile (bit-identical results).\n\n",
            "# Safety\navx2/fma/f16c/avx512vnni/avx512vl; every `w[r]` points to `nb` ", $ty,
            " blocks, every `x[t]` to `nb` Q8_K blocks.")]
        #[target_feature(enable = "avx2,fma,f16c,avx512vnni,avx512vl")]
        pub unsafe fn $vnni<const R: usize, const C: usize>(
            w: [*const u8; R],
            x: [*const u8; C],
            nb: usize,
            out: &mut [[f32; C]; R],
        ) {
            // SAFETY: same contract; every feature Dpwssd needs is enabled here.
            unsafe { $body::<Dpwssd, R, C>(w, x, nb, out) }
        }
    )*};
}

entries! {
    q2k: tile_q2k, tile_q2k_vnni, "Q2_K";
    q3k: tile_q3k, tile_q3k_vnni, "Q3_K";
    q4k: tile_q4k, tile_q4k_vnni, "Q4_K";
    q5k: tile_q5k, tile_q5k_vnni, "Q5_K";
    q6k: tile_q6k, tile_q6k_vnni, "Q6_K";
}
