//! 512-bit versions of attention's row loops ([`super::rows`]) that give the AVX2 paths' bits:
//! a dot product computes two rows per vector (lanes 0–7 one row, 8–15 the next) with the AVX2
//! path's per-lane fma chain and the same three-step horizontal sum, and the query is converted
//! once per call instead of once per row; a V sum keeps up to eight vectors of head columns in
//! registers across the rows (independent chains instead of one per eight columns), with the
//! same separate multiply and add per element in ascending row order. Also f16 rounding of a
//! slice, vectorized with the same round-to-nearest-even as F16C's scalar conversion.
//!
//! Invariant: every function here is bit-identical to its AVX2 counterpart (tests below), so
//! which path runs never changes a result.

use std::arch::x86_64::*;

use half::f16;

/// Widest query head kept converted in registers by [`dot_rows_f16`]; wider heads use the AVX2
/// path (same bits).
pub(super) const MAX_DOT_WIDTH: usize = 256;

/// The AVX2 path's horizontal sum of each 8-lane half of `v`, in lanes 0 and 8:
/// `((a0+a4) + (a2+a6)) + ((a1+a5) + (a3+a7))`.
#[inline(always)]
pub(super) unsafe fn hsum_halves(v: __m512) -> __m512 {
    // SAFETY: register-only operations; the caller has avx512f.
    unsafe {
        // 128-bit blocks [1,0,3,2]: lanes i < 4 of each half get a[i] + a[i+4].
        let s = _mm512_add_ps(v, _mm512_shuffle_f32x4::<0b10_11_00_01>(v, v));
        // Within each block [2,3,0,1]: lanes 0, 1 get s0+s2, s1+s3.
        let u = _mm512_add_ps(s, _mm512_permute_ps::<0b01_00_11_10>(s));
        // Within each block [1,0,3,2]: lane 0 gets u0+u1.
        _mm512_add_ps(u, _mm512_permute_ps::<0b10_11_00_01>(u))
    }
}

/// As [`super::rows::dot_rows_f16`] (AVX2 path), `q.len() <= MAX_DOT_WIDTH`, bounds checked by
/// the caller.
///
/// # Safety
/// avx512f + avx2/fma/f16c; `(out.len()-1)·stride + off + q.len() <= rows.len()`.
#[target_feature(enable = "avx2,fma,f16c,avx512f")]
pub(super) unsafe fn dot_rows_f16(
    q: &[f16],
    rows: &[f16],
    stride: usize,
    off: usize,
    out: &mut [f32],
) {
    let w = q.len();
    debug_assert!(w <= MAX_DOT_WIDTH);
    let chunks = w / 8;
    let full = chunks * 8;
    // The query's 8-element chunks, converted once and duplicated into both halves.
    let mut qv = [_mm512_setzero_ps(); MAX_DOT_WIDTH / 8];
    for (c, slot) in qv.iter_mut().enumerate().take(chunks) {
        // SAFETY: 8c + 8 <= full <= w.
        unsafe {
            let h = _mm_loadu_si128(q.as_ptr().add(8 * c).cast());
            *slot = _mm512_cvtph_ps(_mm256_set_m128i(h, h));
        }
    }
    let n = out.len();
    let mut j = 0;
    while j + 2 <= n {
        let (b0, b1) = (j * stride + off, (j + 1) * stride + off);
        let mut acc = _mm512_setzero_ps();
        for (c, &qc) in qv.iter().enumerate().take(chunks) {
            // SAFETY: b1 + 8c + 8 <= b1 + w <= rows.len() (caller), and b0 < b1.
            unsafe {
                let lo = _mm_loadu_si128(rows.as_ptr().add(b0 + 8 * c).cast());
                let hi = _mm_loadu_si128(rows.as_ptr().add(b1 + 8 * c).cast());
                let k = _mm512_cvtph_ps(_mm256_set_m128i(hi, lo));
                acc = _mm512_fmadd_ps(qc, k, acc);
            }
        }
        // SAFETY: register-only.
        let r = unsafe { hsum_halves(acc) };
        let mut lanes = [0.0f32; 16];
        // SAFETY: 16 writable f32.
        unsafe { _mm512_storeu_ps(lanes.as_mut_ptr(), r) };
        // The AVX2 path adds the tail's products one by one after the horizontal sum.
        out[j] = (full..w).fold(lanes[0], |s, t| s + q[t].to_f32() * rows[b0 + t].to_f32());
        out[j + 1] = (full..w).fold(lanes[8], |s, t| s + q[t].to_f32() * rows[b1 + t].to_f32());
        j += 2;
    }
    if j < n {
        let b0 = j * stride + off;
        let mut acc = _mm512_setzero_ps();
        for (c, &qc) in qv.iter().enumerate().take(chunks) {
            // SAFETY: b0 + 8c + 8 <= rows.len(); the upper half reads nothing (zeros).
            unsafe {
                let lo = _mm_loadu_si128(rows.as_ptr().add(b0 + 8 * c).cast());
                let k = _mm512_cvtph_ps(_mm256_set_m128i(_mm_setzero_si128(), lo));
                acc = _mm512_fmadd_ps(qc, k, acc);
            }
        }
        // SAFETY: register-only.
        let r = unsafe { hsum_halves(acc) };
        let s = _mm512_cvtss_f32(r);
        out[j] = (full..w).fold(s, |s, t| s + q[t].to_f32() * rows[b0 + t].to_f32());
    }
}

