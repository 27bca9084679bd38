//! The tensors of a synthetic model: every name and shape llama.cpp's `load_arch_tensors` asks
//! for, per architecture, in the order the converters write them, with how each one's values
//! are drawn and its type.

use memoria_kernels::GgmlType;

use super::arch::{Arch, QkNorm};
use super::mix::{ModelFacts, QuantTensor, allows_quantization, mxfp4_moe_types, q4_k_m_types};
use super::{SynthSpec, WeightTypes};

/// How a tensor's values are drawn.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Init {
    /// Uniform in ±sqrt(3)*0.02 (std 0.02).
    Weight,
    /// 1 ± 0.05.
    Norm,
    /// Uniform in ±0.02.
    Bias,
    /// `last^(c / (cols - 1))` at column `c`: from 1 up to `last` (LongRoPE factors).
    Ramp { last: f32 },
}

/// One tensor of the file.
#[derive(Clone, Debug)]
pub(crate) struct Planned {
    pub name: String,
    /// ggml `ne` order: `dims[0]` is the row length.
    pub dims: Vec<u64>,
    pub init: Init,
}

/// LongRoPE factors of the synthetic Phi-3.5 (monotone ramps of the trained factors' range,
/// not their values).
const ROPE_SHORT_LAST: f32 = 2.5;
const ROPE_LONG_LAST: f32 = 40.0;

/// Every tensor of `spec` with a vocabulary of `vocab` tokens.
pub(crate) fn plan(spec: &SynthSpec, vocab: usize) -> Vec<Planned> {
    let arch = spec.arch;
    let (d, v) = (spec.dim as u64, vocab as u64);
    let (qd, kv, hd) = (
        spec.q_dim() as u64,
        spec.kv_dim() as u64,
        spec.head_dim() as u64,
    );
    let mut out = Vec::new();
    let mut add = |name: String, dims: &[u64], init: Init| {
        out.push(Planned {
            name,
            dims: dims.to_vec(),
            init,
        });
    };
    add("token_embd.weight".into(), &[d, v], Init::Weight);
    if arch == Arch::Phi3 {
        let half = hd / 2;
        add(
            "rope_factors_long.weight".into(),
            &[half],
            Init::Ramp {
                last: ROPE_LONG_LAST,
            },
        );
        add(
            "rope_factors_short.weight".into(),
            &[half],
            Init::Ramp {
                last: ROPE_SHORT_LAST,
            },
        );
    }
    add("output_norm.weight".into(), &[d], Init::Norm);
    if !spec.tied_embeddings {
        add("output.weight".into(), &[d, v], Init::Weight);
    }
    for i in 0..spec.layers {
        let n = |t: &str| format!("blk.{i}.{t}");
        if arch != Arch::Olmo2 {
            add(n("attn_norm.weight"), &[d], Init::Norm);
        }
        if arch == Arch::Phi3 {
            add(n("attn_qkv.weight"), &[d, qd + 2 * kv], Init::Weight);
        } else {
            add(n("attn_q.weight"), &[d, qd], Init::Weight);
            add(n("attn_k.weight"), &[d, kv], Init::Weight);
            add(n("attn_v.weight"), &[d, kv], Init::Weight);
        }
        if arch.has_qkv_bias() {
            add(n("attn_q.bias"), &[qd], Init::Bias);
            add(n("attn_k.bias"), &[kv], Init::Bias);
            add(n("attn_v.bias"), &[kv], Init::Bias);
        }
        let qk = match arch.qk_norm() {
            QkNorm::None => None,
            QkNorm::PerHead => Some((hd, hd)),
            QkNorm::Whole => Some((qd, kv)),
        };
        if let Some((q, k)) = qk {
            add(n("attn_q_norm.weight"), &[q], Init::Norm);
            add(n("attn_k_norm.weight"), &[k], Init::Norm);
        }
        add(n("attn_output.weight"), &[qd, d], Init::Weight);
        if arch == Arch::GptOss {
            add(n("attn_output.bias"), &[d], Init::Bias);
            add(n("attn_sinks.weight"), &[spec.heads as u64], Init::Bias);
        }
        // gpt-oss's FFN pre-norm is named post_attention_norm too.
        if arch.has_post_norms() || arch == Arch::GptOss {
            add(n("post_attention_norm.weight"), &[d], Init::Norm);
        }
        if !matches!(arch, Arch::Olmo2 | Arch::GptOss) {
            add(n("ffn_norm.weight"), &[d], Init::Norm);
        }
        match (&spec.moe, arch) {
            (Some(m), _) => {
                let (e, fe) = (m.experts as u64, m.ffn as u64);
                add(n("ffn_gate_inp.weight"), &[d, e], Init::Weight);
                if arch == Arch::GptOss {
                    add(n("ffn_gate_inp.bias"), &[e], Init::Bias);
                }
                add(n("ffn_gate_exps.weight"), &[d, fe, e], Init::Weight);
                add(n("ffn_down_exps.weight"), &[fe, d, e], Init::Weight);
                add(n("ffn_up_exps.weight"), &[d, fe, e], Init::Weight);
                if arch == Arch::GptOss {
                    add(n("ffn_gate_exps.bias"), &[fe, e], Init::Bias);
                    add(n("ffn_down_exps.bias"), &[d, e], Init::Bias);
                    add(n("ffn_up_exps.bias"), &[fe, e], Init::Bias);
                }
            }
            (None, Arch::Phi3) => {
                let ff = spec.ffn as u64;
                // Rows: the gate's, then the up projection's.
                add(n("ffn_up.weight"), &[d, 2 * ff], Init::Weight);
                add(n("ffn_down.weight"), &[ff, d], Init::Weight);
            }
            (None, _) => {
                let ff = spec.ffn as u64;
                add(n("ffn_gate.weight"), &[d, ff], Init::Weight);
                add(n("ffn_down.weight"), &[ff, d], Init::Weight);
                add(n("ffn_up.weight"), &[d, ff], Init::Weight);
            }
        }
        if arch.has_post_norms() {
            add(n("post_ffw_norm.weight"), &[d], Init::Norm);
        }
    }
    out
}

/// The type of every planned tensor: F32 for those llama-quantize leaves alone (norms,
/// biases, routers, factors), the chosen types for the others.
pub(crate) fn types(spec: &SynthSpec, plan: &[Planned]) -> Vec<GgmlType> {
    let qt: Vec<QuantTensor> = plan
        .iter()
        .map(|t| QuantTensor {
            name: &t.name,
            dims: &t.dims,
        })
        .collect();
    match spec.ty {
        WeightTypes::Single(ty) => qt
            .iter()
            .map(|t| match t.name {
                _ if !allows_quantization(*t) => GgmlType::F32,
                "token_embd.weight" | "output.weight" => spec.embedding_type(),
                _ => ty,
            })
            .collect(),
        WeightTypes::Q4KM => {
            let facts = ModelFacts {
                n_layer: spec.layers,
                n_expert: spec.moe.map_or(0, |m| m.experts),
                is_70b: spec.layers == 80
                    && match spec.arch {
                        Arch::Llama => spec.heads != spec.kv_heads,
                        Arch::Qwen2 => true,
                        _ => false,
                    },
            };
            q4_k_m_types(&qt, facts)
                .into_iter()
                .map(|t| t.unwrap_or(GgmlType::F32))
                .collect()
        }
        WeightTypes::Mxfp4Moe => mxfp4_moe_types(&qt)
            .into_iter()
            .map(|t| t.unwrap_or(GgmlType::F32))
            .collect(),
    }
}
