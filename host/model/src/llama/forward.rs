//! The forward pass over one batch: tokens of any sequences at any positions, K/V written to and
//! read from a [`KvStore`]. Every op works row by row with a fixed order, so a token's K/V and
//! logits do not depend on what else is in the batch (batch invariance).

use memoria_kernels::ops::{
    AttnScratch, AttnShape, add_in_place, attend, rms_norm, silu_mul_in_place,
};
use memoria_kernels::{
    GgmlType, QuantizedActivations, WeightMatrix, matmul::get_rows, matmul_prequantized,
};
use rayon::prelude::*;

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
    pub(super) x: Vec<f32>, // [n, n_embd] residual stream
    xn: Vec<f32>,           // [n, n_embd] normed input of a block
    q: Vec<f32>,            // [n, n_embd]
    k: Vec<f32>,            // [n, kv_dim]
    v: Vec<f32>,            // [n, kv_dim]
    att: Vec<f32>,          // [n, n_embd]
    proj: Vec<f32>,         // [n, n_embd]
    gate: Vec<f32>,         // [n, n_ff]
    up: Vec<f32>,           // [n, n_ff]
    rope: Vec<(f32, f32)>,  // [n, rope_dims/2]
    ids: Vec<u32>,          // [n]
    picked: Vec<f32>,       // [n_out, n_embd]
    logits: Vec<f32>,       // [n_out, n_vocab]
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
        s.ids.clear();
        s.ids.extend(batch.iter().map(|t| t.token));
        let file = &self.file;
        get_rows(
            &self.weights.token_embd.view(file),
            &s.ids,
            grow(&mut s.x, n * d),
        );

        let shape = AttnShape {
            n_heads: hp.n_head,
            n_kv_heads: hp.n_head_kv,
            head_dim: hd,
            scale: 1.0 / (hd as f32).sqrt(),
        };
        for (li, lw) in self.weights.layers.iter().enumerate() {
            // Attention block.
            let x = &s.x[..n * d];
            let xn = grow(&mut s.xn, n * d);
            for (xr, or) in x.chunks_exact(d).zip(xn.chunks_exact_mut(d)) {
                rms_norm(xr, &lw.attn_norm, hp.rms_eps, or);
            }
            s.act.invalidate();
            let q = grow(&mut s.q, n * d);
            s.act.project(&lw.wq.view(file), &s.xn[..n * d], n, q);
            let k = grow(&mut s.k, n * kvd);
            s.act.project(&lw.wk.view(file), &s.xn[..n * d], n, k);
            let v = grow(&mut s.v, n * kvd);
            s.act.project(&lw.wv.view(file), &s.xn[..n * d], n, v);
            add_bias(&mut s.q[..n * d], lw.bq.as_deref());
            add_bias(&mut s.k[..n * kvd], lw.bk.as_deref());
            add_bias(&mut s.v[..n * kvd], lw.bv.as_deref());
            for (i, t) in batch.iter().enumerate() {
                let cs = &s.rope[i * half..(i + 1) * half];
                self.rope.rotate(&mut s.q[i * d..(i + 1) * d], hd, cs);
                self.rope.rotate(&mut s.k[i * kvd..(i + 1) * kvd], hd, cs);
                kv.write(
                    t.seq,
                    li,
                    t.pos,
                    &s.k[i * kvd..(i + 1) * kvd],
                    &s.v[i * kvd..(i + 1) * kvd],
                );
            }
            let kv_ro: &K = kv;
            let q = &s.q[..n * d];
            let att = grow(&mut s.att, n * d);
            // One task per (token, K/V head group): decode of a single sequence still uses every
            // thread, and a head's result does not depend on how heads are split.
            let group = hp.n_head / hp.n_head_kv;
            att.par_chunks_mut(group * hd).enumerate().for_each_init(
                AttnScratch::default,
                |scratch, (i, out)| {
                    let (token, g) = (i / hp.n_head_kv, i % hp.n_head_kv);
                    let t = &batch[token];
                    let view = kv_ro.view(t.seq, li);
                    let qr = &q[token * d..(token + 1) * d];
                    attend(
                        qr,
                        &view,
                        t.pos + 1,
                        shape,
                        g * group..(g + 1) * group,
                        scratch,
                        out,
                    );
                },
            );
            s.act.invalidate();
            let proj = grow(&mut s.proj, n * d);
            s.act.project(&lw.wo.view(file), &s.att[..n * d], n, proj);
            add_in_place(&mut s.x[..n * d], &s.proj[..n * d]);

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
            silu_mul_in_place(&mut s.gate[..n * ff], &s.up[..n * ff]);
            s.act.invalidate();
            let proj = grow(&mut s.proj, n * d);
            s.act
                .project(&lw.w_down.view(file), &s.gate[..n * ff], n, proj);
            add_in_place(&mut s.x[..n * d], &s.proj[..n * d]);
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

/// Adds a per-column bias to every row of `x` (`[n, bias.len()]`).
fn add_bias(x: &mut [f32], bias: Option<&[f32]>) {
    if let Some(b) = bias {
        for row in x.chunks_exact_mut(b.len()) {
            add_in_place(row, b);
        }
    }
}
