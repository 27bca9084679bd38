//! Tensor descriptors of a loaded model: every weight is checked once at load (name, shape,
//! type, byte length) and then used in place from the GGUF mapping; only the small 1-D norm
//! and bias vectors are copied out as f32, and matrices the kernels read interleaved
//! ([`Interleaved`]: Q4_0, Q8_0, Q5_0, Q4_1 and the K-quants Q4_K, Q5_K, Q6_K on AVX-512 VNNI CPUs) are copied once into that layout.

use std::sync::Arc;

use memoria_kernels::{WeightMatrix, matmul::Interleaved, quant::dequantize_row};

use super::{ModelError, hparams::Arch, hparams::HParams};
use crate::gguf::{GgufFile, TensorInfo};

/// A 2-D weight `[rows, cols]` (GGUF dims `[cols, rows]`) living in the mapping.
#[derive(Clone, Debug)]
pub struct MatDesc {
    pub info: TensorInfo,
    pub rows: usize,
    pub cols: usize,
    /// The interleaved copy matmul reads instead of the file's rows, when the kernels use one.
    pub interleaved: Option<Arc<Interleaved>>,
}

impl MatDesc {
    /// The matrix view over the file's bytes (and the interleaved copy, if any).
    pub fn view<'a>(&'a self, file: &'a GgufFile) -> WeightMatrix<'a> {
        WeightMatrix {
            ty: self.info.ty,
            data: file.tensor_data(&self.info),
            rows: self.rows,
            cols: self.cols,
            interleaved: None,
        }
        .with_interleaved(self.interleaved.as_deref())
    }
}

/// Gives every matrix in `mats` its interleaved copy for matmul, when the kernels use one (all
/// in one huge-page mapping), letting the file's pages of each matrix go once it is copied.
fn interleave(mats: Vec<&mut MatDesc>, file: &GgufFile) {
    let views: Vec<_> = mats.iter().map(|m| m.view(file)).collect();
    let built = Interleaved::build_all(&views, |i| file.release(&mats[i].info));
    drop(views);
    for (m, copy) in mats.into_iter().zip(built) {
        m.interleaved = copy.map(Arc::new);
    }
}

/// The weights of one transformer block.
#[derive(Clone, Debug)]
pub struct LayerWeights {
    pub attn_norm: Vec<f32>,
    pub wq: MatDesc,
    pub wk: MatDesc,
    pub wv: MatDesc,
    pub wo: MatDesc,
    pub bq: Option<Vec<f32>>,
    pub bk: Option<Vec<f32>>,
    pub bv: Option<Vec<f32>>,
    pub ffn_norm: Vec<f32>,
    pub w_gate: MatDesc,
    pub w_up: MatDesc,
    pub w_down: MatDesc,
    /// Per-head RMS norm weights of Q and K (`[head_dim]`), applied before RoPE (Gemma 3).
    pub q_norm: Option<Vec<f32>>,
    pub k_norm: Option<Vec<f32>>,
    /// RMS norm of the attention output before the residual add (Gemma's
    /// `post_attention_norm`).
    pub post_attn_norm: Option<Vec<f32>>,
    /// RMS norm of the FFN output before the residual add (Gemma's `post_ffw_norm`).
    pub post_ffn_norm: Option<Vec<f32>>,
}

/// Every weight of the model.
#[derive(Clone, Debug)]
pub struct ModelWeights {
    pub token_embd: MatDesc,
    pub output_norm: Vec<f32>,
    /// `token_embd` when the output projection is tied to the embedding.
    pub output: MatDesc,
    pub layers: Vec<LayerWeights>,
}

impl ModelWeights {
    /// Every matrix (a tied output as its own descriptor beside the embedding).
    pub fn matrices(&self) -> impl Iterator<Item = &MatDesc> {
        let per_layer = self
            .layers
            .iter()
            .flat_map(|l| [&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down]);
        [&self.token_embd, &self.output]
            .into_iter()
            .chain(per_layer)
    }

