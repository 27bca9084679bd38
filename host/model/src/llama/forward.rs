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

use memoria_kernels::ops::{
    AttnScratch, AttnShape, add_in_place, attend, gelu_mul_in_place, rms_norm, scale_in_place,
    silu_mul_in_place,
};
use memoria_kernels::{
    GgmlType, QuantizedActivations, WeightMatrix, matmul::get_rows, matmul_prequantized,
};
use rayon::prelude::*;

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
            // One task per (token, K/V head group): decode of a single sequence still uses every
            // thread, and a head's result does not depend on how heads are split.
            let group = hp.n_head / hp.n_head_kv;
            att.par_chunks_mut(group * hd).enumerate().for_each_init(
                AttnScratch::default,
                |scratch, (i, out)| {
                    let (token, g) = (i / hp.n_head_kv, i % hp.n_head_kv);
                    let t = &batch[token];
                    let view = kv_ro.view(t.seq, li);
                    let qr = &q[token * qd..(token + 1) * qd];
                    let first = window.map_or(0, |w| (t.pos + 1).saturating_sub(w));
                    attend(
                        qr,
                        &view,
                        first..t.pos + 1,
                        shape,
                        g * group..(g + 1) * group,
                        scratch,
                        out,
                    );
                },
            );
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