/// Columns of a V sum kept in registers per pass over the rows.
const AXPY_COLS: usize = 8 * 16;

/// One pass of a V sum over `V` vectors (16 columns each) at column `d`: `load(row j's first
/// column)` gives 16 columns as f32 (an f16 row is converted, an f32 row loaded).
///
/// # Safety
/// As [`axpy_rows_f16`] / [`axpy_rows_f32`], with `d + 16·V <= acc.len()`; `load(ptr)` reads
/// 16 elements at `ptr`.
#[inline(always)]
unsafe fn axpy_pass<const V: usize, T>(
    acc: &mut [f32],
    p: &[f32],
    rows: &[T],
    stride: usize,
    off: usize,
    d: usize,
    load: impl Fn(*const T) -> __m512,
) {
    // SAFETY: d + 16V <= acc.len(); row j's columns off + d .. off + d + 16V lie inside rows.
    unsafe {
        let mut a = [_mm512_setzero_ps(); V];
        for (v, slot) in a.iter_mut().enumerate() {
            *slot = _mm512_loadu_ps(acc.as_ptr().add(d + 16 * v));
        }
        for (j, &pj) in p.iter().enumerate() {
            let pv = _mm512_set1_ps(pj);
            let base = rows.as_ptr().add(j * stride + off + d);
            for (v, slot) in a.iter_mut().enumerate() {
                *slot = _mm512_add_ps(*slot, _mm512_mul_ps(pv, load(base.add(16 * v))));
            }
        }
        for (v, slot) in a.iter().enumerate() {
            _mm512_storeu_ps(acc.as_mut_ptr().add(d + 16 * v), *slot);
        }
    }
}

/// Sixteen f16 at `ptr` as f32.
///
/// # Safety
/// 16 readable f16 at `ptr`; avx512f + f16c.
#[inline(always)]
unsafe fn load_f16(ptr: *const f16) -> __m512 {
    // SAFETY: the caller's contract.
    unsafe { _mm512_cvtph_ps(_mm256_loadu_si256(ptr.cast())) }
}

/// Sixteen f32 at `ptr`.
///
/// # Safety
/// 16 readable f32 at `ptr`; avx512f.
#[inline(always)]
unsafe fn load_f32(ptr: *const f32) -> __m512 {
    // SAFETY: the caller's contract.
    unsafe { _mm512_loadu_ps(ptr) }
}

