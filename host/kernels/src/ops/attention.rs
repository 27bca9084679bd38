//! Causal multi-head attention of one query token over the K/V rows of its own sequence,
//! read through [`KvRead`] so the cache layout (contiguous, paged blocks, tiers) can change
//! without touching the maths. Grouped-query attention: query head `h` reads K/V head
//! `h / (n_heads / n_kv_heads)`.
//!
//! With an f16 cache the query and the attention weights are rounded to f16 before their dot
//! products, as ggml does when it multiplies an f16 tensor, so results track llama.cpp closely.

use std::ops::Range;

use half::f16;

use crate::GgmlType;
use crate::quant::dequantize_row;

use super::rows::{
    axpy_rows_f16, axpy_rows_f32, dot_rows_f16, dot_rows_f32, extend_f16, round_to_f16_in_place,
};
use super::softmax::{softmax_in_place, softmax_with_sink_in_place};

/// One cached K or V row (`[n_kv_heads * head_dim]`) in its storage type.
#[derive(Clone, Copy, Debug)]
pub enum KvRow<'a> {
    F32(&'a [f32]),
    F16(&'a [f16]),
    /// GGML q8_0 blocks (`kv_dim / 32 × 34` bytes), dequantized on read.
    Q8_0(&'a [u8]),
    /// GGML q4_0 blocks (`kv_dim / 32 × 18` bytes), dequantized on read.
    Q4_0(&'a [u8]),
}

impl KvRow<'_> {
    /// Dequantizes `n` quantized rows into `buf` (`[n, kv_dim]`) and returns them as f32 rows;
    /// other rows are returned as they are.
    fn expand<'b>(self, buf: &'b mut Vec<f32>, kv_dim: usize, n: usize) -> KvRow<'b>
    where
        Self: 'b,
    {
        let (ty, bytes) = match self {
            KvRow::Q8_0(b) => (GgmlType::Q8_0, b),
            KvRow::Q4_0(b) => (GgmlType::Q4_0, b),
            other => return other,
        };
        buf.resize(n * kv_dim, 0.0);
        let row_bytes = ty
            .row_bytes(kv_dim)
            .expect("kv: row width is a multiple of 32");
        for (src, dst) in bytes
            .chunks_exact(row_bytes)
            .zip(buf.chunks_exact_mut(kv_dim))
            .take(n)
        {
            dequantize_row(ty, src, dst).expect("kv: quantized row length");
        }
        KvRow::F32(buf)
    }
}

/// Read access to one layer's K/V rows of one sequence, by absolute position.
pub trait KvRead: Sync {
    /// Key row at `pos`: `[n_kv_heads * head_dim]`.
    fn key(&self, pos: usize) -> KvRow<'_>;
    /// Value row at `pos`: `[n_kv_heads * head_dim]`.
    fn value(&self, pos: usize) -> KvRow<'_>;
    /// Key rows from `pos` on that lie contiguously in memory (`[n, kv_dim]`) and their
    /// count `n ≥ 1`; the default is the single row at `pos`.
    fn key_run(&self, pos: usize) -> (KvRow<'_>, usize) {
        (self.key(pos), 1)
    }
    /// Value rows from `pos` on that lie contiguously in memory, as [`KvRead::key_run`].
    fn value_run(&self, pos: usize) -> (KvRow<'_>, usize) {
        (self.value(pos), 1)
    }
}

/// Buffers reused between attention calls (no allocation once warmed up).
#[derive(Debug, Default)]
pub struct AttnScratch {
    scores: Vec<f32>,
    q16: Vec<f16>,
    row: Vec<f32>,
}

/// Scores kept room for from the first call (64 KiB), so the scores of a context that grows
/// token by token are not reallocated along the way.
pub(crate) const SCORES_MIN: usize = 16 * 1024;

/// Sets `scores` to `n` zeros, keeping at least [`SCORES_MIN`] of room.
pub(crate) fn zeroed_scores(scores: &mut Vec<f32>, n: usize) {
    scores.clear();
    scores.reserve(n.max(SCORES_MIN));
    scores.resize(n, 0.0);
}

/// Makes room for `n` elements in `v` (nothing when it has it).
pub(crate) fn room<T>(v: &mut Vec<T>, n: usize) {
    if v.capacity() < n {
        // Where the address space is refused, the buffer grows on demand instead.
        let _ = v.try_reserve_exact(n - v.len());
    }
}

impl AttnScratch {
    /// Makes room for `heads` query heads of one token over `positions` positions, so no
    /// later call within those bounds allocates (a quantized cache's dequantized run aside).
    pub fn reserve(&mut self, heads: usize, positions: usize, head_dim: usize) {
        room(&mut self.scores, heads.saturating_mul(positions));
        room(&mut self.q16, heads.saturating_mul(head_dim));
    }

    /// The scores' room (elements).
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.scores.capacity()
    }
}

