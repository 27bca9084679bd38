//! Attention's inner loops over a run of K or V rows stored contiguously with a fixed stride:
//! one query head dotted with each row's head slice, and probability-weighted sums of V head
//! slices. The AVX2 path keeps everything in registers with no per-row dispatch; the scalar
//! path is the reference. Per element, V sums add rows in ascending order with separate multiply
//! and add, so both paths give identical V sums; dot products differ only by reassociation.

use half::f16;

#[cfg(target_arch = "x86_64")]
use super::rows_avx512;
use crate::simd::{self, SimdLevel};

/// Rounds every element of `x` to the nearest f16 and back (`f16::from_f32(v).to_f32()`).
pub fn round_to_f16_in_place(x: &mut [f32]) {
    #[allow(unused_mut)]
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    if simd::level() == SimdLevel::Avx2 {
        done = if simd::avx512_rows() {
            // SAFETY: avx512_rows implies avx512f and f16c.
            unsafe { rows_avx512::round_to_f16(x) }
        } else {
            // SAFETY: the AVX2 level implies avx2 and f16c.
            unsafe { avx2::round_to_f16(x) }
        };
    }
    for v in &mut x[done..] {
        *v = f16::from_f32(*v).to_f32();
    }
}

/// Appends `f16::from_f32(v)` of every element of `src` to `dst`.
pub fn extend_f16(dst: &mut Vec<f16>, src: &[f32]) {
    let start = dst.len();
    dst.resize(start + src.len(), f16::ZERO);
    #[allow(unused_mut)]
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    if simd::level() == SimdLevel::Avx2 && simd::avx512_rows() {
        // SAFETY: avx512_rows implies avx512f and f16c; lengths equal.
        done = unsafe { rows_avx512::to_f16(src, &mut dst[start..]) };
    }
    // The rest (all of it without the 512-bit loops): F16C 8 at a time where there is F16C.
    crate::quant::f32_to_f16_row(&src[done..], &mut dst[start + done..]);
}

/// `out[j] = Σ_d q[d] · rows[j·stride + off + d]` for `j < out.len()`, rows in f16.
pub fn dot_rows_f16(q: &[f16], rows: &[f16], stride: usize, off: usize, out: &mut [f32]) {
    check(q.len(), rows.len(), stride, off, out.len());
    #[cfg(target_arch = "x86_64")]
    if simd::level() == SimdLevel::Avx2 {
        if simd::avx512_rows() && q.len() <= rows_avx512::MAX_DOT_WIDTH {
            // SAFETY: avx512_rows implies avx512f on top of the AVX2 level; bounds checked.
            unsafe { rows_avx512::dot_rows_f16(q, rows, stride, off, out) };
            return;
        }
        // SAFETY: Avx2 is selected only when avx2, fma and f16c are available; bounds checked.
        unsafe { avx2::dot_rows_f16(q, rows, stride, off, out) };
        return;
    }
    dot_rows_f16_scalar(q, rows, stride, off, out);
}

/// `out[j] = Σ_d q[d] · rows[j·stride + off + d]`, rows in f32.
pub fn dot_rows_f32(q: &[f32], rows: &[f32], stride: usize, off: usize, out: &mut [f32]) {
    check(q.len(), rows.len(), stride, off, out.len());
    #[cfg(target_arch = "x86_64")]
    if simd::level() == SimdLevel::Avx2 {
        // SAFETY: as above.
        unsafe { avx2::dot_rows_f32(q, rows, stride, off, out) };
        return;
    }
    dot_rows_f32_scalar(q, rows, stride, off, out);
}

