//! The forward pass over one batch: tokens of any sequences at any positions, K/V written to and
//! read from a [`KvStore`]. Every op works row by row with a fixed order, so a token's K/V and
//! logits do not depend on what else is in the batch (batch invariance).
//!
//! Gemma 3 follows llama.cpp's `gemma3.cpp` in the same order: embeddings × `sqrt(n_embd)`,
//! Q and K RMS-normed per head then rotated (local or global RoPE base), Q × `attn_scale` before
//! its f16 rounding, post-attention and post-FFN norms before each residual add, GeGLU.
//! Sliding-window layers keep every position's K/V in the cache and mask the ones outside the
//! window (they are left out of the softmax, which gives exactly ggml's `-inf` mask); nothing is
//! evicted early, so a cached prefix, a fork or a tier round trip sees the same rows as a fresh
//! run.

use std::cell::RefCell;
use std::ops::Range;

use memoria_kernels::ops::{
    AttnShape, SplitScratch, TILE_ROWS, TileScratch, add_in_place, attend_split, attend_tile,
    gelu_mul_in_place, rms_norm, scale_in_place, silu_mul_in_place,
};
use memoria_kernels::threads;
use memoria_kernels::{
    GgmlType, QuantizedActivations, WeightMatrix, matmul::get_rows, matmul_prequantized,
};

use super::{Arch, FfnAct, KvStore, Model, ModelError};

/// One token of a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchToken {
    pub token: u32,
    /// Absolute position in its sequence; positions `0..pos` must already be in the cache or
    /// earlier in this batch.
    pub pos: usize,
    /// Sequence index in the [`KvStore`].
    pub seq: usize,
    /// Whether to compute logits for this token.
    pub logits: bool,
}

/// Activations quantized for one weight type's dot product, reused across projections that share
/// an input (q/k/v, gate/up).
#[derive(Default)]
struct Activations {
    q: QuantizedActivations,
    ty: Option<GgmlType>,
}

impl Activations {
    fn invalidate(&mut self) {
        self.ty = None;
    }

    /// `out[n, rows] = x[n, cols] · wᵀ`, quantizing `x` only when the dot type changes.
    fn project(&mut self, w: &WeightMatrix, x: &[f32], n: usize, out: &mut [f32]) {
        let ty = w.ty.vec_dot_type();
        if self.ty != Some(ty) {
            self.q.quantize(ty, x, n, w.cols);
            self.ty = Some(ty);
        }
        matmul_prequantized(w, &self.q, out);
    }
}

/// Per-step buffers, grown on demand and reused (no allocation once warm).
#[derive(Default)]
pub struct Scratch {
    pub(super) x: Vec<f32>,      // [n, n_embd] residual stream
    xn: Vec<f32>,                // [n, n_embd] normed input of a block
    q: Vec<f32>,                 // [n, q_dim]
    k: Vec<f32>,                 // [n, kv_dim]
    v: Vec<f32>,                 // [n, kv_dim]
    att: Vec<f32>,               // [n, q_dim]
    proj: Vec<f32>,              // [n, n_embd]
    gate: Vec<f32>,              // [n, n_ff]
    up: Vec<f32>,                // [n, n_ff]
    head: Vec<f32>,              // [head_dim] one head before its QK-norm
    rope: Vec<(f32, f32)>,       // [n, rope_dims/2]
    rope_local: Vec<(f32, f32)>, // [n, rope_dims/2] sliding-window layers' angles
    ids: Vec<u32>,               // [n]
    picked: Vec<f32>,            // [n_out, n_embd]
    logits: Vec<f32>,            // [n_out, n_vocab]
    act: Activations,
}

impl Scratch {
    /// The logits buffer of the last forward pass (its first `n_out * n_vocab` values are the
    /// logits that pass returned).
    pub fn logits(&self) -> &[f32] {
        &self.logits
    }
}

impl std::fmt::Debug for Scratch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scratch")
            .field("tokens", &(self.x.len()))
            .finish()
    }
}

fn grow(buf: &mut Vec<f32>, len: usize) -> &mut [f32] {
    if buf.len() < len {
        buf.resize(len, 0.0);
    }
    &mut buf[..len]
}

