//! AVX-512 VNNI kernels over interleaved weights ([`crate::matmul::Interleaved`]): one vector
//! holds 4 bytes of each of 16 rows, so `vpdpbusd` with 4 activation bytes broadcast sums 16
//! rows at once, and the float step of a block (one convert, one scale product, one fma) serves
//! 16 rows instead of one.
//!
//! Weights are unsigned levels `u = value + K` (Q4_0: nibbles, K = 8; Q5_0: 5-bit levels,
//! K = 16; Q8_0: `q + 128`; Q4_1 / Q5_1: their levels, K = 0, the min entering as `m_w · s_x`;
//! IQ4_NL and MXFP4: their table's value + 128, looked up from the nibble by one byte shuffle,
//! K = 128); each token's block sum starts from `-K·Σx` ([`XInfo`]), so the i32 lanes are the
//! exact signed sums. The 16 rows' scales are f16, converted at once; MXFP4's are E8M0 bytes,
//! decoded to f32 bits as `GGML_E8M0_TO_FP32_HALF` builds them.
//! Invariant (batch invariance): lane `r` of token `t` runs
//! `acc = fma(f32(Σ_int), dw · dx, acc)` (Q4_1, Q5_1: then `fma(m_w, s_x, acc)`) block by block
//! from 0, whatever the tile's token count: the order of [`crate::dot::sequential`], bit for
//! bit.

use std::arch::x86_64::*;

use super::interleaved_iq4xs::IQ4NL_LEVELS;
use crate::types::GgmlType;

/// Per token and block: the integer sum's start `-K·Σx`, the activation scale and (Q8_1
/// activations) `s = d·Σx`.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
pub(crate) struct XInfo {
    pub base: i32,
    pub dx: f32,
    pub sx: f32,
}

/// Formats, as const parameters.
pub(crate) const Q4_0: u8 = 0;
pub(crate) const Q8_0: u8 = 1;
pub(crate) const Q5_0: u8 = 2;
pub(crate) const Q4_1: u8 = 3;
pub(crate) const IQ4_NL: u8 = 4;
pub(crate) const Q5_1: u8 = 5;
pub(crate) const MXFP4: u8 = 6;

/// The format constant of `ty` (Q4_0 for a type without one).
pub(crate) fn format_of(ty: GgmlType) -> u8 {
    match ty {
        GgmlType::Q8_0 => Q8_0,
        GgmlType::Q5_0 => Q5_0,
        GgmlType::Q4_1 => Q4_1,
        GgmlType::Q5_1 => Q5_1,
        GgmlType::IQ4NL => IQ4_NL,
        GgmlType::Mxfp4 => MXFP4,
        _ => Q4_0,
    }
}

/// Group block bytes and the offset of its quant chunks for format `F`.
#[inline(always)]
pub(crate) const fn block_layout<const F: u8>() -> (usize, usize) {
    match F {
        Q4_0 | IQ4_NL => (32 + 4 * 64, 32),
        MXFP4 => (16 + 4 * 64, 16),
        Q8_0 => (32 + 8 * 64, 32),
        Q5_0 => (32 + 64 + 4 * 64, 96),
        Q5_1 => (64 + 64 + 4 * 64, 128),
        _ => (64 + 4 * 64, 64),
    }
}

/// The 4-bit index table of IQ4_NL / MXFP4 as unsigned levels, in every 128-bit lane.
///
/// # Safety
/// avx512f.
#[inline(always)]
pub(crate) unsafe fn level_table<const F: u8>() -> __m512i {
    let levels = if F == MXFP4 {
        &MXFP4_LEVELS
    } else {
        &IQ4NL_LEVELS
    };
    // SAFETY: 16 readable bytes; features (caller).
    unsafe { _mm512_broadcast_i32x4(_mm_loadu_si128(levels.as_ptr().cast())) }
}

/// The unsigned levels of one group block of format `F` at `blk` as 8 chunks (chunk `c`: bytes
/// `4c..4c + 4` of the block's elements in each of the 16 rows, row `r` at bytes `4r..`).
///
/// # Safety
/// avx512f/bw; `blk` points to one group block of the format; `table` from [`level_table`].
#[inline(always)]
pub(crate) unsafe fn unpack_block<const F: u8>(
    blk: *const u8,
    quants: usize,
    table: __m512i,
) -> [__m512i; 8] {
    // SAFETY: the block's bytes are readable (caller); all loads unaligned.
    unsafe {
        let low = _mm512_set1_epi8(0x0F);
        let mut wq = [_mm512_setzero_si512(); 8];
        if F == Q8_0 {
            for (c, v) in wq.iter_mut().enumerate() {
                *v = _mm512_loadu_si512(blk.add(quants + 64 * c).cast());
            }
        } else {
            for c in 0..4 {
                let v = _mm512_loadu_si512(blk.add(quants + 64 * c).cast());
                wq[c] = _mm512_and_si512(v, low);
                wq[c + 4] = _mm512_and_si512(_mm512_srli_epi16::<4>(v), low);
            }
        }
        if F == IQ4_NL || F == MXFP4 {
            for v in &mut wq[..] {
                *v = _mm512_shuffle_epi8(table, *v);
            }
        }
        if F == Q5_0 || F == Q5_1 {
            let masks = if F == Q5_0 { 32 } else { 64 };
            let sixteen = _mm512_set1_epi8(16);
            for (c, v) in wq.iter_mut().enumerate() {
                let m = blk.add(masks + 8 * c).cast::<u64>().read_unaligned();
                *v = _mm512_or_si512(*v, _mm512_maskz_mov_epi8(m, sixteen));
            }
        }
        wq
    }
}

