//! The forward pass over one batch: tokens of any sequences at any positions, K/V written to and
//! read from a [`KvStore`]. Every op works row by row with a fixed order, so a token's K/V and
//! logits do not depend on what else is in the batch (batch invariance).
//!
//! One block structure serves every architecture, in the order of llama.cpp's graphs
//! (`src/models/*.cpp`): optional pre-norm (none for OLMo 2), Q/K/V (fused for Phi-3) with
//! optional biases, Q/K RMS norms (per head, or over the projection for OLMo 2), RoPE (local or
//! global tables, none on SmolLM3's NoPE layers), Q pre-scaled where llama.cpp scales it
//! (Gemma, Phi-3), attention with soft-capping and sinks, optional post-norm and residual
//! scale before each residual add, then a dense or mixture-of-experts FFN ([`super::ffn`]).
//! Sliding-window layers keep every position's K/V in the cache and mask the ones outside the
//! window (they are left out of the softmax, which gives exactly ggml's `-inf` mask); nothing is
//! evicted early, so a cached prefix, a fork or a tier round trip sees the same rows as a fresh
//! run.

use memoria_kernels::ops::{AttnShape, add_in_place, rms_norm, scale_in_place, softcap_in_place};
use memoria_kernels::{
    GgmlType, QuantizedActivations, WeightMatrix, matmul::get_rows, matmul_prequantized,
};

use super::attention::attention;
use super::ffn::FfnScratch;
use super::weights::{LayerWeights, QkvWeights};
use super::{KvStore, Model, ModelError};

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
pub(super) struct Activations {
    q: QuantizedActivations,
    ty: Option<GgmlType>,
}

impl Activations {
    /// Room for `n` rows of `cols` (see [`QuantizedActivations::reserve`]).
    pub(super) fn reserve(&mut self, n: usize, cols: usize) {
        self.q.reserve(n, cols);
    }

    /// Where the quantized rows live and their capacity.
    #[cfg(test)]
    pub(super) fn footprint(&self) -> (usize, usize) {
        self.q.footprint()
    }

    pub(super) fn invalidate(&mut self) {
        self.ty = None;
    }

    /// `out[n, rows] = x[n, cols] · wᵀ`, quantizing `x` only when the dot type changes.
    pub(super) fn project(&mut self, w: &WeightMatrix, x: &[f32], n: usize, out: &mut [f32]) {
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
    qkv: Vec<f32>,               // [n, q_dim + 2 kv_dim] fused projection
    q: Vec<f32>,                 // [n, q_dim]
    k: Vec<f32>,                 // [n, kv_dim]
    v: Vec<f32>,                 // [n, kv_dim]
    att: Vec<f32>,               // [n, q_dim]
    proj: Vec<f32>,              // [n, n_embd]
    head: Vec<f32>,              // [q_dim] one row before its QK-norm
    rope: Vec<(f32, f32)>,       // [n, rope_dims/2]
    rope_local: Vec<(f32, f32)>, // [n, rope_dims/2] sliding-window layers' angles
    ids: Vec<u32>,               // [n]
    picked: Vec<f32>,            // [n_out, n_embd]
    logits: Vec<f32>,            // [n_out, n_vocab]
    pub(super) ffn: FfnScratch,
    act: Activations,
}

impl Scratch {
    /// Buffers with room for a pass of up to `rows` tokens of `model`, every one with logits,
    /// so such passes never reallocate: a step's row count and its logits rows (a decode
    /// step's drafts) may reach a new peak at any time. Address space only; pages are touched
    /// when a pass writes them. Room the allocator refuses (a huge `rows` × vocabulary) is
    /// left to grow on demand: never an abort. Each mixture-of-experts expert's own buffers still grow to
    /// the most tokens routed to it.
    pub fn for_rows(model: &Model, rows: usize) -> Scratch {
        let hp = &model.hparams;
        let (d, qd, kvd) = (hp.n_embd, hp.q_dim(), hp.kv_dim());
        let half = hp.rope.dims / 2;
        let mut s = Scratch::default();
        let n = |width: usize| rows.saturating_mul(width);
        room(&mut s.x, n(d));
        room(&mut s.xn, n(d));
        room(&mut s.qkv, n(qd + 2 * kvd));
        room(&mut s.q, n(qd));
        room(&mut s.k, n(kvd));
        room(&mut s.v, n(kvd));
        room(&mut s.att, n(qd));
        room(&mut s.proj, n(d));
        room(&mut s.head, qd);
        room(&mut s.rope, n(half));
        if model.rope_local.is_some() {
            room(&mut s.rope_local, n(half));
        }
        room(&mut s.ids, rows);
        room(&mut s.picked, n(d));
        room(&mut s.logits, n(hp.n_vocab));
        // The block inputs, the attention output and (dense FFN) the activated gate.
        s.act.reserve(rows, d.max(qd).max(hp.n_ff));
        s.ffn.reserve(hp, rows);
        s
    }