impl Model {
    /// Runs one batch. Returns the logits `[n_out, n_vocab]` of the tokens marked `logits`, in
    /// batch order.
    pub fn forward<'s, K: KvStore>(
        &self,
        batch: &[BatchToken],
        kv: &mut K,
        s: &'s mut Scratch,
    ) -> Result<&'s [f32], ModelError> {
        let hp = &self.hparams;
        let n = batch.len();
        let (d, kvd, ff, hd) = (hp.n_embd, hp.kv_dim(), hp.n_ff, hp.head_dim);
        let qd = hp.q_dim();
        for (i, t) in batch.iter().enumerate() {
            if t.token as usize >= hp.n_vocab {
                return Err(ModelError::BadBatch(format!(
                    "token {} at {i} ≥ n_vocab {}",
                    t.token, hp.n_vocab
                )));
            }
            if t.pos >= kv.capacity(t.seq) {
                return Err(ModelError::BadBatch(format!(
                    "position {} of sequence {} ≥ cache capacity {}",
                    t.pos,
                    t.seq,
                    kv.capacity(t.seq)
                )));
            }
        }
        let n_out = batch.iter().filter(|t| t.logits).count();
        if n == 0 {
            s.logits.clear();
            return Ok(&s.logits);
        }
        let half = hp.rope_dims / 2;
        s.rope.resize(n * half, (0.0, 0.0));
        for (t, cs) in batch.iter().zip(s.rope.chunks_exact_mut(half)) {
            self.rope.angles(t.pos, cs);
        }
        if let Some(local) = &self.rope_local {
            s.rope_local.resize(n * half, (0.0, 0.0));
            for (t, cs) in batch.iter().zip(s.rope_local.chunks_exact_mut(half)) {
                local.angles(t.pos, cs);
            }
        }
        s.ids.clear();
        s.ids.extend(batch.iter().map(|t| t.token));
        let file = &self.file;
        get_rows(
            &self.weights.token_embd.view(file),
            &s.ids,
            grow(&mut s.x, n * d),
        );
        if let Some(scale) = hp.embd_scale {
            scale_in_place(&mut s.x[..n * d], scale);
        }

        // llama.cpp scales Q before the attention for Gemma (`ggml_scale(Qcur,
        // f_attention_scale)`, before Q's f16 rounding) and the scores inside the softmax
        // otherwise; both orders are kept.
        let prescale_q = hp.arch == Arch::Gemma3;
        let shape = AttnShape {
            n_heads: hp.n_head,
            n_kv_heads: hp.n_head_kv,
            head_dim: hd,
            scale: if prescale_q { 1.0 } else { hp.attn_scale },
        };
        for (li, lw) in self.weights.layers.iter().enumerate() {
            let window = hp.layer_window(li);
            let (rope, angles) = match (&self.rope_local, window) {
                (Some(local), Some(_)) => (local, &s.rope_local),
                _ => (&self.rope, &s.rope),
            };
            // Attention block.
            let x = &s.x[..n * d];
            let xn = grow(&mut s.xn, n * d);
            for (xr, or) in x.chunks_exact(d).zip(xn.chunks_exact_mut(d)) {
                rms_norm(xr, &lw.attn_norm, hp.rms_eps, or);
            }
            s.act.invalidate();
            let q = grow(&mut s.q, n * qd);
            s.act.project(&lw.wq.view(file), &s.xn[..n * d], n, q);
            let k = grow(&mut s.k, n * kvd);
            s.act.project(&lw.wk.view(file), &s.xn[..n * d], n, k);
            let v = grow(&mut s.v, n * kvd);
            s.act.project(&lw.wv.view(file), &s.xn[..n * d], n, v);
            add_bias(&mut s.q[..n * qd], lw.bq.as_deref());
            add_bias(&mut s.k[..n * kvd], lw.bk.as_deref());
            add_bias(&mut s.v[..n * kvd], lw.bv.as_deref());
            let head = grow(&mut s.head, hd);
            norm_heads(&mut s.q[..n * qd], lw.q_norm.as_deref(), hp.rms_eps, head);
            norm_heads(&mut s.k[..n * kvd], lw.k_norm.as_deref(), hp.rms_eps, head);
            for (i, t) in batch.iter().enumerate() {
                let cs = &angles[i * half..(i + 1) * half];
                let qr = &mut s.q[i * qd..(i + 1) * qd];
                rope.rotate(qr, hd, cs);
                if prescale_q {
                    scale_in_place(qr, hp.attn_scale);
                }
                rope.rotate(&mut s.k[i * kvd..(i + 1) * kvd], hd, cs);
                kv.write(
                    t.seq,
                    li,
                    t.pos,
                    &s.k[i * kvd..(i + 1) * kvd],
                    &s.v[i * kvd..(i + 1) * kvd],
                );
            }
            let kv_ro: &K = kv;
            let q = &s.q[..n * qd];
            let att = grow(&mut s.att, n * qd);
            let first_pos = |t: &BatchToken| window.map_or(0, |w| (t.pos + 1).saturating_sub(w));
            attention(batch, kv_ro, li, q, qd, shape, first_pos, att);
            s.act.invalidate();
            let proj = grow(&mut s.proj, n * d);
            s.act.project(&lw.wo.view(file), &s.att[..n * qd], n, proj);
            residual_add(
                &mut s.x[..n * d],
                &s.proj[..n * d],
                lw.post_attn_norm.as_deref(),
                hp.rms_eps,
                &mut s.xn,
            );

            // Feed-forward block.
            let xn = grow(&mut s.xn, n * d);
            for (xr, or) in s.x[..n * d].chunks_exact(d).zip(xn.chunks_exact_mut(d)) {
                rms_norm(xr, &lw.ffn_norm, hp.rms_eps, or);
            }
            s.act.invalidate();
            let gate = grow(&mut s.gate, n * ff);
            s.act
                .project(&lw.w_gate.view(file), &s.xn[..n * d], n, gate);
            let up = grow(&mut s.up, n * ff);
            s.act.project(&lw.w_up.view(file), &s.xn[..n * d], n, up);
            match hp.ffn_act {
                FfnAct::Silu => silu_mul_in_place(&mut s.gate[..n * ff], &s.up[..n * ff]),
                FfnAct::GeluTanh => gelu_mul_in_place(&mut s.gate[..n * ff], &s.up[..n * ff]),
            }
            s.act.invalidate();
            let proj = grow(&mut s.proj, n * d);
            s.act
                .project(&lw.w_down.view(file), &s.gate[..n * ff], n, proj);
            residual_add(
                &mut s.x[..n * d],
                &s.proj[..n * d],
                lw.post_ffn_norm.as_deref(),
                hp.rms_eps,
                &mut s.xn,
            );
        }

        let picked = grow(&mut s.picked, n_out * d);
        for (row, (t, xr)) in batch
            .iter()
            .zip(s.x.chunks_exact(d))
            .filter(|(t, _)| t.logits)
            .enumerate()
        {
            let _ = t;
            rms_norm(
                xr,
                &self.weights.output_norm,
                hp.rms_eps,
                &mut picked[row * d..(row + 1) * d],
            );
        }
        let logits = grow(&mut s.logits, n_out * hp.n_vocab);
        s.act.invalidate();
        s.act.project(
            &self.weights.output.view(file),
            &s.picked[..n_out * d],
            n_out,
            logits,
        );
        Ok(&s.logits[..n_out * hp.n_vocab])
    }
}