/// MXFP4's table as unsigned levels (`value + 128`), for `vpshufb` (repeated per 128-bit lane).
const MXFP4_LEVELS: [u8; 16] = {
    let mut u = [0u8; 16];
    let mut i = 0;
    while i < 16 {
        u[i] = (crate::quant::KVALUES_MXFP4[i] as i16 + 128) as u8;
        i += 1;
    }
    u
};

/// The f32 scales `2^(e - 128)` of 16 E8M0 bytes at `p` (`GGML_E8M0_TO_FP32_HALF` lane by
/// lane: `(e - 1) << 23`, the subnormal `0x00200000 << e` for `e` < 2).
///
/// # Safety
/// avx512f/bw/vl; `p` points to 16 readable bytes.
#[inline(always)]
pub(crate) unsafe fn e8m0_half_x16(p: *const u8) -> __m512 {
    // SAFETY: 16 readable bytes (caller), unaligned load; features enabled (caller).
    unsafe {
        let e = _mm512_cvtepu8_epi32(_mm_loadu_si128(p.cast()));
        let normal = _mm512_slli_epi32::<23>(_mm512_sub_epi32(e, _mm512_set1_epi32(1)));
        let small = _mm512_sllv_epi32(_mm512_set1_epi32(0x0020_0000), e);
        let is_small = _mm512_cmplt_epu32_mask(e, _mm512_set1_epi32(2));
        _mm512_castsi512_ps(_mm512_mask_blend_epi32(is_small, normal, small))
    }
}

/// One group × `T` tokens over `nb` blocks of format `F`.
///
/// # Safety
/// avx512f/bw/vl/vnni + avx2/fma/f16c; `w` points to `nb` group blocks of the format
/// ([`crate::matmul::interleave`]); each `x[t]` to `nb` activation blocks of its
/// `vec_dot_type`, `info[t]` to their `nb` [`XInfo`]s; each `out[t]` to 16 writable f32.
#[inline(always)]
unsafe fn group_tile<const T: usize, const F: u8>(
    w: *const u8,
    nb: usize,
    x: [*const u8; T],
    info: [*const XInfo; T],
    out: [*mut f32; T],
) {
    let (gb, quants) = block_layout::<F>();
    let with_min = F == Q4_1 || F == Q5_1;
    // Activation block bytes and the offset of its int8 values (Q8_1 for Q4_1 / Q5_1, else Q8_0).
    let (xb, xq_off) = if with_min { (36, 4) } else { (34, 2) };
    // SAFETY: features and pointer ranges are the caller's contract; all loads are unaligned.
    unsafe {
        let mut acc = [_mm512_setzero_ps(); T];
        let table = level_table::<F>();
        for b in 0..nb {
            let blk = w.add(b * gb);
            let dw = if F == MXFP4 {
                e8m0_half_x16(blk)
            } else {
                _mm512_cvtph_ps(_mm256_loadu_si256(blk.cast()))
            };
            let wq = unpack_block::<F>(blk, quants, table);
            let mw = if with_min {
                _mm512_cvtph_ps(_mm256_loadu_si256(blk.add(32).cast()))
            } else {
                _mm512_setzero_ps()
            };
            for t in 0..T {
                let xq = x[t].add(b * xb + xq_off);
                let inf = info[t].add(b).read();
                let mut s = _mm512_set1_epi32(inf.base);
                for (c, &wv) in wq.iter().enumerate() {
                    let xv = _mm512_set1_epi32(xq.add(4 * c).cast::<i32>().read_unaligned());
                    s = _mm512_dpbusd_epi32(s, wv, xv);
                }
                let scale = _mm512_mul_ps(dw, _mm512_set1_ps(inf.dx));
                acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), scale, acc[t]);
                if with_min {
                    acc[t] = _mm512_fmadd_ps(mw, _mm512_set1_ps(inf.sx), acc[t]);
                }
            }
        }
        for t in 0..T {
            _mm512_storeu_ps(out[t], acc[t]);
        }
    }
}

/// `out[t][r] = dot(row r of the group, x[t])` for the 16 rows of one interleaved group of `ty`
/// (Q4_0, Q8_0, Q5_0, Q4_1, Q5_1, IQ4_NL or MXFP4; another type is treated as Q4_0).
///
/// # Safety
/// As [`group_tile`] for the format `ty`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(crate) unsafe fn group<const T: usize>(
    ty: GgmlType,
    w: *const u8,
    nb: usize,
    x: [*const u8; T],
    info: [*const XInfo; T],
    out: [*mut f32; T],
) {
    // SAFETY: forwarded.
    unsafe {
        match ty {
            GgmlType::Q8_0 => group_tile::<T, Q8_0>(w, nb, x, info, out),
            GgmlType::Q5_0 => group_tile::<T, Q5_0>(w, nb, x, info, out),
            GgmlType::Q4_1 => group_tile::<T, Q4_1>(w, nb, x, info, out),
            GgmlType::Q5_1 => group_tile::<T, Q5_1>(w, nb, x, info, out),
            GgmlType::IQ4NL => group_tile::<T, IQ4_NL>(w, nb, x, info, out),
            GgmlType::Mxfp4 => group_tile::<T, MXFP4>(w, nb, x, info, out),
            _ => group_tile::<T, Q4_0>(w, nb, x, info, out),
        }
    }
}
