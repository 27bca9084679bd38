//! Attention of a tile of queries that read the same K/V head: consecutive tokens of one
//! sequence (prefill) times the query heads of one K/V group (grouped-query attention, decode
//! too). With an f16 cache each K and V row is converted once for the whole tile
//! ([`super::rows_tile`]) instead of once per query head and token.
//!
//! Invariant: every query's output is bit-identical to [`attend`] for that token and head
//! (same scores pair by pair, the same softmax over the same positions, the same V sums in
//! ascending row order), so how tokens are tiled never changes a result; tests below check it
//! against [`attend`] on causal ranges, windows, GQA groups, f16, f32 and quantized caches.

use std::ops::Range;

use half::f16;

use super::attention::{AttnScratch, AttnShape, KvRead, KvRow, attend, room, zeroed_scores};
use super::rows::{extend_f16, round_to_f16_in_place};

/// Most query rows (tokens × heads) one tile holds.
pub const TILE_ROWS: usize = 16;

/// Buffers of [`attend_tile`], reused between calls (no allocation once warmed up).
#[derive(Debug, Default)]
pub struct TileScratch {
    pub(super) scores: Vec<f32>,
    pub(super) q16: Vec<f16>,
    pub(super) qv: Vec<f32>,
    pub(super) single: AttnScratch,
    out: Vec<f32>,
}

impl TileScratch {
    /// A zeroed output buffer of `n` floats for [`attend_tile`] (give it back with
    /// [`TileScratch::put_out`] so the next call reuses it).
    pub fn take_out(&mut self, n: usize) -> Vec<f32> {
        let mut out = std::mem::take(&mut self.out);
        out.clear();
        out.resize(n, 0.0);
        out
    }

    /// Keeps `out` for the next [`TileScratch::take_out`].
    pub fn put_out(&mut self, out: Vec<f32>) {
        self.out = out;
    }

    /// Makes room for tiles of up to `rows` query rows (at least [`TILE_ROWS`]: tokens × heads)
    /// over up to `positions` positions, so no later call within those bounds allocates (a
    /// quantized cache's dequantized run aside).
    pub fn reserve(&mut self, rows: usize, positions: usize, head_dim: usize) {
        let rows = rows.max(TILE_ROWS);
        room(&mut self.scores, rows.saturating_mul(positions));
        room(&mut self.q16, rows.saturating_mul(head_dim));
        // Each query's 8-element chunks are expanded twice (`rows_tile::expand_queries`).
        room(
            &mut self.qv,
            rows.saturating_mul(head_dim).saturating_mul(2),
        );
        room(&mut self.out, rows.saturating_mul(head_dim));
        self.single.reserve(rows, positions, head_dim);
    }
}

