//! Attention of one token split across the worker pool, for few sequences with long contexts
//! (decode of one sequence, a model with a single K/V head): the scores by chunks of positions,
//! the softmax by head, the V sums by chunks of head columns (ggml's non-flash decomposition,
//! one dispatch per phase).
//!
//! Invariant: every score, probability and output element goes through exactly the arithmetic
//! of [`attend`], in the same order (a score is one row's dot product, a softmax one head's row,
//! an output element a sum over positions in ascending order), so the result is bit-identical
//! to [`attend`] whatever the chunk sizes or the thread count. Quantized K/V rows fall back to
//! [`attend`] on the calling thread.

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

/// Buffers of [`attend_split`], reused between calls.
#[derive(Debug, Default)]
pub struct SplitScratch {
    scores: Vec<f32>,
    q16: Vec<f16>,
    fallback: AttnScratch,
}

impl SplitScratch {
    /// Makes room for `heads` query heads over up to `positions` positions, so no later call
    /// within those bounds allocates (a quantized cache's dequantized run aside).
    pub fn reserve(&mut self, heads: usize, positions: usize, head_dim: usize) {
        super::attention::room(&mut self.scores, heads.saturating_mul(positions));
        super::attention::room(&mut self.q16, heads.saturating_mul(head_dim));
        self.fallback.reserve(heads, positions, head_dim);
    }
}