/// Contexts from this many positions on are split across threads when the batch alone gives
/// too few tasks (the split never changes a bit, see `attend_split`).
const SPLIT_MIN_POS: usize = 256;

thread_local! {
    static ATTN: RefCell<TileScratch> = RefCell::default();
    static ATTN_SPLIT: RefCell<SplitScratch> = RefCell::default();
    /// The batch's attention tiles, kept between steps (no allocation once warmed up).
    static TILES: RefCell<Vec<Range<usize>>> = const { RefCell::new(Vec::new()) };
}

/// Attention of every token of the batch into `att` (`[n, q_dim]`), on the worker pool: one task
/// per (tile, K/V head group), a tile being up to [`TILE_ROWS`] query rows of consecutive tokens
/// of one sequence times the group's heads ([`attend_tile`]: each K/V row converted once per
/// tile), heaviest tiles first. So decode of a single sequence still uses every thread, and a
/// result never depends on the tiling (`attend_tile` gives `attend`'s bits). When that gives
/// fewer than two tasks per thread and a context is long, each token is instead split over
/// positions and columns ([`attend_split`], same bits).
#[allow(clippy::too_many_arguments)]
fn attention<K: KvStore>(
    batch: &[BatchToken],
    kv: &K,
    layer: usize,
    q: &[f32],
    qd: usize,
    shape: AttnShape,
    first_pos: impl Fn(&BatchToken) -> usize + Sync,
    att: &mut [f32],
) {
    let (n_kv, hd) = (shape.n_kv_heads, shape.head_dim);
    let group = shape.n_heads / n_kv;
    let mut tiles = TILES.with(RefCell::take);
    cut_tiles(batch, (TILE_ROWS / group).max(1), &mut tiles);
    let tasks = tiles.len() * n_kv;
    let threads = threads::current_threads();
    let long = batch
        .iter()
        .any(|t| t.pos + 1 - first_pos(t) >= SPLIT_MIN_POS);
    if threads > 1 && tasks < 2 * threads && long {
        let mut sc = ATTN_SPLIT.with(RefCell::take);
        for ((t, qr), out) in batch
            .iter()
            .zip(q.chunks_exact(qd))
            .zip(att.chunks_exact_mut(qd))
        {
            let view = kv.view(t.seq, layer);
            let heads = 0..shape.n_heads;
            attend_split(
                qr,
                &view,
                first_pos(t)..t.pos + 1,
                shape,
                heads,
                &mut sc,
                out,
            );
        }
        ATTN_SPLIT.with(|c| *c.borrow_mut() = sc);
        TILES.with(|c| *c.borrow_mut() = tiles);
        return;
    }
    let width = group * hd;
    let shared = threads::SharedMut::new(att);
    threads::for_each(tasks, |i| {
        let (tile, g) = (&tiles[tiles.len() - 1 - i / n_kv], i % n_kv);
        let lead = &batch[tile.start];
        let view = kv.view(lead.seq, layer);
        let mut keys: [Range<usize>; TILE_ROWS] = std::array::from_fn(|_| 0..0);
        for (k, t) in keys.iter_mut().zip(&batch[tile.clone()]) {
            *k = first_pos(t)..t.pos + 1;
        }
        // Taken out while in use, so a nested call would get a fresh one, not a borrow panic.
        let mut sc = ATTN.with(RefCell::take);
        let mut out = sc.take_out(tile.len() * width);
        attend_tile(
            &q[tile.start * qd..tile.end * qd],
            &keys[..tile.len()],
            &view,
            shape,
            g * group..(g + 1) * group,
            &mut sc,
            &mut out,
        );
        for (t, o) in tile.clone().zip(out.chunks_exact(width)) {
            // SAFETY: task (tile, g) alone writes these columns of these tokens' rows.
            unsafe { shared.slice(t * qd + g * width, width) }.copy_from_slice(o);
        }
        sc.put_out(out);
        ATTN.with(|c| *c.borrow_mut() = sc);
    });
    TILES.with(|c| *c.borrow_mut() = tiles);
}

