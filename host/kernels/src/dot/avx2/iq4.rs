//! Table-lookup 4-bit tiles: IQ4_NL·Q8_0, MXFP4·Q8_0 and IQ4_XS·Q8_K.
//!
//! Indices are turned into the signed table values with one `pshufb` (the 16-entry table in
//! both lanes: [`KVALUES_IQ4NL`] or [`KVALUES_MXFP4`]); products use the sign trick of `q8`
//! (|w| ≤ 127, |x| ≤ 127: no i16 pair sum saturates). IQ4_NL and MXFP4 go through Q8_0's
//! shared 32-element body (with a VNNI build, bit-identical), MXFP4 with its E8M0 scale
//! decoded to f32 as the scalar reference does; IQ4_XS applies its 6-bit sub-block scales
//! with `madd` like the K-quants.
//! Invariant: per (row, token) the op sequence is independent of `R`, `C`.

use std::arch::x86_64::*;

use super::q8::{Int8Dot, Madd, Vnni, tile_blocks32};
use super::q32::nibbles;
use super::{hsum, load_f16, load_f32, load128, load256};
use crate::quant::{KVALUES_IQ4NL, KVALUES_MXFP4, e8m0_to_f32_half, xs_scale};

/// Q8_K field offsets: d: f32 at 0, qs at 4; 292 bytes per block.
const Q8K_QS: usize = 4;
const Q8K_SIZE: usize = 292;

/// The 32 values of `table` at 16 bytes of indices, in element order (low nibbles first).
///
/// # Safety
/// `p` must point to 16 readable bytes; avx2 present.
#[inline(always)]
unsafe fn values32(table: &[i8; 16], p: *const u8) -> __m256i {
    // SAFETY: 16 readable bytes (caller); the table is 16 bytes; avx2 enabled (caller).
    unsafe {
        let table = _mm256_broadcastsi128_si256(load128(table.as_ptr().cast()));
        _mm256_shuffle_epi8(table, nibbles(p))
    }
}

/// IQ4_NL body.
///
/// # Safety
/// avx2/fma/f16c and `D`'s features; every `w[r]` points to `nb` IQ4_NL blocks, every `x[t]` to
/// `nb` Q8_0 blocks.
#[inline(always)]
unsafe fn iq4_nl<D: Int8Dot, const R: usize, const C: usize>(
    w: [*const u8; R],
    x: [*const u8; C],
    nb: usize,
    out: &mut [[f32; C]; R],
) {
    let decode = |r: usize, b: usize| {
        // SAFETY: b < nb blocks of 18 bytes at w[r] (caller); features enabled (caller).
        unsafe {
            let p = w[r].add(b * 18);
            (load_f16(p), values32(&KVALUES_IQ4NL, p.add(2)))
        }
    };
    // SAFETY: same contract.
    unsafe { tile_blocks32::<D, R, C>(decode, x, nb, out) }
}

/// # Safety
/// avx2/fma/f16c; every `w[r]` points to `nb` IQ4_NL blocks, every `x[t]` to `nb` Q8_0 blocks.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn tile_iq4_nl<const R: usize, const C: usize>(
    w: [*const u8; R],
    x: [*const u8; C],
    nb: usize,
    out: &mut [[f32; C]; R],
) {
    // SAFETY: same contract; Madd needs only avx2.
    unsafe { iq4_nl::<Madd, R, C>(w, x, nb, out) }
}

/// [`tile_iq4_nl`] with VNNI (bit-identical results).
///
/// # Safety
/// avx2/fma/f16c/avx512vnni/avx512vl; every `w[r]` points to `nb` IQ4_NL blocks, every `x[t]`
/// to `nb` Q8_0 blocks.
#[target_feature(enable = "avx2,fma,f16c,avx512vnni,avx512vl")]
pub unsafe fn tile_iq4_nl_vnni<const R: usize, const C: usize>(
    w: [*const u8; R],
    x: [*const u8; C],
    nb: usize,
    out: &mut [[f32; C]; R],
) {
    // SAFETY: same contract; every feature Vnni needs is enabled here.
    unsafe { iq4_nl::<Vnni, R, C>(w, x, nb, out) }
}

