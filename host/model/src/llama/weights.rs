//! Tensor descriptors of a loaded model: every weight is checked once at load (name, shape,
//! type, byte length) and then used in place from the GGUF mapping; only the small 1-D norm,
//! bias, sink and RoPE-factor vectors are copied out as f32, and matrices the kernels read
//! interleaved ([`memoria_kernels::matmul::Interleaved`], on AVX-512 VNNI CPUs) are copied once
//! into that layout, experts included. Which tensors an architecture must have follows
//! llama.cpp's `load_arch_tensors`.

mod tensors;

pub use tensors::MatDesc;

use super::ModelError;
use super::arch::Arch;
use super::hparams::{HParams, Moe};
use crate::gguf::GgufFile;
use tensors::{experts, find, interleave, mat, opt_mat, opt_vector, table, vector};

/// The Q, K and V projections.
#[derive(Clone, Debug)]
pub enum QkvWeights {
    Split {
        wq: MatDesc,
        wk: MatDesc,
        wv: MatDesc,
    },
    /// One `attn_qkv` matrix whose rows are Q's, then K's, then V's (Phi-3).
    Fused(MatDesc),
}

/// The gate and up projections of a dense FFN.
#[derive(Clone, Debug)]
pub enum GateUp {
    Split {
        gate: MatDesc,
        up: MatDesc,
    },
    /// One `ffn_up` matrix of `2 * n_ff` rows: the gate's, then the up projection's (Phi-3).
    Fused(MatDesc),
}

/// A dense gated FFN.
#[derive(Clone, Debug)]
pub struct DenseFfn {
    pub gate_up: GateUp,
    pub down: MatDesc,
    pub b_gate: Option<Vec<f32>>,
    pub b_up: Option<Vec<f32>>,
    pub b_down: Option<Vec<f32>>,
}

/// A mixture of experts: the router and each expert's gate, up and down matrices.
#[derive(Clone, Debug)]
pub struct MoeWeights {
    /// `ffn_gate_inp`: `[n_expert, n_embd]`.
    pub router: MatDesc,
    pub router_bias: Option<Vec<f32>>,
    pub gate: Vec<MatDesc>,
    pub up: Vec<MatDesc>,
    pub down: Vec<MatDesc>,
    /// Per-expert biases, `[n_expert][n_ff]` (gate, up) and `[n_expert][n_embd]` (down).
    pub b_gate: Option<Vec<f32>>,
    pub b_up: Option<Vec<f32>>,
    pub b_down: Option<Vec<f32>>,
}

/// The feed-forward part of a block.
#[derive(Clone, Debug)]
pub enum FfnWeights {
    Dense(DenseFfn),
    Moe(MoeWeights),
}

/// The weights of one transformer block.
#[derive(Clone, Debug)]
pub struct LayerWeights {
    /// RMS norm before attention (none for OLMo 2).
    pub attn_norm: Option<Vec<f32>>,
    pub qkv: QkvWeights,
    pub bq: Option<Vec<f32>>,
    pub bk: Option<Vec<f32>>,
    pub bv: Option<Vec<f32>>,
    pub wo: MatDesc,
    pub bo: Option<Vec<f32>>,
    /// RMS norm weights of Q and K, applied before RoPE: `[head_dim]` per head (Qwen3,
    /// Gemma 3) or `[q_dim]` / `[kv_dim]` over the whole projection (OLMo 2).
    pub q_norm: Option<Vec<f32>>,
    pub k_norm: Option<Vec<f32>>,
    /// Per-head attention sinks (gpt-oss), `[n_head]`.
    pub sinks: Option<Vec<f32>>,
    /// RMS norm of the attention output before the residual add (Gemma's, OLMo 2's
    /// `post_attention_norm`).
    pub post_attn_norm: Option<Vec<f32>>,
    /// RMS norm before the FFN (gpt-oss names it `post_attention_norm`; none for OLMo 2).
    pub ffn_norm: Option<Vec<f32>>,
    pub ffn: FfnWeights,
    /// RMS norm of the FFN output before the residual add (`post_ffw_norm`).
    pub post_ffn_norm: Option<Vec<f32>>,
}

/// Per-pair RoPE frequency divisors: Llama 3's `rope_freqs`, or LongRoPE's short and long
/// factors (Phi-3), `[rope_dims / 2]` each.
#[derive(Clone, Debug, Default)]
pub struct RopeFactors {
    pub freqs: Option<Vec<f32>>,
    pub short: Option<Vec<f32>>,
    pub long: Option<Vec<f32>>,
}

/// Every weight of the model.
#[derive(Clone, Debug)]
pub struct ModelWeights {
    pub token_embd: MatDesc,
    pub output_norm: Vec<f32>,
    /// `token_embd` when the output projection is tied to the embedding.
    pub output: MatDesc,
    pub layers: Vec<LayerWeights>,
    pub rope_factors: RopeFactors,
}