/// Cuts `batch` into tiles of up to `max_tokens` consecutive entries of one sequence at
/// consecutive positions.
fn cut_tiles(batch: &[BatchToken], max_tokens: usize, tiles: &mut Vec<Range<usize>>) {
    tiles.clear();
    let mut start = 0;
    for i in 1..=batch.len() {
        let cut = i == batch.len()
            || i - start == max_tokens
            || batch[i].seq != batch[i - 1].seq
            || batch[i].pos != batch[i - 1].pos + 1;
        if cut {
            tiles.push(start..i);
            start = i;
        }
    }
}

/// RMS-normalises every head (`[.., head_dim]` chunks of `x`) with `weight` (`[head_dim]`), in
/// place; nothing without a weight. `head` is a `[head_dim]` buffer.
fn norm_heads(x: &mut [f32], weight: Option<&[f32]>, eps: f32, head: &mut [f32]) {
    if let Some(w) = weight {
        for h in x.chunks_exact_mut(w.len()) {
            head.copy_from_slice(h);
            rms_norm(head, w, eps, h);
        }
    }
}

/// `x += y`, or `x += rms_norm(y) · weight` row by row when there is a post-norm weight
/// (`[n_embd]`); `buf` holds the normed rows.
fn residual_add(x: &mut [f32], y: &[f32], post_norm: Option<&[f32]>, eps: f32, buf: &mut Vec<f32>) {
    match post_norm {
        None => add_in_place(x, y),
        Some(w) => {
            let normed = grow(buf, y.len());
            for (yr, or) in y
                .chunks_exact(w.len())
                .zip(normed.chunks_exact_mut(w.len()))
            {
                rms_norm(yr, w, eps, or);
            }
            add_in_place(x, normed);
        }
    }
}