/// MXFP4 body: IQ4_NL's with a 17-byte block (E8M0 exponent at 0, codes at 1).
///
/// # Safety
/// avx2/fma/f16c and `D`'s features; every `w[r]` points to `nb` MXFP4 blocks, every `x[t]` to
/// `nb` Q8_0 blocks.
#[inline(always)]
unsafe fn mxfp4<D: Int8Dot, const R: usize, const C: usize>(
    w: [*const u8; R],
    x: [*const u8; C],
    nb: usize,
    out: &mut [[f32; C]; R],
) {
    let decode = |r: usize, b: usize| {
        // SAFETY: b < nb blocks of 17 bytes at w[r] (caller); features enabled (caller).
        unsafe {
            let p = w[r].add(b * 17);
            (
                e8m0_to_f32_half(p.read()),
                values32(&KVALUES_MXFP4, p.add(1)),
            )
        }
    };
    // SAFETY: same contract.
    unsafe { tile_blocks32::<D, R, C>(decode, x, nb, out) }
}

/// # Safety
/// avx2/fma/f16c; every `w[r]` points to `nb` MXFP4 blocks, every `x[t]` to `nb` Q8_0 blocks.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn tile_mxfp4<const R: usize, const C: usize>(
    w: [*const u8; R],
    x: [*const u8; C],
    nb: usize,
    out: &mut [[f32; C]; R],
) {
    // SAFETY: same contract; Madd needs only avx2.
    unsafe { mxfp4::<Madd, R, C>(w, x, nb, out) }
}

/// [`tile_mxfp4`] with VNNI (bit-identical results).
///
/// # Safety
/// avx2/fma/f16c/avx512vnni/avx512vl; every `w[r]` points to `nb` MXFP4 blocks, every `x[t]`
/// to `nb` Q8_0 blocks.
#[target_feature(enable = "avx2,fma,f16c,avx512vnni,avx512vl")]
pub unsafe fn tile_mxfp4_vnni<const R: usize, const C: usize>(
    w: [*const u8; R],
    x: [*const u8; C],
    nb: usize,
    out: &mut [[f32; C]; R],
) {
    // SAFETY: same contract; every feature Vnni needs is enabled here.
    unsafe { mxfp4::<Vnni, R, C>(w, x, nb, out) }
}

/// IQ4_XS · Q8_K: per sub-block of 32, `maddubs(|w|, sign(x, w))` then `madd` with the
/// sub-block's scale; one exact i32 sum per super-block, one `fma` with `d * dx`.
///
/// # Safety
/// avx2/fma/f16c; every `w[r]` points to `nb` IQ4_XS blocks, every `x[t]` to `nb` Q8_K blocks.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn tile_iq4_xs<const R: usize, const C: usize>(
    w: [*const u8; R],
    x: [*const u8; C],
    nb: usize,
    out: &mut [[f32; C]; R],
) {
    // SAFETY: blocks readable (caller); all loads unaligned.
    unsafe {
        let mut acc = [[_mm256_setzero_ps(); C]; R];
        for b in 0..nb {
            let mut wd = [0.0f32; R];
            let mut vals = [[_mm256_setzero_si256(); 8]; R];
            let mut scales = [[_mm256_setzero_si256(); 8]; R];
            for r in 0..R {
                // d at 0, scales_h at 2, scales_l at 4 (4 bytes), qs at 8 (128).
                let p = w[r].add(b * 136);
                wd[r] = load_f16(p);
                let h = p.add(2).cast::<u16>().read_unaligned();
                let sl: [u8; 4] = p.add(4).cast::<[u8; 4]>().read_unaligned();
                for ib in 0..8 {
                    vals[r][ib] = values32(&KVALUES_IQ4NL, p.add(8 + 16 * ib));
                    scales[r][ib] = _mm256_set1_epi16(xs_scale(h, &sl, ib) as i16);
                }
            }
            for t in 0..C {
                let px = x[t].add(b * Q8K_SIZE);
                let xdv = _mm256_set1_ps(load_f32(px));
                for r in 0..R {
                    let mut sumi = _mm256_setzero_si256();
                    for ib in 0..8 {
                        let xq = load256(px.add(Q8K_QS + 32 * ib));
                        let v = vals[r][ib];
                        let p16 = _mm256_maddubs_epi16(_mm256_abs_epi8(v), _mm256_sign_epi8(xq, v));
                        sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p16, scales[r][ib]));
                    }
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