impl LayerWeights {
    /// Every matrix of the block, in the order the forward pass reads them.
    fn matrices_mut(&mut self) -> Vec<&mut MatDesc> {
        let mut v: Vec<&mut MatDesc> = match &mut self.qkv {
            QkvWeights::Split { wq, wk, wv } => vec![wq, wk, wv],
            QkvWeights::Fused(w) => vec![w],
        };
        v.push(&mut self.wo);
        match &mut self.ffn {
            FfnWeights::Dense(d) => {
                match &mut d.gate_up {
                    GateUp::Split { gate, up } => v.extend([gate, up]),
                    GateUp::Fused(w) => v.push(w),
                }
                v.push(&mut d.down);
            }
            FfnWeights::Moe(m) => {
                v.push(&mut m.router);
                for ((g, u), d) in m.gate.iter_mut().zip(&mut m.up).zip(&mut m.down) {
                    v.extend([g, u, d]);
                }
            }
        }
        v
    }

    fn matrices(&self) -> Vec<&MatDesc> {
        let mut v: Vec<&MatDesc> = match &self.qkv {
            QkvWeights::Split { wq, wk, wv } => vec![wq, wk, wv],
            QkvWeights::Fused(w) => vec![w],
        };
        v.push(&self.wo);
        match &self.ffn {
            FfnWeights::Dense(d) => {
                match &d.gate_up {
                    GateUp::Split { gate, up } => v.extend([gate, up]),
                    GateUp::Fused(w) => v.push(w),
                }
                v.push(&d.down);
            }
            FfnWeights::Moe(m) => {
                v.push(&m.router);
                v.extend(m.gate.iter().chain(&m.up).chain(&m.down));
            }
        }
        v
    }
}

impl ModelWeights {
    /// Every matrix (a tied output as its own descriptor beside the embedding, each expert
    /// on its own).
    pub fn matrices(&self) -> impl Iterator<Item = &MatDesc> {
        [&self.token_embd, &self.output]
            .into_iter()
            .chain(self.layers.iter().flat_map(LayerWeights::matrices))
    }

    /// Resolves and validates every tensor the architecture needs.
    pub fn load(f: &GgufFile, hp: &HParams) -> Result<ModelWeights, ModelError> {
        let (d, v) = (hp.n_embd, hp.n_vocab);
        let token_embd = mat(f, "token_embd.weight", d, v)?;
        // The embedding's rows are looked up in place; as a tied output it is also a matmul.
        let output = match (f.tensor("output.weight"), hp.arch.requires_output()) {
            (Some(_), _) => mat(f, "output.weight", d, v)?,
            (None, true) => return Err(ModelError::MissingTensor("output.weight".into())),
            (None, false) => token_embd.clone(),
        };
        let layers = (0..hp.n_layer)
            .map(|i| load_layer(f, hp, i))
            .collect::<Result<Vec<_>, _>>()?;
        let half = hp.rope.dims / 2;
        let mut w = ModelWeights {
            token_embd,
            output_norm: vector(f, "output_norm.weight", d)?,
            output,
            layers,
            rope_factors: RopeFactors {
                freqs: opt_vector(f, "rope_freqs.weight", half)?,
                short: opt_vector(f, "rope_factors_short.weight", half)?,
                long: opt_vector(f, "rope_factors_long.weight", half)?,
            },
        };
        // The embedding's rows are looked up in place: only the matmuls are interleaved.
        let mut mats = vec![&mut w.output];
        for l in &mut w.layers {
            mats.extend(l.matrices_mut());
        }
        interleave(mats, f);
        Ok(w)
    }
}

