//! 512-bit attention row loops over several queries at once (a tile of query heads and
//! tokens that read the same K/V head): each K or V row is loaded and converted from f16 once
//! per tile instead of once per query, and every query keeps the per-pair arithmetic of
//! [`super::rows_avx512`] — a dot product is one 8-lane fma chain over the head's 8-element
//! chunks in ascending order and the same three-step horizontal sum; a V sum adds
//! `p · v` (separate multiply and add) to each output element, rows ascending.
//!
//! Invariant: a score or output element computed here has the bits [`super::rows::dot_rows_f16`]
//! and [`super::rows::axpy_rows_f16`] give for that query alone (tests in
//! `attention_tile`), so tiling never changes a result.

use std::arch::x86_64::*;

use half::f16;

use super::rows_avx512::hsum_halves;

/// Most queries one dot-product call serves (accumulators kept in registers).
pub(super) const DOT_QUERIES: usize = 8;
/// Most queries one V-sum call serves (4 column vectors each in registers).
pub(super) const AXPY_QUERIES: usize = 4;
/// Columns of a V sum kept in registers per query and pass.
const AXPY_COLS: usize = 64;

/// Whether a head of `width` elements can use the tiles (whole 16-element vectors).
pub(super) fn fits(width: usize) -> bool {
    width > 0 && width.is_multiple_of(16)
}

/// Rows ahead of the one in use whose head slice is prefetched: a run's rows lie a whole K/V
/// row apart (more than the hardware prefetchers follow across pages), so without it every
/// row of a cache read once per step waits on memory. Far enough ahead that a decode step's
/// single query per head (nothing to reuse a row for) keeps enough lines in flight to stream
/// the cache rather than wait on each row (16 measured faster than 6 and 32).
pub(super) const PREFETCH_ROWS: usize = 16;

/// Prefetches the `width` elements of row `j` at `j·stride + off` into every cache level, if
/// `j < n`.
///
/// # Safety
/// Row `j < n` lies inside the allocation that `base` points into.
#[inline(always)]
pub(super) unsafe fn prefetch_row(
    base: *const f16,
    j: usize,
    n: usize,
    stride: usize,
    off: usize,
    width: usize,
) {
    if j >= n {
        return;
    }
    // SAFETY: row j < n is inside the rows (caller); prefetches never fault.
    unsafe {
        let row = base.add(j * stride + off).cast::<i8>();
        let bytes = width * 2;
        let mut at = 0;
        while at < bytes {
            _mm_prefetch::<_MM_HINT_T0>(row.add(at));
            at += 64;
        }
        _mm_prefetch::<_MM_HINT_T0>(row.add(bytes - 1));
    }
}

/// Cache lines to prefetch into L2 a few at a time across a kernel's rows (rows a run or two
/// ahead of use): a burst of more prefetches than a core has line-fill buffers stalls it, a
/// share per row pair overlaps them with the arithmetic.
#[derive(Clone, Copy)]
pub(super) struct Spread {
    base: *const i8,
    lines: usize,
}

impl Spread {
    /// Every line of `rows`.
    pub(super) fn new(rows: &[f16]) -> Spread {
        Spread {
            base: rows.as_ptr().cast(),
            lines: std::mem::size_of_val(rows) / 64,
        }
    }

    /// Every line at once.
    pub(super) fn all(self) {
        self.rows(0, 1, 1);
    }

    /// The share of rows `j..j + step` of `n`.
    #[inline(always)]
    pub(super) fn rows(self, j: usize, step: usize, n: usize) {
        if self.lines == 0 || n == 0 {
            return;
        }
        let (a, b) = (self.lines * j / n, self.lines * (j + step).min(n) / n);
        for l in a..b {
            // SAFETY: a prefetch never faults; sse is baseline on x86_64.
            unsafe { _mm_prefetch::<_MM_HINT_T1>(self.base.wrapping_add(l * 64)) };
        }
    }
}

/// Prefetches the head slices (`width` elements at `off`) of the first rows of a run about
/// to be read (the kernels prefetch the rest as they go).
pub(super) fn prefetch_run(rows: &[f16], n: usize, stride: usize, off: usize, width: usize) {
    let n = n.min(PREFETCH_ROWS);
    if n == 0 || width == 0 || (n - 1) * stride + off + width > rows.len() {
        return;
    }
    for j in 0..n {
        // SAFETY: rows j < n lie inside `rows` (checked above); sse is baseline on x86_64.
        unsafe { prefetch_row(rows.as_ptr(), j, n, stride, off, width) };
    }
}