/// Adds a per-column bias to every row of `x` (`[n, bias.len()]`).
fn add_bias(x: &mut [f32], bias: Option<&[f32]>) {
    if let Some(b) = bias {
        for row in x.chunks_exact_mut(b.len()) {
            add_in_place(row, b);
        }
    }
}

#[cfg(test)]
mod tests {
    use memoria_kernels::GgmlType;
    use memoria_kernels::threads::Pool;

    use super::{BatchToken, Scratch};
    use crate::gguf::GgufFile;
    use crate::llama::{KvDtype, Model};
    use crate::synth::{self, Arch, SynthSpec};

    /// Every position's logits of `tokens` run as a prefill of `prefill` tokens, then one token
    /// at a time, on a pool of `threads`.
    fn run(
        model: &Model,
        tokens: &[u32],
        prefill: usize,
        dtype: KvDtype,
        threads: usize,
    ) -> Vec<u32> {
        let pool = Pool::new(threads);
        let mut kv = model.new_contiguous_kv(dtype, 1, tokens.len());
        let mut s = Scratch::default();
        let mut all = Vec::new();
        let tok = |pos: usize| BatchToken {
            token: tokens[pos],
            pos,
            seq: 0,
            logits: true,
        };
        pool.install(|| {
            let batch: Vec<BatchToken> = (0..prefill).map(tok).collect();
            all.extend_from_slice(model.forward(&batch, &mut kv, &mut s).expect("prefill"));
            for pos in prefill..tokens.len() {
                all.extend_from_slice(model.forward(&[tok(pos)], &mut kv, &mut s).expect("decode"));
            }
        });
        all.iter().map(|v| v.to_bits()).collect()
    }

    /// Decode past `SPLIT_MIN_POS` with a single K/V head (the split attention path) gives the
    /// same bits on 1, 2 and 3 threads, and the same bits as a prefill of the whole sequence
    /// (which runs one attention task per token).
    #[test]
    fn long_context_decode_is_thread_and_chunk_invariant() {
        let spec = SynthSpec {
            kv_heads: 1,
            context: 320,
            ..SynthSpec::tiny(Arch::Llama, GgmlType::Q8_0)
        };
        let bytes = synth::synthesize(&spec).expect("synthesize").to_bytes();
        let model = Model::from_gguf(GgufFile::from_bytes(bytes).expect("parse")).expect("load");
        let tokens: Vec<u32> = (0..300).map(|i| (7 + i * 37) % 512).collect();
        for dtype in [KvDtype::F16, KvDtype::F32] {
            let one = run(&model, &tokens, 260, dtype, 1);
            assert!(one.iter().all(|b| f32::from_bits(*b).is_finite()));
            assert_eq!(
                one,
                run(&model, &tokens, 260, dtype, 2),
                "{dtype:?} 2 threads"
            );
            assert_eq!(
                one,
                run(&model, &tokens, 260, dtype, 3),
                "{dtype:?} 3 threads"
            );
            assert_eq!(
                one,
                run(&model, &tokens, 300, dtype, 2),
                "{dtype:?} whole prefill"
            );
        }
    }
}
