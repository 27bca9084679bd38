//! The f16 form of [`super::attend_split`] on the tile row kernels: for each chunk of
//! positions, every query row of a K/V head (each token × each of the head's query heads) is
//! scored against each K row while it is in registers, and the V sums of a column chunk serve
//! every row from each V row the same way; so the rows of a tile share each conversion of a
//! cache row, not only its read.
//!
//! Invariant: each score is [`dot_full`]'s, each softmax one row's, each output element a sum
//! over the row's positions in ascending order: the bits of [`super::attend`], token by token.

use std::ops::Range;

use super::attention::{AttnShape, KvRead, KvRow};
use super::attention_split::{cols_per_task, per_task};
use super::attention_tile::{AXPY_GROUP, DOT_GROUP, dot_full, in_groups};
use super::rows::round_to_f16_in_place;
use super::rows_tile::{Spread, axpy_group, expand_queries};
use crate::threads::{self, SharedMut};

/// The scratch of one call: scores by chunk (`[chunk, row, per_task]`, each task writing its
/// own block), the probabilities by row (`[row, n_pos]`) and the expanded queries.
pub(super) struct Buffers<'a> {
    pub scores: &'a mut Vec<f32>,
    pub probs: &'a mut Vec<f32>,
    pub qv: &'a mut Vec<f32>,
}

/// A pointer to the output that tasks share: they write disjoint columns of it.
#[derive(Clone, Copy)]
struct Out(*mut f32);
// SAFETY: tasks write disjoint (row, column) entries only (see the V pass).
unsafe impl Send for Out {}
// SAFETY: as above.
unsafe impl Sync for Out {}

impl Out {
    /// The pointer (a method, so closures capture the whole `Sync` wrapper).
    fn ptr(self) -> *mut f32 {
        self.0
    }
}

/// Grows `v` to at least `n` elements (values left over from an earlier call are overwritten
/// before they are read).
fn at_least(v: &mut Vec<f32>, n: usize) {
    if v.len() < n {
        v.resize(n, 0.0);
    }
}