    /// Resolves and validates every tensor the architecture needs.
    pub fn load(f: &GgufFile, hp: &HParams) -> Result<ModelWeights, ModelError> {
        let (d, kv, ff, v) = (hp.n_embd, hp.kv_dim(), hp.n_ff, hp.n_vocab);
        let (qd, hd) = (hp.q_dim(), hp.head_dim);
        let gemma = hp.arch == Arch::Gemma3;
        let token_embd = mat(f, "token_embd.weight", d, v)?;
        // The embedding's rows are looked up in place; as a tied output it is also a matmul.
        let output = match f.tensor("output.weight") {
            Some(_) => mat(f, "output.weight", d, v)?,
            None => token_embd.clone(),
        };
        let mut layers = Vec::with_capacity(hp.n_layer);
        for i in 0..hp.n_layer {
            let n = |s: &str| format!("blk.{i}.{s}");
            let bias = |s: &str, len: usize| -> Result<Option<Vec<f32>>, ModelError> {
                match hp.arch {
                    Arch::Qwen2 => vector(f, &n(s), len).map(Some),
                    Arch::Llama | Arch::Gemma3 => match f.tensor(&n(s)) {
                        Some(_) => vector(f, &n(s), len).map(Some),
                        None => Ok(None),
                    },
                }
            };
            // Required by Gemma 3, absent from llama and qwen2.
            let gemma_vec = |s: &str, len: usize| -> Result<Option<Vec<f32>>, ModelError> {
                gemma.then(|| vector(f, &n(s), len)).transpose()
            };
            layers.push(LayerWeights {
                attn_norm: vector(f, &n("attn_norm.weight"), d)?,
                wq: mat(f, &n("attn_q.weight"), d, qd)?,
                wk: mat(f, &n("attn_k.weight"), d, kv)?,
                wv: mat(f, &n("attn_v.weight"), d, kv)?,
                wo: mat(f, &n("attn_output.weight"), qd, d)?,
                bq: bias("attn_q.bias", qd)?,
                bk: bias("attn_k.bias", kv)?,
                bv: bias("attn_v.bias", kv)?,
                ffn_norm: vector(f, &n("ffn_norm.weight"), d)?,
                w_gate: mat(f, &n("ffn_gate.weight"), d, ff)?,
                w_up: mat(f, &n("ffn_up.weight"), d, ff)?,
                w_down: mat(f, &n("ffn_down.weight"), ff, d)?,
                q_norm: gemma_vec("attn_q_norm.weight", hd)?,
                k_norm: gemma_vec("attn_k_norm.weight", hd)?,
                post_attn_norm: gemma_vec("post_attention_norm.weight", d)?,
                post_ffn_norm: gemma_vec("post_ffw_norm.weight", d)?,
            });
        }
        let mut w = ModelWeights {
            token_embd,
            output_norm: vector(f, "output_norm.weight", d)?,
            output,
            layers,
        };
        // The embedding's rows are looked up in place: only the matmuls are interleaved.
        let per_layer = w.layers.iter_mut().flat_map(|l| {
            [
                &mut l.wq,
                &mut l.wk,
                &mut l.wv,
                &mut l.wo,
                &mut l.w_gate,
                &mut l.w_up,
                &mut l.w_down,
            ]
        });
        interleave(std::iter::once(&mut w.output).chain(per_layer).collect(), f);
        Ok(w)
    }
}

fn find<'a>(f: &'a GgufFile, name: &str) -> Result<&'a TensorInfo, ModelError> {
    f.tensor(name)
        .ok_or_else(|| ModelError::MissingTensor(name.to_string()))
}

/// A matrix with GGUF dims `[cols, rows]`.
fn mat(f: &GgufFile, name: &str, cols: usize, rows: usize) -> Result<MatDesc, ModelError> {
    let info = find(f, name)?;
    let want = [cols as u64, rows as u64];
    if info.dims.as_slice() != want {
        return Err(ModelError::BadTensor {
            name: name.into(),
            why: format!("dims {:?}, expected {want:?}", info.dims),
        });
    }
    if info.ty.is_activation_only() {
        return Err(ModelError::BadTensor {
            name: name.into(),
            why: format!("{} is not a weight type", info.ty),
        });
    }
    let desc = MatDesc {
        info: info.clone(),
        rows,
        cols,
        interleaved: None,
    };
    WeightMatrix::new(info.ty, f.tensor_data(info), rows, cols).map_err(|e| {
        ModelError::BadTensor {
            name: name.into(),
            why: e.to_string(),
        }
    })?;
    Ok(desc)
}

/// A 1-D tensor of `len` elements, dequantized to f32.
fn vector(f: &GgufFile, name: &str, len: usize) -> Result<Vec<f32>, ModelError> {
    let info = find(f, name)?;
    if info.dims.as_slice() != [len as u64] {
        return Err(ModelError::BadTensor {
            name: name.into(),
            why: format!("dims {:?}, expected [{len}]", info.dims),
        });
    }
    let mut out = vec![0.0f32; len];
    dequantize_row(info.ty, f.tensor_data(info), &mut out).map_err(|e| ModelError::BadTensor {
        name: name.into(),
        why: e.to_string(),
    })?;
    Ok(out)
}