    /// Where each buffer lives and its capacity (a reallocation changes one of them).
    #[cfg(test)]
    pub(super) fn footprint(&self) -> Vec<(usize, usize)> {
        let mut all = vec![
            at(&self.x),
            at(&self.xn),
            at(&self.qkv),
            at(&self.q),
            at(&self.k),
            at(&self.v),
            at(&self.att),
            at(&self.proj),
            at(&self.head),
            at(&self.rope),
            at(&self.rope_local),
            at(&self.ids),
            at(&self.picked),
            at(&self.logits),
            self.act.footprint(),
        ];
        self.ffn.footprint(&mut all);
        all
    }

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

/// Where `v`'s buffer lives and its capacity (a reallocation changes one of them).
#[cfg(test)]
pub(super) fn at<T>(v: &Vec<T>) -> (usize, usize) {
    (v.as_ptr() as usize, v.capacity())
}

/// Makes `buf`'s capacity at least `len` without touching its contents, where the allocator
/// grants the address space (else the buffer grows on demand, as without the reservation).
pub(super) fn room<T>(buf: &mut Vec<T>, len: usize) {
    let _ = buf.try_reserve(len.saturating_sub(buf.len()));
}

pub(super) fn grow<T: Clone + Default>(buf: &mut Vec<T>, len: usize) -> &mut [T] {
    if buf.len() < len {
        buf.resize(len, T::default());
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
        let d = hp.n_embd;
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
        let half = hp.rope.dims / 2;
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
        get_rows(
            &self.weights.token_embd.view(&self.file),
            &s.ids,
            grow(&mut s.x, n * d),
        );
        if let Some(scale) = hp.embd_scale {
            scale_in_place(&mut s.x[..n * d], scale);
        }
        for (li, lw) in self.weights.layers.iter().enumerate() {
            self.attention_block(li, lw, batch, kv, s);
            self.ffn_block(lw, n, s);
        }
        self.output(batch, n_out, s);
        Ok(&s.logits[..n_out * hp.n_vocab])
    }

    /// The attention half of block `li`: `x += post(attn(pre(x)))`, K/V written for every token.
    fn attention_block<K: KvStore>(
        &self,
        li: usize,
        lw: &LayerWeights,
        batch: &[BatchToken],
        kv: &mut K,
        s: &mut Scratch,
    ) {
        let hp = &self.hparams;
        let file = &self.file;
        let n = batch.len();
        let (d, kvd, hd, qd) = (hp.n_embd, hp.kv_dim(), hp.head_dim, hp.q_dim());
        let window = hp.layer_window(li);
        let (rope, angles) = match (&self.rope_local, window) {
            (Some(local), Some(_)) => (local, &s.rope_local),
            _ => (&self.rope, &s.rope),
        };
        let half = hp.rope.dims / 2;
        let input = pre_norm(
            &s.x[..n * d],
            lw.attn_norm.as_deref(),
            hp.rms_eps,
            &mut s.xn,
        );
        s.act.invalidate();
        match &lw.qkv {
            QkvWeights::Split { wq, wk, wv } => {
                s.act
                    .project(&wq.view(file), input, n, grow(&mut s.q, n * qd));
                s.act
                    .project(&wk.view(file), input, n, grow(&mut s.k, n * kvd));
                s.act
                    .project(&wv.view(file), input, n, grow(&mut s.v, n * kvd));
            }
            QkvWeights::Fused(w) => {
                let width = qd + 2 * kvd;
                let qkv = grow(&mut s.qkv, n * width);
                s.act.project(&w.view(file), input, n, qkv);
                let (q, k, v) = (
                    grow(&mut s.q, n * qd),
                    grow(&mut s.k, n * kvd),
                    grow(&mut s.v, n * kvd),
                );
                for (i, row) in s.qkv[..n * width].chunks_exact(width).enumerate() {
                    q[i * qd..(i + 1) * qd].copy_from_slice(&row[..qd]);
                    k[i * kvd..(i + 1) * kvd].copy_from_slice(&row[qd..qd + kvd]);
                    v[i * kvd..(i + 1) * kvd].copy_from_slice(&row[qd + kvd..]);
                }
            }
        }
        add_bias(&mut s.q[..n * qd], lw.bq.as_deref());
        add_bias(&mut s.k[..n * kvd], lw.bk.as_deref());
        add_bias(&mut s.v[..n * kvd], lw.bv.as_deref());
        let head = grow(&mut s.head, qd);
        norm_chunks(&mut s.q[..n * qd], lw.q_norm.as_deref(), hp.rms_eps, head);
        norm_chunks(&mut s.k[..n * kvd], lw.k_norm.as_deref(), hp.rms_eps, head);
        let use_rope = hp.layer_has_rope(li);
        let prescale_q = hp.arch.prescales_q();
        for (i, t) in batch.iter().enumerate() {
            let cs = &angles[i * half..(i + 1) * half];
            let qr = &mut s.q[i * qd..(i + 1) * qd];
            if use_rope {
                rope.rotate(qr, hd, cs);
                rope.rotate(&mut s.k[i * kvd..(i + 1) * kvd], hd, cs);
            }
            if prescale_q {
                scale_in_place(qr, hp.attn_scale);
            }
            kv.write(
                t.seq,
                li,
                t.pos,
                &s.k[i * kvd..(i + 1) * kvd],
                &s.v[i * kvd..(i + 1) * kvd],
            );
        }
        // llama.cpp scales Q before the attention for Gemma and Phi-3 (`ggml_scale(Qcur,
        // ...)`, before Q's f16 rounding) and the scores inside the softmax otherwise; both
        // orders are kept.
        let shape = AttnShape {
            softcap: hp.attn_softcap.unwrap_or(0.0),
            sinks: lw.sinks.as_deref(),
            ..AttnShape::new(
                hp.n_head,
                hp.n_head_kv,
                hd,
                if prescale_q { 1.0 } else { hp.attn_scale },
            )
        };
        let kv_ro: &K = kv;
        let att = grow(&mut s.att, n * qd);
        let first_pos = |t: &BatchToken| window.map_or(0, |w| (t.pos + 1).saturating_sub(w));
        attention(batch, kv_ro, li, &s.q[..n * qd], qd, shape, first_pos, att);
        s.act.invalidate();
        let proj = grow(&mut s.proj, n * d);
        s.act.project(&lw.wo.view(file), &s.att[..n * qd], n, proj);
        add_bias(proj, lw.bo.as_deref());
        self.residual_add(n, lw.post_attn_norm.as_deref(), s);
    }

    /// The FFN half of a block: `x += post(ffn(pre(x)))`.
    fn ffn_block(&self, lw: &LayerWeights, n: usize, s: &mut Scratch) {
        let hp = &self.hparams;
        let d = hp.n_embd;
        let input = pre_norm(&s.x[..n * d], lw.ffn_norm.as_deref(), hp.rms_eps, &mut s.xn);
        let proj = grow(&mut s.proj, n * d);
        s.act.invalidate();
        self.ffn(&lw.ffn, input, n, &mut s.ffn, &mut s.act, proj);
        self.residual_add(n, lw.post_ffn_norm.as_deref(), s);
    }

    /// `x += y` where `y` is `s.proj`, RMS-normed first when there is a post-norm weight and
    /// scaled by the residual scale (Granite) when there is one.
    fn residual_add(&self, n: usize, post_norm: Option<&[f32]>, s: &mut Scratch) {
        let hp = &self.hparams;
        let d = hp.n_embd;
        let y = &mut s.proj[..n * d];
        if let Some(w) = post_norm {
            let normed = grow(&mut s.xn, n * d);
            for (yr, or) in y.chunks_exact(d).zip(normed.chunks_exact_mut(d)) {
                rms_norm(yr, w, hp.rms_eps, or);
            }
            y.copy_from_slice(normed);
        }
        if let Some(scale) = hp.residual_scale {
            scale_in_place(y, scale);
        }
        add_in_place(&mut s.x[..n * d], y);
    }

    /// The logits of the tokens marked `logits`: output norm, output projection, then the
    /// final soft-cap (Gemma 2) or logit scale (Granite).
    fn output(&self, batch: &[BatchToken], n_out: usize, s: &mut Scratch) {
        let hp = &self.hparams;
        let d = hp.n_embd;
        let picked = grow(&mut s.picked, n_out * d);
        let rows = batch
            .iter()
            .zip(s.x.chunks_exact(d))
            .filter(|(t, _)| t.logits);
        for (row, (_, xr)) in rows.enumerate() {
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
            &self.weights.output.view(&self.file),
            &s.picked[..n_out * d],
            n_out,
            logits,
        );
        if let Some(cap) = hp.final_softcap {
            softcap_in_place(logits, cap);
        }
        if let Some(scale) = hp.logit_scale {
            scale_in_place(logits, 1.0 / scale);
        }
    }
}

/// `x` RMS-normed row by row into `buf` when there is a norm weight, else `x` itself (OLMo 2's
/// blocks read the residual stream directly).
fn pre_norm<'a>(
    x: &'a [f32],
    weight: Option<&[f32]>,
    eps: f32,
    buf: &'a mut Vec<f32>,
) -> &'a [f32] {
    match weight {
        None => x,
        Some(w) => {
            let out = grow(buf, x.len());
            for (xr, or) in x.chunks_exact(w.len()).zip(out.chunks_exact_mut(w.len())) {
                rms_norm(xr, w, eps, or);
            }
            out
        }
    }
}

/// RMS-normalises every `weight.len()` chunk of `x` with `weight`, in place: each head when the
/// weight is `[head_dim]`, each token's whole projection when it is as wide as the row; nothing
/// without a weight. `buf` holds one chunk.
fn norm_chunks(x: &mut [f32], weight: Option<&[f32]>, eps: f32, buf: &mut [f32]) {
    if let Some(w) = weight {
        let tmp = &mut buf[..w.len()];
        for h in x.chunks_exact_mut(w.len()) {
            tmp.copy_from_slice(h);
            rms_norm(tmp, w, eps, h);
        }
    }
}

/// Adds a per-column bias to every row of `x` (`[n, bias.len()]`).
pub(super) fn add_bias(x: &mut [f32], bias: Option<&[f32]>) {
    if let Some(b) = bias {
        for row in x.chunks_exact_mut(b.len()) {
            add_in_place(row, b);
        }
    }
}