/// [`super::attend_split`] over f16 rows with tile kernels ([`super::attention_tile::tiles_apply`]
/// holds): `q16` the selected heads' f16 queries (`[tokens, heads.len(), head_dim]`), `lo..lo +
/// n_pos` the union of `keys`, every range non-empty.
#[allow(clippy::too_many_arguments)]
pub(super) fn split_tiles(
    q16: &[half::f16],
    kv: &dyn KvRead,
    keys: &[Range<usize>],
    lo: usize,
    n_pos: usize,
    shape: AttnShape,
    heads: Range<usize>,
    buf: Buffers<'_>,
    out: &mut [f32],
) {
    let hd = shape.head_dim;
    let (n_tok, n_sel) = (keys.len(), heads.len());
    let n_rows = n_tok * n_sel;
    let group = shape.n_heads / shape.n_kv_heads;
    let kv_dim = shape.n_kv_heads * hd;
    let threads = threads::current_threads();
    let Buffers { scores, probs, qv } = buf;
    expand_queries(q16, hd, qv);
    let qv = &qv[..];
    let per = per_task(n_pos, threads);
    let chunks = n_pos.div_ceil(per);
    let block = n_rows * per;
    at_least(scores, chunks * block);
    at_least(probs, n_rows * n_pos);
    // The K/V heads the selected query heads read.
    let kv_heads = heads.start / group..(heads.end - 1) / group + 1;
    // Whether row r (token r / n_sel) sees the positions `at..at + len` (runs are cut at every
    // token's range ends, so a row sees a run whole or not at all).
    let covers = |r: usize, at: usize, len: usize| {
        let k = &keys[r / n_sel];
        k.start <= at && at + len <= k.end
    };
    // The first range end after `at`: runs are cut there.
    let boundary = |at: usize| {
        keys.iter()
            .flat_map(|k| [k.start, k.end])
            .filter(|&b| b > at)
            .fold(lo + n_pos, usize::min)
    };
    // Calls `f` with the rows of K/V head g that see `at..at + len`, `max` at a time.
    let rows_of = |g: usize, at: usize, len: usize, max: usize, f: &mut dyn FnMut(&[usize])| {
        let mine = |&r: &usize| (heads.start + r % n_sel) / group == g && covers(r, at, len);
        in_groups((0..n_rows).filter(mine), max, f);
    };

    // Scores: positions split in chunks; each K run scored for every row of each K/V head.
    let sc = SharedMut::new(&mut scores[..]);
    threads::for_each(chunks, |c| {
        let (c0, c1) = (c * per, ((c + 1) * per).min(n_pos));
        // SAFETY: block c belongs to this task only.
        let mine = unsafe { sc.slice(c * block, block) };
        let mut pos = c0;
        while pos < c1 {
            let (run, len) = kv.key_run(lo + pos);
            let len = len.min(c1 - pos).min(boundary(lo + pos) - lo - pos);
            let KvRow::F16(k) = run else {
                unreachable!("tiles only run over f16 rows (tiles_apply)")
            };
            let at = |r: usize| r * per + pos - c0;
            for g in kv_heads.clone() {
                rows_of(g, lo + pos, len, DOT_GROUP, &mut |full| {
                    dot_full(full, qv, hd, k, kv_dim, g * hd, len, mine, at, &[])
                });
            }
            for r in 0..n_rows {
                if covers(r, lo + pos, len) {
                    shape.finish_scores(&mut mine[at(r)..][..len]);
                }
            }
            pos += len;
        }
    });

    // Softmax: one task per row, its scores gathered from the chunks into its own row.
    let scores = &scores[..];
    let pr = SharedMut::new(&mut probs[..]);
    threads::for_each(n_rows, |r| {
        let k = &keys[r / n_sel];
        let (a, b) = (k.start - lo, k.end - lo);
        // SAFETY: row r's span belongs to this task only.
        let p = unsafe { pr.slice(r * n_pos + a, b - a) };
        let mut pos = a;
        while pos < b {
            let c = pos / per;
            let end = ((c + 1) * per).min(b);
            let src = c * block + r * per + pos - c * per;
            p[pos - a..end - a].copy_from_slice(&scores[src..src + end - pos]);
            pos = end;
        }
        shape.softmax(heads.start + r % n_sel, p);
        // ggml multiplies an f16 V by the probabilities rounded to f16.
        round_to_f16_in_place(p);
    });

    // V sums: head columns split in chunks; each V run summed into every row of each K/V
    // head, positions in order.
    let cols = cols_per_task(hd, threads, true);
    let probs = &probs[..];
    let o = Out(out.as_mut_ptr());
    threads::for_each(hd.div_ceil(cols), |c| {
        let c0 = c * cols;
        let w = cols.min(hd - c0);
        for r in 0..n_rows {
            // SAFETY: columns c0..c0 + w of row r lie in `out` and belong to this task only.
            unsafe { std::slice::from_raw_parts_mut(o.ptr().add(r * hd + c0), w) }.fill(0.0);
        }
        let mut pos = 0;
        while pos < n_pos {
            let (run, len) = kv.value_run(lo + pos);
            let len = len.min(n_pos - pos).min(boundary(lo + pos) - lo - pos);
            let KvRow::F16(v) = run else {
                unreachable!("tiles only run over f16 rows (tiles_apply)")
            };
            for g in kv_heads.clone() {
                rows_of(g, lo + pos, len, AXPY_GROUP, &mut |full| {
                    let acc = |i: usize| full[i] * hd + c0;
                    let p = |i: usize| full[i] * n_pos + pos;
                    let off = g * hd + c0;
                    assert!(len == 0 || (len - 1) * kv_dim + off + w <= v.len());
                    // SAFETY: tiles_apply checked the AVX2 level (avx2, fma, f16c); w is a multiple of 16
                    // (cols_per_task); the rows' column slices are distinct, inside `out` and
                    // this task's; each p row holds `len` probabilities inside `probs`; the V
                    // rows lie inside the run (asserted).
                    unsafe {
                        axpy_group(
                            full.len(),
                            o.ptr(),
                            acc,
                            probs.as_ptr(),
                            p,
                            w,
                            v,
                            kv_dim,
                            off,
                            len,
                            Spread::new(&[]),
                        )
                    }
                });
            }
            pos += len;
        }
    });
}