/// Same contract and the same bits as [`attend`] (one token, query heads `heads`, positions
/// `keys`), with the work spread over [`crate::threads`]'s current pool.
pub fn attend_split(
    q: &[f32],
    kv: &dyn KvRead,
    keys: Range<usize>,
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
    let threads = threads::current_threads();
    if threads <= 1
        || keys.is_empty()
        || n_kv_heads == 0
        || !n_heads.is_multiple_of(n_kv_heads)
        || quantized(kv.key(keys.start))
        || quantized(kv.value(keys.start))
    {
        // One thread, quantized rows, or a shape `attend` refuses (with its message).
        attend(q, kv, keys, shape, heads, &mut scratch.fallback, out);
        return;
    }
    assert!(
        heads.start <= heads.end && heads.end <= n_heads,
        "attention: head range"
    );
    assert_eq!(q.len(), n_heads * hd, "attention: query length");
    assert_eq!(out.len(), heads.len() * hd, "attention: output length");
    let group = n_heads / n_kv_heads;
    let kv_dim = n_kv_heads * hd;
    let (first, n_pos, n_sel) = (keys.start, keys.len(), heads.len());
    let SplitScratch { scores, q16, .. } = scratch;
    super::attention::zeroed_scores(scores, n_sel * n_pos);
    q16.clear();
    extend_f16(q16, &q[heads.start * hd..heads.end * hd]);
    let q16 = &q16[..];

    // Scores: positions split in chunks, every selected head per chunk (one K read).
    let per_task = n_pos.div_ceil(4 * threads).max(MIN_POS_PER_TASK);
    let sc = SharedMut::new(&mut scores[..]);
    threads::for_each(n_pos.div_ceil(per_task), |c| {
        let p1 = ((c + 1) * per_task).min(n_pos);
        let mut pos = c * per_task;
        while pos < p1 {
            let (run, len) = kv.key_run(first + pos);
            let len = len.min(p1 - pos);
            for (i, h) in heads.clone().enumerate() {
                let off = (h / group) * hd;
                // SAFETY: head i's positions pos..pos + len lie in chunk c, which only this
                // task writes, and this slice is dropped before the next one is taken.
                let dst = unsafe { sc.slice(i * n_pos + pos, len) };
                match run {
                    KvRow::F32(k) => dot_rows_f32(&q[h * hd..(h + 1) * hd], k, kv_dim, off, dst),
                    KvRow::F16(k) => dot_rows_f16(&q16[i * hd..(i + 1) * hd], k, kv_dim, off, dst),
                    KvRow::Q8_0(_) | KvRow::Q4_0(_) => unreachable!("quantized rows fall back"),
                }
                shape.finish_scores(dst);
            }
            pos += len;
        }
    });

    // Softmax: one task per head row.
    let f16_values = matches!(kv.value(first), KvRow::F16(_));
    threads::for_each_chunk_mut(&mut scores[..], n_pos, |i, p| {
        shape.softmax(heads.start + i, p);
        if f16_values {
            // ggml multiplies an f16 V by the probabilities rounded to f16.
            round_to_f16_in_place(p);
        }
    });

    // V sums: head columns split in chunks, every selected head per chunk, positions in order.
    let mut cols = hd;
    while hd / cols < 2 * threads && cols.is_multiple_of(2) && cols / 2 >= MIN_COLS_PER_TASK {
        cols /= 2;
    }
    let scores = &scores[..];
    let o = SharedMut::new(out);
    threads::for_each(hd.div_ceil(cols), |c| {
        let c0 = c * cols;
        let w = cols.min(hd - c0);
        for i in 0..n_sel {
            // SAFETY: columns c0..c0 + w of head i belong to this task only.
            unsafe { o.slice(i * hd + c0, w) }.fill(0.0);
        }
        let mut pos = 0;
        while pos < n_pos {
            let (run, len) = kv.value_run(first + pos);
            let len = len.min(n_pos - pos);
            for (i, h) in heads.clone().enumerate() {
                let off = (h / group) * hd + c0;
                // SAFETY: as above; the slice is dropped before the next one is taken.
                let acc = unsafe { o.slice(i * hd + c0, w) };
                let p = &scores[i * n_pos + pos..i * n_pos + pos + len];
                match run {
                    KvRow::F32(v) => axpy_rows_f32(acc, p, v, kv_dim, off),
                    KvRow::F16(v) => axpy_rows_f16(acc, p, v, kv_dim, off),
                    KvRow::Q8_0(_) | KvRow::Q4_0(_) => unreachable!("quantized rows fall back"),
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

    /// Same bits as `attend` for SmolLM2's (9 heads over 3 K/V heads of 64) and Gemma 3's
    /// (4 heads over 1 K/V head of 256) shapes, f32 and f16 rows, windows, head subsets,
    /// block sizes and pool sizes.
    #[test]
    fn split_matches_attend_bit_for_bit() {
        let pools = [Pool::new(1), Pool::new(2), Pool::new(3), Pool::new(5)];
        for (n_heads, n_kv_heads, head_dim) in [(9, 3, 64), (4, 1, 256), (2, 2, 40)] {
            for half in [false, true] {
                for (n, block) in [(1, 16), (70, 16), (700, 256), (1500, 1500)] {
                    let kv_dim = n_kv_heads * head_dim;
                    let kv = Paged::new(n, kv_dim, block, half, n as u32 + 7);
                    let q = Paged::new(1, n_heads * head_dim, 1, false, 99).k32;
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
                    let cases = [(0..n, 0..n_heads), ((n / 3)..n, 1..n_heads)];
                    for (shape, (keys, heads)) in [plain, capped, sunk]
                        .into_iter()
                        .flat_map(|s| cases.clone().map(|c| (s, c)))
                    {
                        let mut want = vec![0.0; heads.len() * head_dim];
                        let mut s = AttnScratch::default();
                        attend(
                            &q,
                            &kv,
                            keys.clone(),
                            shape,
                            heads.clone(),
                            &mut s,
                            &mut want,
                        );
                        for pool in &pools {
                            let mut got = vec![f32::NAN; want.len()];
                            let mut s = SplitScratch::default();
                            pool.install(|| {
                                attend_split(
                                    &q,
                                    &kv,
                                    keys.clone(),
                                    shape,
                                    heads.clone(),
                                    &mut s,
                                    &mut got,
                                )
                            });
                            assert_eq!(
                                bits(&got),
                                bits(&want),
                                "{n_heads}/{n_kv_heads}x{head_dim} half={half} n={n} block={block} \
                                 keys={keys:?} threads={} softcap={} sinks={}",
                                pool.threads(),
                                shape.softcap,
                                shape.sinks.is_some()
                            );
                        }
                    }
                }
            }
        }
    }
}