/// `acc[d] += p[j] · rows[j·stride + off + d]` for each `j < p.len()` in order, rows in f16.
pub fn axpy_rows_f16(acc: &mut [f32], p: &[f32], rows: &[f16], stride: usize, off: usize) {
    check(acc.len(), rows.len(), stride, off, p.len());
    if p.is_empty() {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if simd::level() == SimdLevel::Avx2 {
        let done = if simd::avx512_rows() {
            // SAFETY: avx512_rows implies avx512f and f16c; bounds checked.
            unsafe { rows_avx512::axpy_rows_f16(acc, p, rows, stride, off) }
        } else {
            0
        };
        // SAFETY: as above; columns from `done` on, the same per-element arithmetic.
        unsafe { avx2::axpy_rows_f16(&mut acc[done..], p, &rows[done..], stride, off) };
        return;
    }
    axpy_rows_f16_scalar(acc, p, rows, stride, off);
}

/// `acc[d] += p[j] · rows[j·stride + off + d]` for each `j < p.len()` in order, rows in f32.
pub fn axpy_rows_f32(acc: &mut [f32], p: &[f32], rows: &[f32], stride: usize, off: usize) {
    check(acc.len(), rows.len(), stride, off, p.len());
    if p.is_empty() {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if simd::level() == SimdLevel::Avx2 {
        let done = if simd::avx512_rows() {
            // SAFETY: avx512_rows implies avx512f; bounds checked.
            unsafe { rows_avx512::axpy_rows_f32(acc, p, rows, stride, off) }
        } else {
            0
        };
        // SAFETY: as above; columns from `done` on, the same per-element arithmetic.
        unsafe { avx2::axpy_rows_f32(&mut acc[done..], p, &rows[done..], stride, off) };
        return;
    }
    axpy_rows_f32_scalar(acc, p, rows, stride, off);
}

fn check(width: usize, rows_len: usize, stride: usize, off: usize, n: usize) {
    assert!(off + width <= stride, "rows: head slice past the row");
    assert!(
        n == 0 || (n - 1) * stride + off + width <= rows_len,
        "rows: run shorter than asked"
    );
}

/// Scalar reference of [`dot_rows_f16`].
pub fn dot_rows_f16_scalar(q: &[f16], rows: &[f16], stride: usize, off: usize, out: &mut [f32]) {
    for (j, o) in out.iter_mut().enumerate() {
        let r = &rows[j * stride + off..j * stride + off + q.len()];
        *o = q.iter().zip(r).map(|(a, b)| a.to_f32() * b.to_f32()).sum();
    }
}

/// Scalar reference of [`dot_rows_f32`].
pub fn dot_rows_f32_scalar(q: &[f32], rows: &[f32], stride: usize, off: usize, out: &mut [f32]) {
    for (j, o) in out.iter_mut().enumerate() {
        let r = &rows[j * stride + off..j * stride + off + q.len()];
        *o = q.iter().zip(r).map(|(a, b)| a * b).sum();
    }
}

/// Scalar reference of [`axpy_rows_f16`].
pub fn axpy_rows_f16_scalar(acc: &mut [f32], p: &[f32], rows: &[f16], stride: usize, off: usize) {
    for (j, &pj) in p.iter().enumerate() {
        let r = &rows[j * stride + off..j * stride + off + acc.len()];
        for (a, v) in acc.iter_mut().zip(r) {
            *a += pj * v.to_f32();
        }
    }
}

/// Scalar reference of [`axpy_rows_f32`].
pub fn axpy_rows_f32_scalar(acc: &mut [f32], p: &[f32], rows: &[f32], stride: usize, off: usize) {
    for (j, &pj) in p.iter().enumerate() {
        let r = &rows[j * stride + off..j * stride + off + acc.len()];
        for (a, v) in acc.iter_mut().zip(r) {
            *a += pj * v;
        }
    }
}

#[cfg(target_arch = "x86_64")]
pub(super) mod avx2 {
    use std::arch::x86_64::*;

    use half::f16;

    /// Horizontal sum of 8 lanes.
    #[target_feature(enable = "avx2")]
    pub(in crate::ops) fn hsum(v: __m256) -> f32 {
        let lo = _mm256_castps256_ps128(v);
        let hi = _mm256_extractf128_ps::<1>(v);
        let s = _mm_add_ps(lo, hi);
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        let s = _mm_add_ss(s, _mm_shuffle_ps::<0x55>(s, s));
        _mm_cvtss_f32(s)
    }

    /// `x[i] = f16::from_f32(x[i]).to_f32()` (ties to even) 8 at a time; returns the first
    /// index not done.
    #[target_feature(enable = "avx2,f16c")]
    pub unsafe fn round_to_f16(x: &mut [f32]) -> usize {
        let full = x.len() / 8 * 8;
        let mut i = 0;
        while i < full {
            // SAFETY: i + 8 <= x.len().
            unsafe {
                let v = _mm256_loadu_ps(x.as_ptr().add(i));
                let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v);
                _mm256_storeu_ps(x.as_mut_ptr().add(i), _mm256_cvtph_ps(h));
            }
            i += 8;
        }
        full
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn dot_rows_f16(
        q: &[f16],
        rows: &[f16],
        stride: usize,
        off: usize,
        out: &mut [f32],
    ) {
        let w = q.len();
        let full = w / 8 * 8;
        for (j, o) in out.iter_mut().enumerate() {
            let base = j * stride + off;
            let mut acc = _mm256_setzero_ps();
            let mut d = 0;
            while d < full {
                // SAFETY: base + d + 8 <= base + w <= rows.len() (checked by the caller).
                unsafe {
                    let a = _mm256_cvtph_ps(_mm_loadu_si128(q.as_ptr().add(d).cast()));
                    let b = _mm256_cvtph_ps(_mm_loadu_si128(rows.as_ptr().add(base + d).cast()));
                    acc = _mm256_fmadd_ps(a, b, acc);
                }
                d += 8;
            }
            let mut s = hsum(acc);
            for t in full..w {
                s += q[t].to_f32() * rows[base + t].to_f32();
            }
            *o = s;
        }
    }

    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn dot_rows_f32(
        q: &[f32],
        rows: &[f32],
        stride: usize,
        off: usize,
        out: &mut [f32],
    ) {
        let w = q.len();
        let full = w / 8 * 8;
        for (j, o) in out.iter_mut().enumerate() {
            let base = j * stride + off;
            let mut acc = _mm256_setzero_ps();
            let mut d = 0;
            while d < full {
                // SAFETY: as in dot_rows_f16.
                unsafe {
                    let a = _mm256_loadu_ps(q.as_ptr().add(d));
                    let b = _mm256_loadu_ps(rows.as_ptr().add(base + d));
                    acc = _mm256_fmadd_ps(a, b, acc);
                }
                d += 8;
            }
            let mut s = hsum(acc);
            for t in full..w {
                s += q[t] * rows[base + t];
            }
            *o = s;
        }
    }

    #[target_feature(enable = "avx2,f16c")]
    pub unsafe fn axpy_rows_f16(
        acc: &mut [f32],
        p: &[f32],
        rows: &[f16],
        stride: usize,
        off: usize,
    ) {
        let w = acc.len();
        let full = w / 8 * 8;
        let mut d = 0;
        while d < full {
            // SAFETY: d + 8 <= w; every row j < p.len() has w elements at j*stride + off.
            unsafe {
                let mut a = _mm256_loadu_ps(acc.as_ptr().add(d));
                for (j, &pj) in p.iter().enumerate() {
                    let v = _mm256_cvtph_ps(_mm_loadu_si128(
                        rows.as_ptr().add(j * stride + off + d).cast(),
                    ));
                    a = _mm256_add_ps(a, _mm256_mul_ps(_mm256_set1_ps(pj), v));
                }
                _mm256_storeu_ps(acc.as_mut_ptr().add(d), a);
            }
            d += 8;
        }
        if full < w {
            super::axpy_rows_f16_scalar(&mut acc[full..], p, &rows[full..], stride, off);
        }
    }

    #[target_feature(enable = "avx2")]
    pub unsafe fn axpy_rows_f32(
        acc: &mut [f32],
        p: &[f32],
        rows: &[f32],
        stride: usize,
        off: usize,
    ) {
        let w = acc.len();
        let full = w / 8 * 8;
        let mut d = 0;
        while d < full {
            // SAFETY: as in axpy_rows_f16.
            unsafe {
                let mut a = _mm256_loadu_ps(acc.as_ptr().add(d));
                for (j, &pj) in p.iter().enumerate() {
                    let v = _mm256_loadu_ps(rows.as_ptr().add(j * stride + off + d));
                    a = _mm256_add_ps(a, _mm256_mul_ps(_mm256_set1_ps(pj), v));
                }
                _mm256_storeu_ps(acc.as_mut_ptr().add(d), a);
            }
            d += 8;
        }
        if full < w {
            super::axpy_rows_f32_scalar(&mut acc[full..], p, &rows[full..], stride, off);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(n: usize, k: u32) -> Vec<f32> {
        (0..n)
            .map(|i| (((i as u32).wrapping_mul(2_654_435_761) ^ k) % 2001) as f32 / 1000.0 - 1.0)
            .collect()
    }

    #[test]
    fn simd_paths_agree_with_the_scalar_reference() {
        for (w, stride, off, n) in [
            (8, 16, 8, 5),
            (64, 256, 64, 16),
            (12, 24, 12, 3),
            (5, 10, 0, 7),
        ] {
            let q32 = data(w, 1);
            let r32 = data(stride * n, 2);
            let q16: Vec<f16> = q32.iter().map(|&x| f16::from_f32(x)).collect();
            let r16: Vec<f16> = r32.iter().map(|&x| f16::from_f32(x)).collect();
            let (mut a, mut b) = (vec![0.0; n], vec![0.0; n]);
            dot_rows_f16(&q16, &r16, stride, off, &mut a);
            dot_rows_f16_scalar(&q16, &r16, stride, off, &mut b);
            for (x, y) in a.iter().zip(&b) {
                assert!(
                    (x - y).abs() <= 1e-4 * (1.0 + y.abs()),
                    "dot f16 {x} vs {y}"
                );
            }
            dot_rows_f32(&q32, &r32, stride, off, &mut a);
            dot_rows_f32_scalar(&q32, &r32, stride, off, &mut b);
            for (x, y) in a.iter().zip(&b) {
                assert!(
                    (x - y).abs() <= 1e-4 * (1.0 + y.abs()),
                    "dot f32 {x} vs {y}"
                );
            }
            let p = data(n, 3);
            let (mut a, mut b) = (data(w, 4), data(w, 4));
            axpy_rows_f16(&mut a, &p, &r16, stride, off);
            axpy_rows_f16_scalar(&mut b, &p, &r16, stride, off);
            assert_eq!(a, b, "axpy f16 must be bit-identical");
            let (mut a, mut b) = (data(w, 5), data(w, 5));
            axpy_rows_f32(&mut a, &p, &r32, stride, off);
            axpy_rows_f32_scalar(&mut b, &p, &r32, stride, off);
            assert_eq!(a, b, "axpy f32 must be bit-identical");
        }
    }

    /// The 512-bit paths give the AVX2 paths' bits (dot products: same lanes and horizontal
    /// sum; V sums and f16 rounding: same per-element arithmetic), for widths with and without
    /// 8- and 16-element tails and odd row counts.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx512_paths_are_bit_identical_to_avx2() {
        if !(simd::level() == SimdLevel::Avx2 && simd::avx512_detected()) {
            eprintln!("no AVX-512 on this CPU: nothing to compare");
            return;
        }
        for (w, stride, off, n) in [
            (64, 768, 128, 17),
            (64, 64, 0, 1),
            (256, 512, 256, 9),
            (80, 160, 80, 6),
            (12, 24, 12, 3),
            (5, 10, 0, 7),
            (136, 272, 0, 4),
        ] {
            let q32 = data(w, 11);
            let r32 = data(stride * n, 12);
            let q16: Vec<f16> = q32.iter().map(|&x| f16::from_f32(x)).collect();
            let r16: Vec<f16> = r32.iter().map(|&x| f16::from_f32(x)).collect();
            let (mut a, mut b) = (vec![0.0; n], vec![0.0; n]);
            // SAFETY: avx512f + AVX2 level checked above; lengths as the dispatchers check.
            unsafe {
                rows_avx512::dot_rows_f16(&q16, &r16, stride, off, &mut a);
                avx2::dot_rows_f16(&q16, &r16, stride, off, &mut b);
            }
            assert_eq!(a, b, "dot f16 w={w} n={n}");
            let p = data(n, 13);
            let (mut a, mut b) = (data(w, 14), data(w, 14));
            // SAFETY: as above.
            unsafe {
                let done = rows_avx512::axpy_rows_f16(&mut a, &p, &r16, stride, off);
                avx2::axpy_rows_f16(&mut a[done..], &p, &r16[done..], stride, off);
                avx2::axpy_rows_f16(&mut b, &p, &r16, stride, off);
            }
            assert_eq!(a, b, "axpy f16 w={w} n={n}");
            let (mut a, mut b) = (data(w, 15), data(w, 15));
            // SAFETY: as above.
            unsafe {
                let done = rows_avx512::axpy_rows_f32(&mut a, &p, &r32, stride, off);
                avx2::axpy_rows_f32(&mut a[done..], &p, &r32[done..], stride, off);
                avx2::axpy_rows_f32(&mut b, &p, &r32, stride, off);
            }
            assert_eq!(a, b, "axpy f32 w={w} n={n}");
        }
        // f16 rounding: ties, subnormals, overflow to infinity, NaN kept NaN.
        let mut x: Vec<f32> = data(1000, 16).iter().map(|v| v * 70000.0).collect();
        x.extend([
            1.0 + 1.0 / 2048.0,
            6e-8,
            1e-9,
            -65520.0,
            f32::INFINITY,
            -0.0,
        ]);
        let want: Vec<f32> = x.iter().map(|&v| f16::from_f32(v).to_f32()).collect();
        let mut got = x.clone();
        round_to_f16_in_place(&mut got);
        assert_eq!(got, want);
        let mut h = Vec::new();
        extend_f16(&mut h, &x);
        let want16: Vec<f16> = x.iter().map(|&v| f16::from_f32(v)).collect();
        assert_eq!(h, want16);
    }

    /// The f16 roundings this CPU runs give `half`'s bits: ties, subnormals, overflow to
    /// infinity, signed zero, NaNs (quiet, signalling, with payloads), tails of every length.
    #[test]
    fn f16_roundings_equal_half() {
        let mut x: Vec<f32> = data(1000, 16).iter().map(|v| v * 70000.0).collect();
        x.extend([
            1.0 + 1.0 / 2048.0,
            1.0 + 3.0 / 2048.0,
            6e-8,
            3e-8,
            1e-9,
            -65520.0,
            65519.0,
            f32::INFINITY,
            -0.0,
            f32::NAN,
            f32::from_bits(0x7f80_0001),
            f32::from_bits(0xffc0_1234),
        ]);
        for len in [x.len(), x.len() - 3, 7, 0] {
            let x = &x[..len];
            let want: Vec<u32> = x
                .iter()
                .map(|&v| f16::from_f32(v).to_f32().to_bits())
                .collect();
            let mut got = x.to_vec();
            round_to_f16_in_place(&mut got);
            let got: Vec<u32> = got.iter().map(|v| v.to_bits()).collect();
            assert_eq!(got, want, "round_to_f16_in_place, {len} values");
            let mut h = vec![f16::ONE];
            extend_f16(&mut h, x);
            let want16: Vec<u16> = std::iter::once(f16::ONE)
                .chain(x.iter().map(|&v| f16::from_f32(v)))
                .map(f16::to_bits)
                .collect();
            let got16: Vec<u16> = h.iter().map(|v| v.to_bits()).collect();
            assert_eq!(got16, want16, "extend_f16, {len} values");
        }
    }

    #[test]
    #[should_panic(expected = "run shorter")]
    fn short_runs_are_refused() {
        let mut out = [0.0; 3];
        dot_rows_f32(&[1.0; 4], &[0.0; 8], 4, 0, &mut out);
    }
}
