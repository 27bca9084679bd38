//! AVX-512 VNNI kernels over interleaved weights ([`crate::matmul::Interleaved`]): one vector
//! holds 4 bytes of each of 16 rows, so `vpdpbusd` with 4 activation bytes broadcast sums 16
//! rows at once, and the float step of a block (one convert, one scale product, one fma) serves
//! 16 rows instead of one.
//!
//! Weights are unsigned levels `u = value + K` (Q4_0: nibbles, K = 8; Q8_0: `q + 128`); each
//! token's block sum starts from `-K·Σx` ([`XInfo`]), so the i32 lanes are the exact signed sums.
//! Invariant (batch invariance): lane `r` of token `t` runs
//! `acc = fma(f32(Σ_int), dw · dx, acc)` block by block from 0, whatever the tile's token
//! count: the order of [`crate::dot::sequential`], bit for bit.

use std::arch::x86_64::*;

use crate::matmul::interleave::{Q4_0_GROUP_BLOCK, Q8_0_GROUP_BLOCK};
use crate::types::GgmlType;

/// Q8_0 activation block bytes.
const XB: usize = 34;

/// Per token and block: the integer sum's start `-K·Σx` and the activation scale.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
pub(crate) struct XInfo {
    pub base: i32,
    pub dx: f32,
}

/// One group × `T` tokens over `nb` blocks.
///
/// # Safety
/// avx512f/bw/vl/vnni + avx2/fma/f16c; `w` points to `nb` group blocks of the format (`Q8`:
/// Q8_0, else Q4_0); each `x[t]` to `nb` Q8_0 activation blocks, `info[t]` to their `nb`
/// [`XInfo`]s; each `out[t]` to 16 writable f32.
#[inline(always)]
unsafe fn group_tile<const T: usize, const Q8: bool>(
    w: *const u8,
    nb: usize,
    x: [*const u8; T],
    info: [*const XInfo; T],
    out: [*mut f32; T],
) {
    let gb = if Q8 {
        Q8_0_GROUP_BLOCK
    } else {
        Q4_0_GROUP_BLOCK
    };
    // SAFETY: features and pointer ranges are the caller's contract; all loads are unaligned.
    unsafe {
        let mut acc = [_mm512_setzero_ps(); T];
        let low = _mm512_set1_epi8(0x0F);
        for b in 0..nb {
            let blk = w.add(b * gb);
            let dw = _mm512_cvtph_ps(_mm256_loadu_si256(blk.cast()));
            let mut wq = [_mm512_setzero_si512(); 8];
            if Q8 {
                for (c, v) in wq.iter_mut().enumerate() {
                    *v = _mm512_loadu_si512(blk.add(32 + 64 * c).cast());
                }
            } else {
                for c in 0..4 {
                    let v = _mm512_loadu_si512(blk.add(32 + 64 * c).cast());
                    wq[c] = _mm512_and_si512(v, low);
                    wq[c + 4] = _mm512_and_si512(_mm512_srli_epi16::<4>(v), low);
                }
            }
            for t in 0..T {
                let xq = x[t].add(b * XB + 2);
                let inf = info[t].add(b).read();
                let mut s = _mm512_set1_epi32(inf.base);
                for (c, &wv) in wq.iter().enumerate() {
                    let xv = _mm512_set1_epi32(xq.add(4 * c).cast::<i32>().read_unaligned());
                    s = _mm512_dpbusd_epi32(s, wv, xv);
                }
                let scale = _mm512_mul_ps(dw, _mm512_set1_ps(inf.dx));
                acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), scale, acc[t]);
            }
        }
        for t in 0..T {
            _mm512_storeu_ps(out[t], acc[t]);
        }
    }
}

/// `out[t][r] = dot(row r of the group, x[t])` for the 16 rows of one interleaved group of `ty`
/// (Q4_0 or Q8_0; anything else is treated as Q4_0).
///
/// # Safety
/// As [`group_tile`], with `Q8` meaning `ty == Q8_0`.
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
        if ty == GgmlType::Q8_0 {
            group_tile::<T, true>(w, nb, x, info, out)
        } else {
            group_tile::<T, false>(w, nb, x, info, out)
        }
    }
}