/// Runs [`axpy_pass`] over the 16-column vectors of `width` columns, at most 8 per pass, rows
/// read by `$load`; returns the first column left (fewer than 16).
macro_rules! axpy_passes {
    ($load:expr, $acc:expr, $p:expr, $rows:expr, $stride:expr, $off:expr) => {{
        let width = $acc.len();
        let mut d = 0;
        while d + AXPY_COLS <= width {
            // SAFETY: d + 128 <= width; the rest is the caller's contract.
            unsafe { axpy_pass::<8, _>($acc, $p, $rows, $stride, $off, d, $load) };
            d += AXPY_COLS;
        }
        let left = (width - d) / 16;
        // SAFETY: d + 16·left <= width.
        unsafe {
            match left {
                1 => axpy_pass::<1, _>($acc, $p, $rows, $stride, $off, d, $load),
                2 => axpy_pass::<2, _>($acc, $p, $rows, $stride, $off, d, $load),
                3 => axpy_pass::<3, _>($acc, $p, $rows, $stride, $off, d, $load),
                4 => axpy_pass::<4, _>($acc, $p, $rows, $stride, $off, d, $load),
                5 => axpy_pass::<5, _>($acc, $p, $rows, $stride, $off, d, $load),
                6 => axpy_pass::<6, _>($acc, $p, $rows, $stride, $off, d, $load),
                7 => axpy_pass::<7, _>($acc, $p, $rows, $stride, $off, d, $load),
                _ => {}
            }
        }
        d + 16 * left
    }};
}

/// As [`super::rows::axpy_rows_f16`]; returns the first column not done (`acc.len()` rounded
/// down to 16), which the caller finishes with the same per-element arithmetic.
///
/// # Safety
/// avx512f + f16c; every row `j < p.len()` has `acc.len()` elements at `j·stride + off`.
#[target_feature(enable = "avx2,f16c,avx512f")]
pub(super) unsafe fn axpy_rows_f16(
    acc: &mut [f32],
    p: &[f32],
    rows: &[f16],
    stride: usize,
    off: usize,
) -> usize {
    // SAFETY: this function's features; axpy_pass reads 16 elements per call.
    let load = |x| unsafe { load_f16(x) };
    axpy_passes!(load, acc, p, rows, stride, off)
}

/// As [`super::rows::axpy_rows_f32`]; returns the first column not done.
///
/// # Safety
/// avx512f; every row `j < p.len()` has `acc.len()` elements at `j·stride + off`.
#[target_feature(enable = "avx2,avx512f")]
pub(super) unsafe fn axpy_rows_f32(
    acc: &mut [f32],
    p: &[f32],
    rows: &[f32],
    stride: usize,
    off: usize,
) -> usize {
    // SAFETY: this function's features; axpy_pass reads 16 elements per call.
    let load = |x| unsafe { load_f32(x) };
    axpy_passes!(load, acc, p, rows, stride, off)
}

/// Rounds every element of `x` to the nearest f16 (ties to even) and back, as
/// `f16::from_f32(v).to_f32()` does; returns the first index not done (a multiple of 16).
///
/// # Safety
/// avx512f + f16c.
#[target_feature(enable = "avx2,f16c,avx512f")]
pub(super) unsafe fn round_to_f16(x: &mut [f32]) -> usize {
    let full = x.len() / 16 * 16;
    let mut i = 0;
    while i < full {
        // SAFETY: i + 16 <= x.len().
        unsafe {
            let v = _mm512_loadu_ps(x.as_ptr().add(i));
            let h = _mm512_cvtps_ph::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(v);
            _mm512_storeu_ps(x.as_mut_ptr().add(i), _mm512_cvtph_ps(h));
        }
        i += 16;
    }
    full
}

/// Writes `f16::from_f32(src[i])` into `dst[i]` (ties to even); returns the first index not
/// done (a multiple of 16).
///
/// # Safety
/// avx512f + f16c; `dst.len() >= src.len()`.
#[target_feature(enable = "avx2,f16c,avx512f")]
pub(super) unsafe fn to_f16(src: &[f32], dst: &mut [f16]) -> usize {
    let full = src.len().min(dst.len()) / 16 * 16;
    let mut i = 0;
    while i < full {
        // SAFETY: i + 16 <= both lengths.
        unsafe {
            let v = _mm512_loadu_ps(src.as_ptr().add(i));
            let h = _mm512_cvtps_ph::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(v);
            _mm256_storeu_si256(dst.as_mut_ptr().add(i).cast(), h);
        }
        i += 16;
    }
    full
}