/// Attention of `keys.len()` tokens whose queries are the rows of `q` (`[tokens, n_heads ·
/// head_dim]`), token `t` over the positions `keys[t]` of `kv`, for the query heads `heads`
/// (which must read one K/V head when there is more than one token); writes
/// `[tokens, heads.len() · head_dim]` into `out`. Each (token, head) result equals
/// [`attend`]'s for that token and head, bit for bit.
pub fn attend_tile(
    q: &[f32],
    keys: &[Range<usize>],
    kv: &dyn KvRead,
    shape: AttnShape,
    heads: Range<usize>,
    scratch: &mut TileScratch,
    out: &mut [f32],
) {
    let (hd, qd) = (shape.head_dim, shape.n_heads * shape.head_dim);
    let (n_tok, n_sel) = (keys.len(), heads.len());
    assert_eq!(q.len(), n_tok * qd, "attention tile: query length");
    assert_eq!(
        out.len(),
        n_tok * n_sel * hd,
        "attention tile: output length"
    );
    if n_tok == 0 {
        return;
    }
    assert!(
        keys.iter().all(|k| k.start < k.end),
        "attention tile: a query sees at least itself"
    );
    let group = shape.n_heads / shape.n_kv_heads.max(1);
    let one_kv_head = n_sel > 0 && heads.start / group == (heads.end - 1) / group;
    if !tiles_apply(kv, keys[0].start, hd) || !one_kv_head || n_tok * n_sel > TILE_ROWS {
        for (t, range) in keys.iter().enumerate() {
            let o = &mut out[t * n_sel * hd..(t + 1) * n_sel * hd];
            let qt = &q[t * qd..(t + 1) * qd];
            attend(
                qt,
                kv,
                range.clone(),
                shape,
                heads.clone(),
                &mut scratch.single,
                o,
            );
        }
        return;
    }
    let rows = Rows {
        keys,
        n_sel,
        span_start: keys.iter().map(|k| k.start).min().unwrap_or(0),
        span_end: keys.iter().map(|k| k.end).max().unwrap_or(0),
    };
    let span = rows.span_end - rows.span_start;
    let TileScratch {
        scores, q16, qv, ..
    } = scratch;
    zeroed_scores(scores, n_tok * n_sel * span);
    q16.clear();
    for t in 0..n_tok {
        extend_f16(q16, &q[t * qd + heads.start * hd..t * qd + heads.end * hd]);
    }
    #[cfg(target_arch = "x86_64")]
    super::rows_tile::expand_queries(q16, hd, qv);
    let off = (heads.start / group) * hd;
    let kv_dim = shape.n_kv_heads * hd;
    let mut pos = rows.span_start;
    while pos < rows.span_end {
        let (run, len) = kv.key_run(pos);
        let len = len.min(rows.next_boundary(pos) - pos);
        let KvRow::F16(k) = run else {
            unreachable!("tiles only run over f16 rows (tiles_apply)")
        };
        let at = |r: usize| rows.score_at(r, span, pos);
        if pos + len < rows.span_end {
            prefetch_next(kv.key_run(pos + len), kv_dim, off, hd);
        }
        for_groups(&rows, pos, len, DOT_GROUP, |full| {
            dot_full(full, qv, hd, k, kv_dim, off, len, scores, at, &[])
        });
        for r in 0..n_tok * n_sel {
            if rows.covers(r, pos, len) {
                shape.finish_scores(&mut scores[at(r)..][..len]);
            }
        }
        pos += len;
    }
    for r in 0..n_tok * n_sel {
        let own = rows.own(r, span);
        shape.softmax(heads.start + r % n_sel, &mut scores[own.clone()]);
        round_to_f16_in_place(&mut scores[own]);
    }
    out.fill(0.0);
    let mut pos = rows.span_start;
    while pos < rows.span_end {
        let (run, len) = kv.value_run(pos);
        let len = len.min(rows.next_boundary(pos) - pos);
        let KvRow::F16(v) = run else {
            unreachable!("tiles only run over f16 rows (tiles_apply)")
        };
        let p_at = |r: usize| rows.score_at(r, span, pos);
        if pos + len < rows.span_end {
            prefetch_next(kv.value_run(pos + len), kv_dim, off, hd);
        }
        for_groups(&rows, pos, len, AXPY_GROUP, |full| {
            axpy_full(full, out, hd, scores, p_at, v, kv_dim, off, len, &[])
        });
        pos += len;
    }
}

/// Starts loading the head slice of the next run's first rows while this run is computed
/// (a run is one pool block: the hardware prefetchers do not cross into it).
fn prefetch_next((run, len): (KvRow<'_>, usize), stride: usize, off: usize, hd: usize) {
    #[cfg(target_arch = "x86_64")]
    if let KvRow::F16(rows) = run {
        super::rows_tile::prefetch_run(rows, len, stride, off, hd);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (run, len, stride, off, hd);
}

/// Whether the tiles' f16 kernels serve this cache and head width; otherwise every query runs
/// through [`attend`].
pub(super) fn tiles_apply(kv: &dyn KvRead, first: usize, hd: usize) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::simd::{self, SimdLevel};
        simd::level() == SimdLevel::Avx2
            && super::rows_tile::fits(hd)
            && matches!(kv.key(first), KvRow::F16(_))
            && matches!(kv.value(first), KvRow::F16(_))
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (kv, first, hd);
        false
    }
}

/// The query rows of a tile: row `r` is token `r / n_sel`, head `r % n_sel`.
struct Rows<'a> {
    keys: &'a [Range<usize>],
    n_sel: usize,
    span_start: usize,
    span_end: usize,
}

impl Rows<'_> {
    /// The first position after `pos` where some token's range starts or ends (the span's end
    /// at most): runs cut there are seen whole or not at all by every row.
    fn next_boundary(&self, pos: usize) -> usize {
        self.keys
            .iter()
            .flat_map(|k| [k.start, k.end])
            .filter(|&b| b > pos)
            .fold(self.span_end, usize::min)
    }

    /// Whether row `r` attends to the positions `pos..pos + len` (runs never straddle a
    /// boundary, so a row sees a run whole or not at all).
    fn covers(&self, r: usize, pos: usize, len: usize) -> bool {
        let k = &self.keys[r / self.n_sel];
        k.start <= pos && pos + len <= k.end
    }

    /// Where row `r`'s score of position `pos` lies in a `[rows, span]` buffer.
    fn score_at(&self, r: usize, span: usize, pos: usize) -> usize {
        r * span + (pos - self.span_start)
    }

    /// Row `r`'s own scores in a `[rows, span]` buffer.
    fn own(&self, r: usize, span: usize) -> Range<usize> {
        let k = &self.keys[r / self.n_sel];
        self.score_at(r, span, k.start)..self.score_at(r, span, k.end)
    }
}

