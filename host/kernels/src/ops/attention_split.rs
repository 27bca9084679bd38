//! Attention of a few consecutive tokens of one sequence split across the worker pool, for few
//! sequences with long contexts (decode of one sequence, the verifying rows of its draft, a
//! model with a single K/V head): the scores by chunks of positions, the softmax by (token,
//! head), the V sums by chunks of head columns (ggml's non-flash decomposition, one dispatch per
//! phase), every token served from each K/V run while it is in cache, so the tokens read the
//! cache once between them.
//!
//! Invariant: every score, probability and output element goes through exactly the arithmetic
//! of [`attend`], in the same order (a score is one row's dot product, a softmax one head's row,
//! an output element a sum over positions in ascending order), so each token's result is
//! bit-identical to [`attend`] whatever the chunk sizes, the tokens beside it or the thread
//! count. f16 rows run on the tile row kernels where they apply
//! ([`super::attention_split_tile`]); quantized K/V rows fall back to [`attend`] on the calling
//! thread.

use std::ops::Range;

use half::f16;

use super::attention::{AttnScratch, AttnShape, KvRead, KvRow, attend};
use super::rows::{
    axpy_rows_f16, axpy_rows_f32, dot_rows_f16, dot_rows_f32, extend_f16, round_to_f16_in_place,
};
use crate::threads::{self, SharedMut};

/// Fewest positions per score task.
const MIN_POS_PER_TASK: usize = 64;
/// Fewest head columns per V task (a cache line of f16 values).
const MIN_COLS_PER_TASK: usize = 32;

/// Positions per score task for `n_pos` positions on `threads` threads.
pub(super) fn per_task(n_pos: usize, threads: usize) -> usize {
    n_pos.div_ceil(4 * threads.max(1)).max(MIN_POS_PER_TASK)
}

/// Head columns per V task: halved while the chunks are fewer than two per thread, down to
/// [`MIN_COLS_PER_TASK`], keeping whole 16-element vectors when `tiles`.
pub(super) fn cols_per_task(hd: usize, threads: usize, tiles: bool) -> usize {
    let mut cols = hd;
    while hd / cols < 2 * threads
        && cols.is_multiple_of(2)
        && cols / 2 >= MIN_COLS_PER_TASK
        && (!tiles || (cols / 2).is_multiple_of(16))
    {
        cols /= 2;
    }
    cols
}

/// Buffers of [`attend_split`], reused between calls.
#[derive(Debug, Default)]
pub struct SplitScratch {
    scores: Vec<f32>,
    q16: Vec<f16>,
    /// The tile form's probabilities by row and expanded queries.
    probs: Vec<f32>,
    qv: Vec<f32>,
    fallback: AttnScratch,
}

impl SplitScratch {
    /// Makes room for `tokens` tokens of `heads` query heads over up to `positions` positions,
    /// so no later call within those bounds allocates (a quantized cache's dequantized run
    /// aside).
    pub fn reserve(&mut self, tokens: usize, heads: usize, positions: usize, head_dim: usize) {
        let rows = tokens.max(1).saturating_mul(heads);
        let cells = rows.saturating_mul(positions);
        // The tile form's chunks may round the positions up by a chunk: a quarter of them, or
        // at least `MIN_POS_PER_TASK`.
        let chunked = rows.saturating_mul(positions / 4 + MIN_POS_PER_TASK);
        let scores = cells
            .saturating_add(chunked)
            .max(super::attention::SCORES_MIN);
        super::attention::room(&mut self.scores, scores);
        super::attention::room(&mut self.probs, cells);
        super::attention::room(&mut self.q16, rows.saturating_mul(head_dim));
        super::attention::room(&mut self.qv, rows.saturating_mul(2 * head_dim));
        self.fallback.reserve(heads, positions, head_dim);
    }
}

