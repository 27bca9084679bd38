//! 256-bit attention row loops over several queries at once, for CPUs without the 512-bit
//! ones: each K or V row is loaded and converted from f16 once per group of queries (a tile
//! of query heads and tokens that read the same K/V head) instead of once per query. Scores
//! take K rows two at a time so each query chunk loaded from L1 meets both, and every pair
//! (query, row) keeps its own accumulator.
//!
//! Invariant: a score or output element computed here has the bits of the AVX2 paths of
//! [`super::rows::dot_rows_f16`] (one 8-lane fma chain over the head's 8-element chunks in
//! ascending order, the same horizontal sum) and [`super::rows::axpy_rows_f16`] (`p · v`
//! added to each output element with separate multiply and add, rows ascending) for that
//! query alone (tests in `attention_tile`, `attention_heads`, `attention_split`), so tiling
//! never changes a result.

use std::arch::x86_64::*;

use half::f16;

use super::rows::avx2::hsum;
use super::rows_tile::{PREFETCH_ROWS, Spread, prefetch_row};

/// Most queries one score pass keeps accumulators for: two rows each, plus the two converted
/// rows and a query chunk, within the 16 vector registers.
const DOT_PASS: usize = 6;
/// Columns of a V sum kept in registers per query and pass (2 vectors each, 4 queries).
const AXPY_COLS: usize = 16;

/// Scores of `NQ` queries (up to [`super::rows_tile::DOT_QUERIES`]) against `n` f16 rows, as
/// [`super::rows_tile::dot_tile_f16`]: `scores[at[i] + j] = q_i · row_j`, query `i`'s
/// expanded chunks ([`super::rows_tile::expand_queries`], each 8-element chunk twice, of
/// which the first copy is read) at `qv[i]`.
///
/// # Safety
/// avx2 + fma + f16c; `width` a multiple of 8; every `qv[i]` points to `2·width` readable
/// f32; rows `j < n` lie inside `rows`; `scores[at[i]..at[i] + n]` in bounds for every `i`.
#[target_feature(enable = "avx2,fma,f16c")]
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
    let out = scores.as_mut_ptr();
    // SAFETY: forwarded; each pass serves a disjoint subset of the queries.
    unsafe {
        if NQ <= DOT_PASS {
            dot_pass::<NQ>(&qv, width, rows, stride, off, n, out, &at, spread);
        } else {
            let (q0, q1) = qv.split_at(NQ / 2);
            let (a0, a1) = at.split_at(NQ / 2);
            macro_rules! half {
                ($q:expr, $a:expr, $s:expr) => {{
                    macro_rules! pass {
                        ($m:literal) => {
                            dot_pass::<$m>(
                                $q.try_into().unwrap(),
                                width,
                                rows,
                                stride,
                                off,
                                n,
                                out,
                                $a.try_into().unwrap(),
                                $s,
                            )
                        };
                    }
                    match $q.len() {
                        3 => pass!(3),
                        4 => pass!(4),
                        m => unreachable!("score pass of {m} queries"),
                    }
                }};
            }
            const _: () = assert!(super::rows_tile::DOT_QUERIES <= 2 * 4);
            half!(q0, a0, spread);
            half!(q1, a1, Spread::new(&[]));
        }
    }
}

/// [`dot_tile_f16`] for `NQ <= DOT_PASS` queries, rows two at a time.
///
/// # Safety
/// As [`dot_tile_f16`].
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn dot_pass<const NQ: usize>(
    qv: &[*const f32; NQ],
    width: usize,
    rows: &[f16],
    stride: usize,
    off: usize,
    n: usize,
    out: *mut f32,
    at: &[usize; NQ],
    spread: Spread,
) {
    let chunks = width / 8;
    let base = rows.as_ptr();
    let mut j = 0;
    while j < n {
        // SAFETY: a prefetch never faults and changes no value; rows j (and j + 1 when
        // `pair`) hold `width` elements (caller); 16c + 8 <= 2·width readable at each q;
        // writes inside `scores` (caller).
        unsafe {
            prefetch_row(base, PREFETCH_ROWS + j, n, stride, off, width);
            prefetch_row(base, PREFETCH_ROWS + j + 1, n, stride, off, width);
            spread.rows(j, 2, n);
            let pair = j + 1 < n;
            let (b0, b1) = (j * stride + off, (j + 1).min(n - 1) * stride + off);
            let mut a0 = [_mm256_setzero_ps(); NQ];
            let mut a1 = [_mm256_setzero_ps(); NQ];
            for c in 0..chunks {
                let k0 = _mm256_cvtph_ps(_mm_loadu_si128(base.add(b0 + 8 * c).cast()));
                let k1 = _mm256_cvtph_ps(_mm_loadu_si128(base.add(b1 + 8 * c).cast()));
                for i in 0..NQ {
                    let q = _mm256_loadu_ps(qv[i].add(16 * c));
                    a0[i] = _mm256_fmadd_ps(q, k0, a0[i]);
                    a1[i] = _mm256_fmadd_ps(q, k1, a1[i]);
                }
            }
            for i in 0..NQ {
                *out.add(at[i] + j) = hsum(a0[i]);
                if pair {
                    *out.add(at[i] + j + 1) = hsum(a1[i]);
                }
            }
        }
        j += 2;
    }
}

/// V sums of `NQ` queries (up to [`super::rows_tile::AXPY_QUERIES`]) over `n` f16 rows, as
/// [`super::rows_tile::axpy_tile_f16`]: for each row `j` in order,
/// `acc[i][d] += p_i[j] · row_j[d]` for `d < width`, `acc[i]` at `out + acc_at[i]` and `p_i`
/// at `probs + p_at[i]`.
///
/// # Safety
/// avx2 + f16c; `width` a multiple of 16; rows `j < n` hold `width` elements at
/// `j·stride + off` inside `rows`; every `acc[i]` has `width` writable f32, every `p_i` `n`
/// readable f32, and no two `acc[i]` overlap.
#[target_feature(enable = "avx2,f16c")]
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
    let base = rows.as_ptr();
    let mut d = 0;
    while d < width {
        // The first pass spreads the prefetches.
        let spread = if d == 0 { spread } else { Spread::new(&[]) };
        let col = off + d;
        // SAFETY: the caller's contract bounds every access; d + 16 <= width.
        unsafe {
            let mut acc = [[_mm256_setzero_ps(); 2]; NQ];
            for i in 0..NQ {
                acc[i][0] = _mm256_loadu_ps(out.add(acc_at[i] + d));
                acc[i][1] = _mm256_loadu_ps(out.add(acc_at[i] + d + 8));
            }
            for j in 0..n {
                prefetch_row(base, PREFETCH_ROWS + j, n, stride, col, AXPY_COLS);
                spread.rows(j, 1, n);
                let row = base.add(j * stride + col);
                let v0 = _mm256_cvtph_ps(_mm_loadu_si128(row.cast()));
                let v1 = _mm256_cvtph_ps(_mm_loadu_si128(row.add(8).cast()));
                for i in 0..NQ {
                    let pv = _mm256_set1_ps(*probs.add(p_at[i] + j));
                    acc[i][0] = _mm256_add_ps(acc[i][0], _mm256_mul_ps(pv, v0));
                    acc[i][1] = _mm256_add_ps(acc[i][1], _mm256_mul_ps(pv, v1));
                }
            }
            for i in 0..NQ {
                _mm256_storeu_ps(out.add(acc_at[i] + d), acc[i][0]);
                _mm256_storeu_ps(out.add(acc_at[i] + d + 8), acc[i][1]);
            }
        }
        d += AXPY_COLS;
    }
}
