//! 512-bit K-quant tiles (Q4_K, Q5_K, Q6_K against Q8_K), bit-identical to the 256-bit tiles of
//! `kquants`.
//!
//! A super-block's 8 vectors of 32 levels become 4 zmm pairs (`[vector 2k | vector 2k + 1]`),
//! each met by 64 contiguous Q8_K values: per pair one `maddubs` (the same saturating i16 pair
//! sums as the 256-bit tile) and one `vpdpwssd` with the pair's scales (the same exact
//! `madd` + `add`). Folding the high 256 bits onto the low ones gives, lane by lane, the very
//! i32 sums the 256-bit tile accumulates (integer addition is exact in any order), and from
//! there the float steps (`cvt`, `d * xd`, `fma`, offsets / mins via `bsums`, [`hsum`]) are the
//! 256-bit tile's own, so every (row, token) result has the same bits in every build.
//! Invariant (batch invariance): per (row, token) the op sequence is independent of `R`, `C`.

use std::arch::x86_64::*;

use super::kquants::hsum_i32;
use super::{hsum, load_f16, load_f32, load128, load256};

/// Q8_K field offsets: d: f32 at 0, qs at 4, bsums at 260; 292 bytes per block.
const Q8K_QS: usize = 4;
const Q8K_BSUMS: usize = 260;
const Q8K_SIZE: usize = 292;

/// One decoded weight super-block.
#[derive(Clone, Copy)]
struct Decoded {
    /// Super-block scale.
    d: f32,
    /// Super-block min scale (Q4_K, Q5_K; unused for Q6_K).
    dmin: f32,
    /// Unsigned levels, pair `k` = vectors `2k`, `2k + 1` (elements `64k..64k + 64`).
    lv: [__m512i; 4],
    /// The i16 scale of every level pair's sub-block, laid out like `lv`'s i16 pairs.
    sc: [__m512i; 4],
    /// i16 weights for `madd(bsums, aux)`: the mins (each twice) of Q4_K / Q5_K, the 16
    /// scales of Q6_K.
    aux: __m256i,
}

/// `[a; 32] ++ [b; 32]` as bytes.
#[inline(always)]
fn halves_epi8(a: i8, b: i8) -> __m512i {
    // SAFETY: avx512f/avx2 are enabled in every caller (the entry points below).
    unsafe {
        _mm512_inserti64x4::<1>(
            _mm512_castsi256_si512(_mm256_set1_epi8(a)),
            _mm256_set1_epi8(b),
        )
    }
}

/// The pair scales of 32-element sub-blocks (Q4_K, Q5_K): i16 lanes `16q..16q + 16` of pair
/// `k` (q = 0, 1) hold scale `2k + q` of `sc16` (8 valid lanes).
#[inline(always)]
fn pair_scales32(sc16: __m256i) -> [__m512i; 4] {
    // SAFETY: avx512bw enabled in every caller.
    unsafe {
        let src = _mm512_castsi256_si512(sc16);
        let base = _mm512_inserti64x4::<1>(_mm512_setzero_si512(), _mm256_set1_epi16(1));
        let mut out = [src; 4];
        for (k, o) in out.iter_mut().enumerate() {
            let idx = _mm512_add_epi16(base, _mm512_set1_epi16(2 * k as i16));
            *o = _mm512_permutexvar_epi16(idx, src);
        }
        out
    }
}

/// The pair scales of 16-element sub-blocks (Q6_K): 128-bit lane `q` of pair `k` holds scale
/// `4k + q` of `sc16`.
#[inline(always)]
fn pair_scales16(sc16: __m256i) -> [__m512i; 4] {
    // SAFETY: avx512bw enabled in every caller.
    unsafe {
        let src = _mm512_castsi256_si512(sc16);
        let base = _mm512_set_epi64(
            0x0003_0003_0003_0003,
            0x0003_0003_0003_0003,
            0x0002_0002_0002_0002,
            0x0002_0002_0002_0002,
            0x0001_0001_0001_0001,
            0x0001_0001_0001_0001,
            0,
            0,
        );
        let mut out = [src; 4];
        for (k, o) in out.iter_mut().enumerate() {
            let idx = _mm512_add_epi16(base, _mm512_set1_epi16(4 * k as i16));
            *o = _mm512_permutexvar_epi16(idx, src);
        }
        out
    }
}