/// Shape of an attention call.
#[derive(Clone, Copy, Debug)]
pub struct AttnShape<'a> {
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    /// Multiplier applied to `q·k` before the softmax (usually `1/sqrt(head_dim)`).
    pub scale: f32,
    /// Soft-cap `c` of the scores (Gemma 2): `s = c · tanh(q·k · scale / c)`; 0 for none.
    pub softcap: f32,
    /// Per-query-head sink logits (gpt-oss): one more logit in each head's softmax, with no
    /// value row, so the probabilities of the real positions sum to less than 1.
    pub sinks: Option<&'a [f32]>,
}

impl<'a> AttnShape<'a> {
    /// Plain scaled dot-product attention: no soft-cap, no sinks.
    pub fn new(n_heads: usize, n_kv_heads: usize, head_dim: usize, scale: f32) -> Self {
        AttnShape {
            n_heads,
            n_kv_heads,
            head_dim,
            scale,
            softcap: 0.0,
            sinks: None,
        }
    }

    /// Turns raw `q·k` products into scores in place: `× scale`, then the soft-cap when there
    /// is one, with ggml's flash-attention arithmetic (`scale / c` folded first, then
    /// `c · tanh(s)`).
    pub(crate) fn finish_scores(&self, dots: &mut [f32]) {
        if self.softcap > 0.0 {
            let (cap, scale) = (self.softcap, self.scale / self.softcap);
            for v in dots.iter_mut() {
                *v = cap * (*v * scale).tanh();
            }
        } else {
            for v in dots.iter_mut() {
                *v *= self.scale;
            }
        }
    }

    /// The softmax of query head `head`'s scores, in place (with its sink when there is one).
    pub(crate) fn softmax(&self, head: usize, scores: &mut [f32]) {
        match self.sinks.and_then(|s| s.get(head)) {
            Some(&sink) => softmax_with_sink_in_place(scores, sink),
            None => softmax_in_place(scores),
        }
    }
}