/// Expands queries for [`dot_tile_f16`]: each 8-element chunk of each f16 query as f32, twice
/// (`[q, chunks, 16]`), so one vector meets two K rows.
pub(super) fn expand_queries(q16: &[f16], width: usize, dst: &mut Vec<f32>) {
    dst.clear();
    for q in q16.chunks_exact(width) {
        for chunk in q.chunks_exact(8) {
            for _ in 0..2 {
                dst.extend(chunk.iter().map(|v| v.to_f32()));
            }
        }
    }
}

/// Scores of `NQ` queries against `n` f16 rows: `scores[at[i] + j] = q_i · row_j`, where
/// query `i`'s expanded chunks ([`expand_queries`]) start at `qv[i]` and row `j`'s head slice
/// at `rows[j·stride + off..][..width]`.
///
/// # Safety
/// avx512f + f16c; [`fits`]`(width)`; every `qv[i]` points to `2·width` readable f32; rows
/// `j < n` lie inside `rows`; `scores[at[i]..at[i] + n]` in bounds for every `i`.
#[target_feature(enable = "avx2,fma,f16c,avx512f")]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn dot_tile_f16<const NQ: usize>(
    qv: [*const f32; NQ],
    width: usize,
    rows: &[f16],
    stride: usize,
    off: usize,
    n: usize,
    scores: &mut [f32],
    at: [usize; NQ],
    spread: Spread,
) {
    let chunks = width / 8;
    let base = rows.as_ptr();
    let out = scores.as_mut_ptr();
    let mut j = 0;
    while j < n {
        // SAFETY: the rows prefetched lie inside `rows` (j + 1 < n and below); a prefetch
        // never faults and changes no value.
        unsafe {
            prefetch_row(base, PREFETCH_ROWS + j, n, stride, off, width);
            prefetch_row(base, PREFETCH_ROWS + j + 1, n, stride, off, width);
        }
        spread.rows(j, 2, n);
        let pair = j + 1 < n;
        let (b0, b1) = (j * stride + off, (j + 1) * stride + off);
        let mut acc = [_mm512_setzero_ps(); NQ];
        for c in 0..chunks {
            // SAFETY: row j (and j + 1 when `pair`) hold `width` elements from b0 / b1.
            let k = unsafe {
                let lo = _mm_loadu_si128(base.add(b0 + 8 * c).cast());
                let hi = if pair {
                    _mm_loadu_si128(base.add(b1 + 8 * c).cast())
                } else {
                    _mm_setzero_si128()
                };
                _mm512_cvtph_ps(_mm256_set_m128i(hi, lo))
            };
            for (a, &q) in acc.iter_mut().zip(&qv) {
                // SAFETY: 16c + 16 <= 2·width readable at q.
                *a = _mm512_fmadd_ps(unsafe { _mm512_loadu_ps(q.add(16 * c)) }, k, *a);
            }
        }
        for (a, &s) in acc.iter().zip(&at) {
            // SAFETY: register-only, then writes inside scores (caller).
            unsafe {
                let r = hsum_halves(*a);
                *out.add(s + j) = _mm512_cvtss_f32(r);
                if pair {
                    *out.add(s + j + 1) = _mm_cvtss_f32(_mm512_extractf32x4_ps::<2>(r));
                }
            }
        }
        j += 2;
    }
}