/// Scales (8 lanes) and doubled mins (16 lanes) of a Q4_K / Q5_K block's 12 packed bytes
/// (`scale_min_k4` on 32-bit words: scales 0-3 and mins 0-3 are the low 6 bits of bytes 0-3 /
/// 4-7, scales / mins 4-7 the nibbles of bytes 8-11 with bits 6-7 of bytes 0-3 / 4-7 on top).
///
/// # Safety
/// `p` points to 12 readable bytes; avx2 enabled in the caller.
#[inline(always)]
unsafe fn scales_mins(p: *const u8) -> (__m256i, __m256i) {
    const LOW6: u32 = 0x3f3f_3f3f;
    const NIB: u32 = 0x0f0f_0f0f;
    const TOP2: u32 = 0x0303_0303;
    // SAFETY: 12 readable bytes (caller); unaligned reads.
    unsafe {
        let word = |i: usize| p.add(4 * i).cast::<u32>().read_unaligned();
        let (u0, u1, u2) = (word(0), word(1), word(2));
        let sc_lo = u0 & LOW6;
        let sc_hi = (u2 & NIB) | (((u0 >> 6) & TOP2) << 4);
        let mn_lo = u1 & LOW6;
        let mn_hi = ((u2 >> 4) & NIB) | (((u1 >> 6) & TOP2) << 4);
        let sc = _mm_set_epi32(0, 0, sc_hi as i32, sc_lo as i32);
        let mn = _mm_set_epi32(0, 0, mn_hi as i32, mn_lo as i32);
        (
            _mm256_cvtepu8_epi16(sc),
            _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mn, mn)),
        )
    }
}

/// The shared body; `decode(block)` yields a [`Decoded`] weight super-block of `BS` bytes.
/// `SHIFT` = 0: scale + min format, `out = hsum(acc) - Σ dmin * xd * Σ min * bsum`;
/// `SHIFT` > 0: levels carry an offset of `1 << SHIFT`, removed as `(Σ scale * bsum) << SHIFT`.
///
/// # Safety
/// avx2/fma/f16c/avx512f/bw/vl/vnni; every `w[r]` points to `nb` weight blocks, every `x[t]` to
/// `nb` Q8_K blocks; `decode` must be safe on any of those weight blocks.
#[inline(always)]
unsafe fn body<const R: usize, const C: usize, const BS: usize, const SHIFT: i32>(
    decode: impl Fn(*const u8) -> Decoded,
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
            let mut dec = [Decoded {
                d: 0.0,
                dmin: 0.0,
                lv: [_mm512_setzero_si512(); 4],
                sc: [_mm512_setzero_si512(); 4],
                aux: _mm256_setzero_si256(),
            }; R];
            for r in 0..R {
                dec[r] = decode(w[r].add(b * BS));
            }
            for t in 0..C {
                let px = x[t].add(b * Q8K_SIZE);
                let xd = load_f32(px);
                let xdv = _mm256_set1_ps(xd);
                let bsums = load256(px.add(Q8K_BSUMS));
                for r in 0..R {
                    let mut s = _mm512_setzero_si512();
                    for k in 0..4 {
                        let xq = _mm512_loadu_si512(px.add(Q8K_QS + 64 * k).cast());
                        let p = _mm512_maddubs_epi16(dec[r].lv[k], xq);
                        s = _mm512_dpwssd_epi32(s, p, dec[r].sc[k]);
                    }
                    let mut sumi = _mm256_add_epi32(
                        _mm512_castsi512_si256(s),
                        _mm512_extracti64x4_epi64::<1>(s),
                    );
                    let corr = _mm256_madd_epi16(bsums, dec[r].aux);
                    if SHIFT > 0 {
                        sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32::<SHIFT>(corr));
                    } else {
                        let summ = hsum_i32(corr);
                        accm[r][t] += (dec[r].dmin * xd) * summ as f32;
                    }
                    let sf = _mm256_cvtepi32_ps(sumi);
                    let d = _mm256_mul_ps(_mm256_set1_ps(dec[r].d), xdv);
                    acc[r][t] = _mm256_fmadd_ps(d, sf, acc[r][t]);
                }
            }
        }
        for r in 0..R {
            for t in 0..C {
                out[r][t] = if SHIFT > 0 {
                    hsum(acc[r][t])
                } else {
                    hsum(acc[r][t]) - accm[r][t]
                };
            }
        }
    }
}

/// The 4 level pairs of 32 nibble bytes per pair at `q` (`q + 32k`: low nibbles = vector `2k`,
/// high nibbles = vector `2k + 1`).
///
/// # Safety
/// `q` points to 128 readable bytes; avx512f/bw enabled in the caller.
#[inline(always)]
unsafe fn nibble_pairs(q: *const u8) -> [__m512i; 4] {
    // SAFETY: 128 readable bytes (caller); unaligned loads.
    unsafe {
        let mask = _mm512_set1_epi8(0x0F);
        let shift = _mm512_set_epi64(4, 4, 4, 4, 0, 0, 0, 0);
        let mut out = [mask; 4];
        for (k, o) in out.iter_mut().enumerate() {
            let v = _mm512_broadcast_i64x4(load256(q.add(32 * k)));
            *o = _mm512_and_si512(_mm512_srlv_epi64(v, shift), mask);
        }
        out
    }
}