/// Largest group of rows per dot-product call.
#[cfg(target_arch = "x86_64")]
pub(super) const DOT_GROUP: usize = super::rows_tile::DOT_QUERIES;
#[cfg(not(target_arch = "x86_64"))]
pub(super) const DOT_GROUP: usize = 1;
/// Largest group of rows per V-sum call.
#[cfg(target_arch = "x86_64")]
pub(super) const AXPY_GROUP: usize = super::rows_tile::AXPY_QUERIES;
#[cfg(not(target_arch = "x86_64"))]
pub(super) const AXPY_GROUP: usize = 1;

/// Calls `f` with the rows that attend to all of `pos..pos + len`, at most `max` at a time.
fn for_groups(rows: &Rows<'_>, pos: usize, len: usize, max: usize, f: impl FnMut(&[usize])) {
    let n = rows.keys.len() * rows.n_sel;
    in_groups((0..n).filter(|&r| rows.covers(r, pos, len)), max, f);
}

/// Calls `f` with the ids of `ids` in order, at most `max` (up to [`TILE_ROWS`]) at a time.
pub(super) fn in_groups(ids: impl Iterator<Item = usize>, max: usize, mut f: impl FnMut(&[usize])) {
    let max = max.clamp(1, TILE_ROWS);
    let mut buf = [0usize; TILE_ROWS];
    let mut n = 0;
    for r in ids {
        buf[n] = r;
        n += 1;
        if n == max {
            f(&buf[..n]);
            n = 0;
        }
    }
    if n > 0 {
        f(&buf[..n]);
    }
}

/// Scores of the rows `full` against every row of the run `k` (`len` rows), prefetching
/// `ahead` into L2 a share per row pair.
#[allow(clippy::too_many_arguments)]
pub(super) fn dot_full(
    full: &[usize],
    qv: &[f32],
    hd: usize,
    k: &[f16],
    stride: usize,
    off: usize,
    len: usize,
    scores: &mut [f32],
    at: impl Fn(usize) -> usize,
    ahead: &[f16],
) {
    #[cfg(target_arch = "x86_64")]
    {
        assert!(
            len == 0 || (len - 1) * stride + off + hd <= k.len(),
            "tile: short run"
        );
        assert!(
            full.iter()
                .all(|&r| at(r) + len <= scores.len() && (r + 1) * 2 * hd <= qv.len())
        );
        let spread = super::rows_tile::Spread::new(ahead);
        macro_rules! call {
            ($n:literal) => {{
                let qp: [*const f32; $n] = std::array::from_fn(|i| qv[full[i] * 2 * hd..].as_ptr());
                let ats: [usize; $n] = std::array::from_fn(|i| at(full[i]));
                // SAFETY: tiles_apply checked the AVX2 level (avx2, fma, f16c) and the width,
                // the 512-bit loops run only where the process uses them; bounds asserted above.
                unsafe {
                    if crate::simd::avx512_rows() {
                        super::rows_tile::dot_tile_f16::<$n>(
                            qp, hd, k, stride, off, len, scores, ats, spread,
                        )
                    } else {
                        super::rows_tile_avx2::dot_tile_f16::<$n>(
                            qp, hd, k, stride, off, len, scores, ats, spread,
                        )
                    }
                }
            }};
        }
        match full.len() {
            1 => call!(1),
            2 => call!(2),
            3 => call!(3),
            4 => call!(4),
            5 => call!(5),
            6 => call!(6),
            7 => call!(7),
            8 => call!(8),
            n => unreachable!("dot group of {n} rows"),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (full, qv, hd, k, stride, off, len, scores, at, ahead);
        unreachable!("tiles only run on x86_64")
    }
}

/// V sums of the rows `full` over every row of the run `v` (`len` rows), prefetching `ahead`
/// into L2 a share per row.
#[allow(clippy::too_many_arguments)]
pub(super) fn axpy_full(
    full: &[usize],
    out: &mut [f32],
    hd: usize,
    scores: &[f32],
    p_at: impl Fn(usize) -> usize,
    v: &[f16],
    stride: usize,
    off: usize,
    len: usize,
    ahead: &[f16],
) {
    #[cfg(target_arch = "x86_64")]
    {
        let spread = super::rows_tile::Spread::new(ahead);
        assert!(
            len == 0 || (len - 1) * stride + off + hd <= v.len(),
            "tile: short run"
        );
        assert!(
            full.iter()
                .all(|&r| p_at(r) + len <= scores.len() && (r + 1) * hd <= out.len())
        );
        // SAFETY: tiles_apply checked the features and width; bounds asserted above; rows in
        // `full` are distinct, so their outputs do not overlap.
        unsafe {
            super::rows_tile::axpy_group(
                full.len(),
                out.as_mut_ptr(),
                |i| full[i] * hd,
                scores.as_ptr(),
                |i| p_at(full[i]),
                hd,
                v,
                stride,
                off,
                len,
                spread,
            )
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (full, out, hd, scores, p_at, v, stride, off, len, ahead);
        unreachable!("tiles only run on x86_64")
    }
}

#[cfg(test)]
#[path = "attention_tile_tests.rs"]
pub(super) mod tests;