/// V sums of `NQ` queries over `n` f16 rows: for each row `j` in order,
/// `acc[i][d] += p_i[j] · row_j[d]` for `d < width`, with `acc[i]` at `out + acc_at[i]` and
/// `p_i` at `probs + p_at[i]`.
///
/// # Safety
/// avx512f + f16c; [`fits`]`(width)`; rows `j < n` hold `width` elements at
/// `j·stride + off` inside `rows`; every `acc[i]` has `width` writable f32, every `p_i` `n`
/// readable f32, and no two `acc[i]` overlap.
#[target_feature(enable = "avx2,f16c,avx512f")]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn axpy_tile_f16<const NQ: usize>(
    out: *mut f32,
    acc_at: [usize; NQ],
    probs: *const f32,
    p_at: [usize; NQ],
    width: usize,
    rows: &[f16],
    stride: usize,
    off: usize,
    n: usize,
    spread: Spread,
) {
    let mut d = 0;
    while d < width {
        let cols = (width - d).min(AXPY_COLS);
        // The first pass spreads the prefetches.
        let spread = if d == 0 { spread } else { Spread::new(&[]) };
        macro_rules! pass {
            ($v:literal) => {
                // SAFETY: forwarded; d + cols <= width.
                unsafe {
                    axpy_pass::<NQ, $v>(
                        out,
                        acc_at,
                        probs,
                        p_at,
                        rows,
                        stride,
                        off + d,
                        d,
                        n,
                        spread,
                    )
                }
            };
        }
        match cols / 16 {
            4 => pass!(4),
            3 => pass!(3),
            2 => pass!(2),
            _ => pass!(1),
        }
        d += cols;
    }
}

/// [`axpy_tile_f16`] for a group of `n` (1 to [`AXPY_QUERIES`]) queries, query `i`'s
/// accumulator at `out + acc_at(i)` and probabilities at `probs + p_at(i)`.
///
/// # Safety
/// As [`axpy_tile_f16`] for those `n` queries.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn axpy_group(
    n: usize,
    out: *mut f32,
    acc_at: impl Fn(usize) -> usize,
    probs: *const f32,
    p_at: impl Fn(usize) -> usize,
    width: usize,
    rows: &[f16],
    stride: usize,
    off: usize,
    len: usize,
    spread: Spread,
) {
    let wide = crate::simd::avx512_rows();
    macro_rules! call {
        ($n:literal) => {{
            let (acc, ps) = (std::array::from_fn(&acc_at), std::array::from_fn(&p_at));
            // SAFETY: forwarded; the 512-bit loops only where the process uses them.
            unsafe {
                if wide {
                    axpy_tile_f16::<$n>(out, acc, probs, ps, width, rows, stride, off, len, spread)
                } else {
                    super::rows_tile_avx2::axpy_tile_f16::<$n>(
                        out, acc, probs, ps, width, rows, stride, off, len, spread,
                    )
                }
            }
        }};
    }
    const _: () = assert!(AXPY_QUERIES == 4, "axpy_group dispatches 1 to 4 queries");
    match n {
        1 => call!(1),
        2 => call!(2),
        3 => call!(3),
        4 => call!(4),
        n => unreachable!("V group of {n} rows"),
    }
}

/// One pass of [`axpy_tile_f16`] over `V` column vectors from column `d` of the outputs
/// (`col` of the rows).
///
/// # Safety
/// As [`axpy_tile_f16`], with `d + 16·V <= width`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn axpy_pass<const NQ: usize, const V: usize>(
    out: *mut f32,
    acc_at: [usize; NQ],
    probs: *const f32,
    p_at: [usize; NQ],
    rows: &[f16],
    stride: usize,
    col: usize,
    d: usize,
    n: usize,
    spread: Spread,
) {
    // SAFETY: the caller's contract bounds every access.
    unsafe {
        let mut acc = [[_mm512_setzero_ps(); V]; NQ];
        for (a, &at) in acc.iter_mut().zip(&acc_at) {
            for (v, slot) in a.iter_mut().enumerate() {
                *slot = _mm512_loadu_ps(out.add(at + d + 16 * v));
            }
        }
        let base = rows.as_ptr();
        for j in 0..n {
            prefetch_row(base, PREFETCH_ROWS + j, n, stride, col, 16 * V);
            spread.rows(j, 1, n);
            let row = base.add(j * stride + col);
            let mut vals = [_mm512_setzero_ps(); V];
            for (v, slot) in vals.iter_mut().enumerate() {
                *slot = _mm512_cvtph_ps(_mm256_loadu_si256(row.add(16 * v).cast()));
            }
            for (a, &pa) in acc.iter_mut().zip(&p_at) {
                let pv = _mm512_set1_ps(*probs.add(pa + j));
                for (slot, &val) in a.iter_mut().zip(&vals) {
                    *slot = _mm512_add_ps(*slot, _mm512_mul_ps(pv, val));
                }
            }
        }
        for (a, &at) in acc.iter().zip(&acc_at) {
            for (v, slot) in a.iter().enumerate() {
                _mm512_storeu_ps(out.add(at + d + 16 * v), *slot);
            }
        }
    }
}