/// # Safety
/// avx2/fma/f16c/avx512f/bw/vl/vnni; every `w[r]` points to `nb` Q4_K blocks, every `x[t]` to
/// `nb` Q8_K blocks.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub unsafe fn tile_q4k<const R: usize, const C: usize>(
    w: [*const u8; R],
    x: [*const u8; C],
    nb: usize,
    out: &mut [[f32; C]; R],
) {
    // d at 0, dmin at 2, scales at 4 (12), qs at 16 (128).
    let decode = |p: *const u8| {
        // SAFETY: `p` is a whole Q4_K block (caller); features enabled here.
        unsafe {
            let (sc16, mins) = scales_mins(p.add(4));
            Decoded {
                d: load_f16(p),
                dmin: load_f16(p.add(2)),
                lv: nibble_pairs(p.add(16)),
                sc: pair_scales32(sc16),
                aux: mins,
            }
        }
    };
    // SAFETY: same contract; Q4_K blocks are 144 bytes.
    unsafe { body::<R, C, 144, 0>(decode, w, x, nb, out) }
}

/// # Safety
/// avx2/fma/f16c/avx512f/bw/vl/vnni; every `w[r]` points to `nb` Q5_K blocks, every `x[t]` to
/// `nb` Q8_K blocks.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub unsafe fn tile_q5k<const R: usize, const C: usize>(
    w: [*const u8; R],
    x: [*const u8; C],
    nb: usize,
    out: &mut [[f32; C]; R],
) {
    // d at 0, dmin at 2, scales at 4 (12), qh at 16 (32), qs at 48 (128).
    let decode = |p: *const u8| {
        // SAFETY: `p` is a whole Q5_K block (caller); features enabled here.
        unsafe {
            let (sc16, mins) = scales_mins(p.add(4));
            let qh = _mm512_broadcast_i64x4(load256(p.add(16)));
            let bit4 = _mm512_set1_epi8(0x10);
            let mut lv = nibble_pairs(p.add(48));
            for (k, v) in lv.iter_mut().enumerate() {
                // Bit 4 of vector j's levels is bit j of its qh byte.
                let sel = halves_epi8(1 << (2 * k), (1u8 << (2 * k + 1)) as i8);
                let high = _mm512_test_epi8_mask(qh, sel);
                *v = _mm512_mask_add_epi8(*v, high, *v, bit4);
            }
            Decoded {
                d: load_f16(p),
                dmin: load_f16(p.add(2)),
                lv,
                sc: pair_scales32(sc16),
                aux: mins,
            }
        }
    };
    // SAFETY: same contract; Q5_K blocks are 176 bytes.
    unsafe { body::<R, C, 176, 0>(decode, w, x, nb, out) }
}

/// # Safety
/// avx2/fma/f16c/avx512f/bw/vl/vnni; every `w[r]` points to `nb` Q6_K blocks, every `x[t]` to
/// `nb` Q8_K blocks.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub unsafe fn tile_q6k<const R: usize, const C: usize>(
    w: [*const u8; R],
    x: [*const u8; C],
    nb: usize,
    out: &mut [[f32; C]; R],
) {
    // ql at 0 (128), qh at 128 (64), scales at 192 (16 × i8), d at 208.
    let decode = |p: *const u8| {
        // SAFETY: `p` is a whole Q6_K block (caller); features enabled here.
        unsafe {
            let m4 = _mm512_set1_epi8(0x0F);
            let m30 = _mm512_set1_epi8(0x30);
            let up = _mm512_set_epi64(2, 2, 2, 2, 4, 4, 4, 4);
            let down = _mm512_set_epi64(2, 2, 2, 2, 0, 0, 0, 0);
            let mut lv = [_mm512_setzero_si512(); 4];
            for h in 0..2 {
                // Vectors 4h..4h + 4: low nibbles of ql[64h..64h + 64] with qh bits 0-1 / 2-3,
                // then their high nibbles with qh bits 4-5 / 6-7, as bits 4-5 of the level.
                let ql = _mm512_loadu_si512(p.add(64 * h).cast());
                let qh = _mm512_broadcast_i64x4(load256(p.add(128 + 32 * h)));
                let hi0 = _mm512_and_si512(_mm512_sllv_epi64(qh, up), m30);
                let hi1 = _mm512_and_si512(_mm512_srlv_epi64(qh, down), m30);
                lv[2 * h] = _mm512_or_si512(_mm512_and_si512(ql, m4), hi0);
                lv[2 * h + 1] =
                    _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16::<4>(ql), m4), hi1);
            }
            let sc16 = _mm256_cvtepi8_epi16(load128(p.add(192)));
            Decoded {
                d: load_f16(p.add(208)),
                dmin: 0.0,
                lv,
                sc: pair_scales16(sc16),
                aux: sc16,
            }
        }
    };
    // SAFETY: same contract; Q6_K blocks are 210 bytes.
    unsafe { body::<R, C, 210, 5>(decode, w, x, nb, out) }
}
