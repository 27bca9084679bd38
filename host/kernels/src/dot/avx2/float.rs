//! F32 / F16 / BF16 tiles: one 8-lane FMA accumulator per (row, token), scalar tail in order.
//!
//! Invariant: per pair, `acc = fma(w[i..i+8], x[i..i+8], acc)` for i = 0, 8, .., then
//! `hsum(acc)`, then the tail elements added one by one in f32 — independent of `R`, `C`.

use std::arch::x86_64::*;

use super::hsum;
use crate::quant::bf16_to_f32;

const F32: u8 = 0;
const F16: u8 = 1;
const BF16: u8 = 2;

const fn elem_size(kind: u8) -> usize {
    if kind == F32 { 4 } else { 2 }
}

/// Loads 8 elements at `p` as f32.
///
/// # Safety
/// `p` must point to `8 * elem_size(KIND)` readable bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn load8<const KIND: u8>(p: *const u8) -> __m256 {
    // SAFETY: enough readable bytes at p (caller); unaligned loads.
    unsafe {
        match KIND {
            F32 => _mm256_loadu_ps(p.cast()),
            F16 => _mm256_cvtph_ps(_mm_loadu_si128(p.cast())),
            _ => {
                let h = _mm256_cvtepu16_epi32(_mm_loadu_si128(p.cast()));
                _mm256_castsi256_ps(_mm256_slli_epi32::<16>(h))
            }
        }
    }
}

/// Reads one element at `p` as f32.
///
/// # Safety
/// `p` must point to `elem_size(KIND)` readable bytes.
#[inline(always)]
unsafe fn load1<const KIND: u8>(p: *const u8) -> f32 {
    // SAFETY: enough readable bytes at p (caller); unaligned reads.
    unsafe {
        match KIND {
            F32 => p.cast::<f32>().read_unaligned(),
            F16 => half::f16::from_bits(p.cast::<u16>().read_unaligned()).to_f32(),
            _ => bf16_to_f32(half::bf16::from_bits(p.cast::<u16>().read_unaligned())),
        }
    }
}

/// # Safety
/// avx2/fma/f16c; every `w[r]` and `x[t]` points to `n` readable elements of the kind.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn tile_float<const KIND: u8, const R: usize, const C: usize>(
    w: [*const u8; R],
    x: [*const u8; C],
    n: usize,
    out: &mut [[f32; C]; R],
) {
    let es = elem_size(KIND);
    let body = n - n % 8;
    let mut acc = [[_mm256_setzero_ps(); C]; R];
    let mut i = 0;
    while i < body {
        // SAFETY: i + 8 <= n elements for every row (caller).
        unsafe {
            let mut wv = [_mm256_setzero_ps(); R];
            for r in 0..R {
                wv[r] = load8::<KIND>(w[r].add(i * es));
            }
            for t in 0..C {
                let xv = load8::<KIND>(x[t].add(i * es));
                for r in 0..R {
                    acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
                }
            }
        }
        i += 8;
    }
    for r in 0..R {
        for t in 0..C {
            let mut s = hsum(acc[r][t]);
            for j in body..n {
                // SAFETY: j < n elements (caller).
                unsafe { s += load1::<KIND>(w[r].add(j * es)) * load1::<KIND>(x[t].add(j * es)) };
            }
            out[r][t] = s;
        }
    }
}

/// # Safety
/// avx2/fma/f16c; every `w[r]`, `x[t]` points to `n` readable f32.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn tile_f32<const R: usize, const C: usize>(
    w: [*const u8; R],
    x: [*const u8; C],
    n: usize,
    out: &mut [[f32; C]; R],
) {
    // SAFETY: same contract.
    unsafe { tile_float::<F32, R, C>(w, x, n, out) }
}

/// # Safety
/// avx2/fma/f16c; every `w[r]`, `x[t]` points to `n` readable f16.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn tile_f16<const R: usize, const C: usize>(
    w: [*const u8; R],
    x: [*const u8; C],
    n: usize,
    out: &mut [[f32; C]; R],
) {
    // SAFETY: same contract.
    unsafe { tile_float::<F16, R, C>(w, x, n, out) }
}

/// # Safety
/// avx2/fma/f16c; every `w[r]`, `x[t]` points to `n` readable bf16.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn tile_bf16<const R: usize, const C: usize>(
    w: [*const u8; R],
    x: [*const u8; C],
    n: usize,
    out: &mut [[f32; C]; R],
) {
    // SAFETY: same contract.
    unsafe { tile_float::<BF16, R, C>(w, x, n, out) }
}