/// Attention of one token whose query is `q` (`[n_heads * head_dim]`, RoPE applied) over the
/// positions `keys` of `kv` (`0..pos + 1` for causal attention, a suffix of it for a sliding
/// window), for the query heads in `heads` only; writes `[heads.len() * head_dim]` into `out`.
/// Positions outside `keys` are masked: as with ggml's `-inf` mask they get probability exactly
/// 0, so leaving them out gives the masked softmax. Each head's result is the same whatever range
/// it is computed in, so callers may split heads across threads freely.
pub fn attend(
    q: &[f32],
    kv: &dyn KvRead,
    keys: Range<usize>,
    shape: AttnShape,
    heads: Range<usize>,
    scratch: &mut AttnScratch,
    out: &mut [f32],
) {
    let AttnShape {
        n_heads,
        n_kv_heads,
        head_dim,
        ..
    } = shape;
    assert!(
        n_kv_heads > 0 && n_heads.is_multiple_of(n_kv_heads),
        "attention: heads not grouped evenly"
    );
    assert!(
        heads.start <= heads.end && heads.end <= n_heads,
        "attention: head range"
    );
    assert_eq!(q.len(), n_heads * head_dim, "attention: query length");
    assert_eq!(
        out.len(),
        heads.len() * head_dim,
        "attention: output length"
    );
    assert!(
        keys.start < keys.end,
        "attention: a query sees at least itself"
    );
    let group = n_heads / n_kv_heads;
    let n_sel = heads.len();
    let (first, n_pos) = (keys.start, keys.len());
    let AttnScratch { scores, q16, row } = scratch;
    let kv_dim = n_kv_heads * head_dim;
    // [n_sel, n_pos]
    zeroed_scores(scores, n_sel * n_pos);
    q16.clear();
    extend_f16(q16, &q[heads.start * head_dim..heads.end * head_dim]);
    let mut pos = 0;
    while pos < n_pos {
        let (run, len) = kv.key_run(first + pos);
        let len = len.min(n_pos - pos);
        let run = run.expand(row, kv_dim, len);
        for (i, h) in heads.clone().enumerate() {
            let off = (h / group) * head_dim;
            let dst = &mut scores[i * n_pos + pos..i * n_pos + pos + len];
            match run {
                KvRow::F32(k) => {
                    dot_rows_f32(&q[h * head_dim..(h + 1) * head_dim], k, kv_dim, off, dst)
                }
                KvRow::F16(k) => {
                    dot_rows_f16(&q16[i * head_dim..(i + 1) * head_dim], k, kv_dim, off, dst)
                }
                KvRow::Q8_0(_) | KvRow::Q4_0(_) => unreachable!("expanded above"),
            }
            shape.finish_scores(dst);
        }
        pos += len;
    }
    for (i, h) in heads.clone().enumerate() {
        shape.softmax(h, &mut scores[i * n_pos..(i + 1) * n_pos]);
    }
    out.fill(0.0);
    let f16_values = matches!(kv.value(first), KvRow::F16(_));
    if f16_values {
        // ggml multiplies an f16 V by the probabilities rounded to f16.
        round_to_f16_in_place(scores);
    }
    let mut pos = 0;
    while pos < n_pos {
        let (run, len) = kv.value_run(first + pos);
        let len = len.min(n_pos - pos);
        let run = run.expand(row, kv_dim, len);
        for (i, h) in heads.clone().enumerate() {
            let off = (h / group) * head_dim;
            let o = &mut out[i * head_dim..(i + 1) * head_dim];
            let p = &scores[i * n_pos + pos..i * n_pos + pos + len];
            match run {
                KvRow::F32(v) => axpy_rows_f32(o, p, v, kv_dim, off),
                KvRow::F16(v) => axpy_rows_f16(o, p, v, kv_dim, off),
                KvRow::Q8_0(_) | KvRow::Q4_0(_) => unreachable!("expanded above"),
            }
        }
        pos += len;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Rows(Vec<Vec<f32>>, Vec<Vec<f32>>);
    impl KvRead for Rows {
        fn key(&self, pos: usize) -> KvRow<'_> {
            KvRow::F32(&self.0[pos])
        }
        fn value(&self, pos: usize) -> KvRow<'_> {
            KvRow::F32(&self.1[pos])
        }
    }

    #[test]
    fn single_position_returns_its_value_for_every_grouped_head() {
        let kv = Rows(vec![vec![1.0, 0.0]], vec![vec![3.0, -2.0]]);
        let shape = AttnShape::new(2, 1, 2, 1.0);
        let mut out = [0.0; 4];
        attend(
            &[0.5, 0.5, 1.0, 1.0],
            &kv,
            0..1,
            shape,
            0..2,
            &mut AttnScratch::default(),
            &mut out,
        );
        assert_eq!(out, [3.0, -2.0, 3.0, -2.0]);
        // One head at a time gives the same numbers.
        let mut second = [0.0; 2];
        let q = [0.5, 0.5, 1.0, 1.0];
        attend(
            &q,
            &kv,
            0..1,
            shape,
            1..2,
            &mut AttnScratch::default(),
            &mut second,
        );
        assert_eq!(second, [3.0, -2.0]);
    }

    #[test]
    fn attends_more_to_matching_key() {
        let kv = Rows(vec![vec![10.0], vec![-10.0]], vec![vec![1.0], vec![-1.0]]);
        let shape = AttnShape::new(1, 1, 1, 1.0);
        let mut out = [0.0];
        attend(
            &[1.0],
            &kv,
            0..2,
            shape,
            0..1,
            &mut AttnScratch::default(),
            &mut out,
        );
        assert!(out[0] > 0.99);
    }

    /// A window over the last positions equals attention over those rows alone: masked
    /// positions contribute nothing, bit for bit.
    #[test]
    fn window_equals_attention_over_the_visible_rows_only() {
        let keys: Vec<Vec<f32>> = (0..7)
            .map(|i| vec![i as f32 * 0.3, 1.0 - i as f32 * 0.1])
            .collect();
        let vals: Vec<Vec<f32>> = (0..7).map(|i| vec![i as f32, -(i as f32) * 0.5]).collect();
        let all = Rows(keys.clone(), vals.clone());
        let tail = Rows(keys[4..].to_vec(), vals[4..].to_vec());
        let shape = AttnShape::new(1, 1, 2, 0.7);
        let q = [0.9f32, -0.4];
        let (mut windowed, mut alone, mut full) = ([0.0; 2], [0.0; 2], [0.0; 2]);
        let mut scratch = AttnScratch::default();
        attend(&q, &all, 4..7, shape, 0..1, &mut scratch, &mut windowed);
        attend(&q, &tail, 0..3, shape, 0..1, &mut scratch, &mut alone);
        attend(&q, &all, 0..7, shape, 0..1, &mut scratch, &mut full);
        assert_eq!(windowed, alone);
        assert_ne!(windowed, full);
    }
}