/// One block's tensors (`blk.{i}.*`).
fn load_layer(f: &GgufFile, hp: &HParams, i: usize) -> Result<LayerWeights, ModelError> {
    let arch = hp.arch;
    let (d, qd, kv, hd) = (hp.n_embd, hp.q_dim(), hp.kv_dim(), hp.head_dim);
    let n = |s: &str| format!("blk.{i}.{s}");
    let req = |s: &str, len: usize| vector(f, &n(s), len);
    let opt = |s: &str, len: usize| opt_vector(f, &n(s), len);
    let when = |cond: bool, s: &str, len: usize| cond.then(|| req(s, len)).transpose();

    let (qkv, fused_bias) = match opt_mat(f, &n("attn_qkv.weight"), d, qd + 2 * kv)? {
        Some(w) => (QkvWeights::Fused(w), opt("attn_qkv.bias", qd + 2 * kv)?),
        None => (
            QkvWeights::Split {
                wq: mat(f, &n("attn_q.weight"), d, qd)?,
                wk: mat(f, &n("attn_k.weight"), d, kv)?,
                wv: mat(f, &n("attn_v.weight"), d, kv)?,
            },
            None,
        ),
    };
    let (bq, bk, bv) = match fused_bias {
        Some(b) => (
            Some(b[..qd].to_vec()),
            Some(b[qd..qd + kv].to_vec()),
            Some(b[qd + kv..].to_vec()),
        ),
        None if arch.requires_qkv_bias() => (
            Some(req("attn_q.bias", qd)?),
            Some(req("attn_k.bias", kv)?),
            Some(req("attn_v.bias", kv)?),
        ),
        None => (
            opt("attn_q.bias", qd)?,
            opt("attn_k.bias", kv)?,
            opt("attn_v.bias", kv)?,
        ),
    };
    // Q/K norms: per head, or over the whole projection for OLMo 2.
    let (qn, kn) = if arch == Arch::Olmo2 {
        (qd, kv)
    } else {
        (hd, hd)
    };
    let qk_norm = arch.has_qk_norm();
    let post = arch.has_post_norms();
    let ffn_norm = match arch {
        Arch::Olmo2 => None,
        Arch::GptOss => Some(req("post_attention_norm.weight", d)?),
        _ => Some(req("ffn_norm.weight", d)?),
    };
    let ffn = match &hp.moe {
        Some(m) => FfnWeights::Moe(load_moe(f, hp, m, i)?),
        None => FfnWeights::Dense(load_dense(f, hp, i)?),
    };
    Ok(LayerWeights {
        attn_norm: when(arch.has_pre_norms(), "attn_norm.weight", d)?,
        qkv,
        bq,
        bk,
        bv,
        wo: mat(f, &n("attn_output.weight"), qd, d)?,
        bo: opt("attn_output.bias", d)?,
        q_norm: when(qk_norm, "attn_q_norm.weight", qn)?,
        k_norm: when(qk_norm, "attn_k_norm.weight", kn)?,
        sinks: when(arch == Arch::GptOss, "attn_sinks.weight", hp.n_head)?,
        post_attn_norm: when(post, "post_attention_norm.weight", d)?,
        ffn_norm,
        ffn,
        post_ffn_norm: when(post, "post_ffw_norm.weight", d)?,
    })
}

/// A dense FFN: separate gate and up matrices, or Phi-3's fused `ffn_up` of twice the rows.
fn load_dense(f: &GgufFile, hp: &HParams, i: usize) -> Result<DenseFfn, ModelError> {
    let (d, ff) = (hp.n_embd, hp.n_ff);
    let n = |s: &str| format!("blk.{i}.{s}");
    let up_rows = find(f, &n("ffn_up.weight"))?.dims.get(1).copied();
    let gate_up = if f.tensor(&n("ffn_gate.weight")).is_none() && up_rows == Some(2 * ff as u64) {
        GateUp::Fused(mat(f, &n("ffn_up.weight"), d, 2 * ff)?)
    } else {
        GateUp::Split {
            gate: mat(f, &n("ffn_gate.weight"), d, ff)?,
            up: mat(f, &n("ffn_up.weight"), d, ff)?,
        }
    };
    Ok(DenseFfn {
        gate_up,
        down: mat(f, &n("ffn_down.weight"), ff, d)?,
        b_gate: opt_vector(f, &n("ffn_gate.bias"), ff)?,
        b_up: opt_vector(f, &n("ffn_up.bias"), ff)?,
        b_down: opt_vector(f, &n("ffn_down.bias"), d)?,
    })
}

/// A mixture of experts: router (`ffn_gate_inp`) and 3-D expert tensors (`ffn_*_exps`).
fn load_moe(f: &GgufFile, hp: &HParams, m: &Moe, i: usize) -> Result<MoeWeights, ModelError> {
    let (d, ff, ne) = (hp.n_embd, m.n_ff, m.n_expert);
    let n = |s: &str| format!("blk.{i}.{s}");
    let opt_table = |s: &str, cols: usize| -> Result<Option<Vec<f32>>, ModelError> {
        f.tensor(&n(s))
            .map(|_| table(f, &n(s), cols, ne))
            .transpose()
    };
    Ok(MoeWeights {
        router: mat(f, &n("ffn_gate_inp.weight"), d, ne)?,
        router_bias: opt_vector(f, &n("ffn_gate_inp.bias"), ne)?,
        gate: experts(f, &n("ffn_gate_exps.weight"), d, ff, ne)?,
        up: experts(f, &n("ffn_up_exps.weight"), d, ff, ne)?,
        down: experts(f, &n("ffn_down_exps.weight"), ff, d, ne)?,
        b_gate: opt_table("ffn_gate_exps.bias", ff)?,
        b_up: opt_table("ffn_up_exps.bias", ff)?,
        b_down: opt_table("ffn_down_exps.bias", d)?,
    })
}