/// [`attend`] for each of the tokens whose queries are the rows of `q` (`[keys.len(), n_heads *
/// head_dim]`), token `t` over positions `keys[t]`, query heads `heads`, into the rows of `out`
/// (`[keys.len(), heads.len() * head_dim]`), with the work spread over [`crate::threads`]'s
/// current pool. Same bits as [`attend`] token by token.
pub fn attend_split(
    q: &[f32],
    kv: &dyn KvRead,
    keys: &[Range<usize>],
    shape: AttnShape,
    heads: Range<usize>,
    scratch: &mut SplitScratch,
    out: &mut [f32],
) {
    let quantized = |r: KvRow<'_>| matches!(r, KvRow::Q8_0(_) | KvRow::Q4_0(_));
    let AttnShape {
        n_heads,
        n_kv_heads,
        head_dim: hd,
        ..
    } = shape;
    let n_tok = keys.len();
    assert_eq!(q.len(), n_tok * n_heads * hd, "attention: query length");
    assert!(
        heads.start <= heads.end && heads.end <= n_heads,
        "attention: head range"
    );
    let n_sel = heads.len();
    assert_eq!(out.len(), n_tok * n_sel * hd, "attention: output length");
    let lo = keys.iter().map(|k| k.start).min().unwrap_or(0);
    let hi = keys.iter().map(|k| k.end).max().unwrap_or(0);
    let threads = threads::current_threads();
    if threads <= 1
        || n_sel == 0
        || keys.iter().any(|k| k.is_empty())
        || n_kv_heads == 0
        || !n_heads.is_multiple_of(n_kv_heads)
        || quantized(kv.key(lo))
        || quantized(kv.value(lo))
    {
        // One thread, no head, quantized rows, or a shape `attend` refuses (with its message).
        let q_rows = q.chunks_exact((n_heads * hd).max(1));
        for ((qr, k), o) in q_rows
            .zip(keys)
            .zip(out.chunks_exact_mut((n_sel * hd).max(1)))
        {
            attend(
                qr,
                kv,
                k.clone(),
                shape,
                heads.clone(),
                &mut scratch.fallback,
                o,
            );
        }
        return;
    }
    let group = n_heads / n_kv_heads;
    let kv_dim = n_kv_heads * hd;
    let n_pos = hi - lo;
    // Row (t, i) of the scores: token t's query head `heads.start + i`, position `lo + p` at p.
    let row = |t: usize, i: usize| (t * n_sel + i) * n_pos;
    let SplitScratch {
        scores,
        q16,
        probs,
        qv,
        ..
    } = scratch;
    q16.clear();
    for qr in q.chunks_exact(n_heads * hd) {
        extend_f16(q16, &qr[heads.start * hd..heads.end * hd]);
    }
    #[cfg(target_arch = "x86_64")]
    if super::attention_tile::tiles_apply(kv, lo, hd) {
        let buf = super::attention_split_tile::Buffers { scores, probs, qv };
        super::attention_split_tile::split_tiles(q16, kv, keys, lo, n_pos, shape, heads, buf, out);
        return;
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (probs, qv);
    super::attention::zeroed_scores(scores, n_tok * n_sel * n_pos);
    let q16 = &q16[..];
    // The part of a run of positions `at..at + len` that token t attends to.
    let part = |t: usize, at: usize, len: usize| {
        let k = &keys[t];
        let (a, b) = (at.max(k.start), (at + len).min(k.end));
        (a < b).then_some(a..b)
    };

    // Scores: positions split in chunks, every token and selected head per chunk (one K read).
    let per_task = per_task(n_pos, threads);
    let sc = SharedMut::new(&mut scores[..]);
    threads::for_each(n_pos.div_ceil(per_task), |c| {
        let p1 = ((c + 1) * per_task).min(n_pos);
        let mut pos = c * per_task;
        while pos < p1 {
            let (run, len) = kv.key_run(lo + pos);
            let len = len.min(p1 - pos);
            for t in 0..n_tok {
                let Some(r) = part(t, lo + pos, len) else {
                    continue;
                };
                let skip = (r.start - lo - pos) * kv_dim;
                for (i, h) in heads.clone().enumerate() {
                    let off = (h / group) * hd;
                    // SAFETY: token t's head i's positions r lie in chunk c, which only this
                    // task writes, and this slice is dropped before the next one is taken.
                    let dst = unsafe { sc.slice(row(t, i) + r.start - lo, r.len()) };
                    match run {
                        KvRow::F32(k) => {
                            let qh = &q[(t * n_heads + h) * hd..(t * n_heads + h + 1) * hd];
                            dot_rows_f32(qh, &k[skip..], kv_dim, off, dst)
                        }
                        KvRow::F16(k) => {
                            let qh = &q16[(t * n_sel + i) * hd..(t * n_sel + i + 1) * hd];
                            dot_rows_f16(qh, &k[skip..], kv_dim, off, dst)
                        }
                        KvRow::Q8_0(_) | KvRow::Q4_0(_) => unreachable!("quantized rows fall back"),
                    }
                    shape.finish_scores(dst);
                }
            }
            pos += len;
        }
    });

    // Softmax: one task per (token, head) row, over the token's own positions.
    let f16_values = matches!(kv.value(lo), KvRow::F16(_));
    threads::for_each(n_tok * n_sel, |r| {
        let (t, i) = (r / n_sel, r % n_sel);
        let k = &keys[t];
        // SAFETY: row r's span belongs to this task only.
        let p = unsafe { sc.slice(row(t, i) + k.start - lo, k.len()) };
        shape.softmax(heads.start + i, p);
        if f16_values {
            // ggml multiplies an f16 V by the probabilities rounded to f16.
            round_to_f16_in_place(p);
        }
    });

    // V sums: head columns split in chunks, every token and selected head per chunk, positions
    // in order.
    let cols = cols_per_task(hd, threads, false);
    let scores = &scores[..];
    let o = SharedMut::new(out);
    threads::for_each(hd.div_ceil(cols), |c| {
        let c0 = c * cols;
        let w = cols.min(hd - c0);
        for r in 0..n_tok * n_sel {
            // SAFETY: columns c0..c0 + w of each (token, head) row belong to this task only.
            unsafe { o.slice(r * hd + c0, w) }.fill(0.0);
        }
        let mut pos = 0;
        while pos < n_pos {
            let (run, len) = kv.value_run(lo + pos);
            let len = len.min(n_pos - pos);
            for t in 0..n_tok {
                let Some(r) = part(t, lo + pos, len) else {
                    continue;
                };
                let skip = (r.start - lo - pos) * kv_dim;
                for (i, h) in heads.clone().enumerate() {
                    let off = (h / group) * hd + c0;
                    // SAFETY: as above; the slice is dropped before the next one is taken.
                    let acc = unsafe { o.slice((t * n_sel + i) * hd + c0, w) };
                    let p0 = row(t, i) + r.start - lo;
                    let p = &scores[p0..p0 + r.len()];
                    match run {
                        KvRow::F32(v) => axpy_rows_f32(acc, p, &v[skip..], kv_dim, off),
                        KvRow::F16(v) => axpy_rows_f16(acc, p, &v[skip..], kv_dim, off),
                        KvRow::Q8_0(_) | KvRow::Q4_0(_) => unreachable!("quantized rows fall back"),
                    }
                }
            }
            pos += len;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::threads::Pool;

    /// K/V rows `[n, kv_dim]` in f32 or f16, handed out in runs that end at block edges (as a
    /// paged cache does).
    struct Paged {
        k32: Vec<f32>,
        v32: Vec<f32>,
        k16: Vec<f16>,
        v16: Vec<f16>,
        kv_dim: usize,
        block: usize,
        half: bool,
    }

    impl Paged {
        fn new(n: usize, kv_dim: usize, block: usize, half: bool, seed: u32) -> Self {
            let mut s = seed;
            let mut rnd = move || {
                s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (s >> 8) as f32 / (1u32 << 24) as f32 * 2.0 - 1.0
            };
            let k32: Vec<f32> = (0..n * kv_dim).map(|_| rnd()).collect();
            let v32: Vec<f32> = (0..n * kv_dim).map(|_| rnd()).collect();
            let k16 = k32.iter().map(|&v| f16::from_f32(v)).collect();
            let v16 = v32.iter().map(|&v| f16::from_f32(v)).collect();
            Paged {
                k32,
                v32,
                k16,
                v16,
                kv_dim,
                block,
                half,
            }
        }

        fn run(&self, pos: usize, key: bool) -> (KvRow<'_>, usize) {
            let len = self.block - pos % self.block;
            let n = self.k32.len() / self.kv_dim;
            let end = (pos + len).min(n) * self.kv_dim;
            let start = pos * self.kv_dim;
            let row = match (self.half, key) {
                (false, true) => KvRow::F32(&self.k32[start..end]),
                (false, false) => KvRow::F32(&self.v32[start..end]),
                (true, true) => KvRow::F16(&self.k16[start..end]),
                (true, false) => KvRow::F16(&self.v16[start..end]),
            };
            (row, (end - start) / self.kv_dim)
        }
    }

    impl KvRead for Paged {
        fn key(&self, pos: usize) -> KvRow<'_> {
            self.run(pos, true).0
        }
        fn value(&self, pos: usize) -> KvRow<'_> {
            self.run(pos, false).0
        }
        fn key_run(&self, pos: usize) -> (KvRow<'_>, usize) {
            self.run(pos, true)
        }
        fn value_run(&self, pos: usize) -> (KvRow<'_>, usize) {
            self.run(pos, false)
        }
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    /// Same bits as `attend`, token by token, for SmolLM2's (9 heads over 3 K/V heads of 64) and
    /// Gemma 3's (4 heads over 1 K/V head of 256) shapes, f32 and f16 rows, one to five
    /// consecutive tokens (causal and sliding-window ranges), head subsets, block sizes and pool
    /// sizes.
    #[test]
    fn split_matches_attend_bit_for_bit() {
        let pools = [Pool::new(1), Pool::new(2), Pool::new(3), Pool::new(5)];
        for (n_heads, n_kv_heads, head_dim) in [(9, 3, 64), (4, 1, 256), (2, 2, 40)] {
            let q_dim = n_heads * head_dim;
            for half in [false, true] {
                for (n, block) in [(1, 16), (70, 16), (700, 256), (1500, 1500)] {
                    let kv_dim = n_kv_heads * head_dim;
                    let kv = Paged::new(n, kv_dim, block, half, n as u32 + 7);
                    let sinks: Vec<f32> = (0..n_heads).map(|h| h as f32 - 2.0).collect();
                    let plain = AttnShape::new(n_heads, n_kv_heads, head_dim, 0.125);
                    let capped = AttnShape {
                        softcap: 2.0,
                        ..plain
                    };
                    let sunk = AttnShape {
                        sinks: Some(&sinks),
                        ..plain
                    };
                    for tokens in [1, 3, 5].into_iter().filter(|&t| t <= n) {
                        let q = Paged::new(tokens, q_dim, 1, false, 99 + tokens as u32).k32;
                        // Token t at position n - tokens + t: causal, and a sliding window.
                        let last = |t: usize| n - tokens + t + 1;
                        let causal: Vec<Range<usize>> = (0..tokens).map(|t| 0..last(t)).collect();
                        let window: Vec<Range<usize>> = (0..tokens)
                            .map(|t| (n / 3 + t).min(last(t) - 1)..last(t))
                            .collect();
                        let cases = [(causal, 0..n_heads), (window, 1..n_heads)];
                        for (shape, (keys, heads)) in [plain, capped, sunk]
                            .into_iter()
                            .flat_map(|s| cases.clone().map(|c| (s, c)))
                        {
                            let width = heads.len() * head_dim;
                            let mut want = vec![0.0; tokens * width];
                            let mut s = AttnScratch::default();
                            for ((qr, k), o) in q
                                .chunks_exact(q_dim)
                                .zip(&keys)
                                .zip(want.chunks_exact_mut(width))
                            {
                                attend(qr, &kv, k.clone(), shape, heads.clone(), &mut s, o);
                            }
                            for pool in &pools {
                                let mut got = vec![f32::NAN; want.len()];
                                let mut s = SplitScratch::default();
                                s.reserve(tokens, n_heads, n, head_dim);
                                let room = (s.scores.capacity(), s.q16.capacity());
                                pool.install(|| {
                                    attend_split(
                                        &q,
                                        &kv,
                                        &keys,
                                        shape,
                                        heads.clone(),
                                        &mut s,
                                        &mut got,
                                    )
                                });
                                assert_eq!(
                                    bits(&got),
                                    bits(&want),
                                    "{n_heads}/{n_kv_heads}x{head_dim} half={half} n={n} \
                                     block={block} keys={keys:?} threads={} softcap={} sinks={}",
                                    pool.threads(),
                                    shape.softcap,
                                    shape.sinks.is_some()
                                );
                                // The reserved room was enough: nothing grew.
                                assert_eq!((s.scores.capacity(), s.q16.capacity()), room);
                            }
                        }
                    }
                }
            }
        }
    }
}
