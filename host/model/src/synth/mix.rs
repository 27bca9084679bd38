//! Weight types of a synthetic model: one type for every matrix, or the Q4_K_M mix exactly as
//! llama.cpp's `llama-quantize` assigns it (`src/llama-quant.cpp`: `tensor_allows_quantization`,
//! `llama_tensor_get_type_impl`, `tensor_type_fallback`), so a synthetic Q4_K_M file has the
//! type of every tensor the downloaded one has.
//!
//! Invariant: the Q4_K_M rule visits tensors in llama-quantize's order (by layer, then name)
//! with its counters, whatever order the file lists them in.

use std::fmt;

use memoria_kernels::GgmlType;

/// The weight types of a synthetic model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightTypes {
    /// Every quantizable matrix of this type; the token embedding and output projection Q6_K
    /// when it is Q4_0 or Q4_K (as llama-quantize).
    Single(GgmlType),
    /// llama-quantize's `Q4_K_M`: Q4_K, with Q6_K for the output (and a tied embedding), for
    /// `attn_v`/`attn_qkv` and `ffn_down` on the "more bits" layers, Q5_0/Q8_0/F16 where a row
    /// is not a multiple of 256, and the bumps of 8-expert models.
    Q4KM,
    /// llama-quantize's `MXFP4_MOE` (gpt-oss as released): MXFP4 experts, Q8_0 for every
    /// other matrix, output and embedding included.
    Mxfp4Moe,
}

impl From<GgmlType> for WeightTypes {
    fn from(ty: GgmlType) -> WeightTypes {
        WeightTypes::Single(ty)
    }
}

impl fmt::Display for WeightTypes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WeightTypes::Single(ty) => write!(f, "{ty}"),
            WeightTypes::Q4KM => f.write_str("q4_k_m"),
            WeightTypes::Mxfp4Moe => f.write_str("mxfp4_moe"),
        }
    }
}

impl WeightTypes {
    /// `q4_k_m`, `mxfp4_moe`, or the name of a weight type (`q8_0`, `Q4_K`, ...).
    pub fn parse(name: &str) -> Option<WeightTypes> {
        if name.eq_ignore_ascii_case("q4_k_m") {
            return Some(WeightTypes::Q4KM);
        }
        if name.eq_ignore_ascii_case("mxfp4_moe") {
            return Some(WeightTypes::Mxfp4Moe);
        }
        GgmlType::parse(name)
            .filter(|t| !t.is_activation_only())
            .map(WeightTypes::Single)
    }

    /// `general.file_type` (llama_ftype).
    pub const fn file_type(self) -> u32 {
        match self {
            WeightTypes::Q4KM => 15,
            WeightTypes::Mxfp4Moe => 38,
            WeightTypes::Single(ty) => match ty {
                GgmlType::F32 => 0,
                GgmlType::F16 => 1,
                GgmlType::Q4_0 => 2,
                GgmlType::Q4_1 => 3,
                GgmlType::Q8_0 => 7,
                GgmlType::Q5_0 => 8,
                GgmlType::Q5_1 => 9,
                GgmlType::Q2K => 10,
                GgmlType::Q3K => 12,
                GgmlType::Q4K => 15,
                GgmlType::Q5K => 17,
                GgmlType::Q6K => 18,
                GgmlType::IQ4NL => 25,
                GgmlType::IQ4XS => 30,
                GgmlType::BF16 => 32,
                // LLAMA_FTYPE_MOSTLY_MXFP4_MOE (llama.cpp keeps 1-d tensors in F32 in such files).
                GgmlType::Mxfp4 => 38,
                GgmlType::Q8_1 | GgmlType::Q8K => 0,
            },
        }
    }

    /// Whether any weight is block-quantized (files then carry `general.quantization_version`).
    pub fn is_quantized(self) -> bool {
        !matches!(
            self,
            WeightTypes::Single(GgmlType::F32 | GgmlType::F16 | GgmlType::BF16)
        )
    }
}

/// What llama-quantize knows of the model when it picks types.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ModelFacts {
    pub n_layer: usize,
    /// 0 for a dense model.
    pub n_expert: usize,
    /// llama.cpp's `LLM_TYPE_70B` (80-layer llama with grouped K/V, 80-layer qwen2).
    pub is_70b: bool,
}

/// A tensor as llama-quantize sees it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct QuantTensor<'a> {
    pub name: &'a str,
    /// ggml `ne`: `dims[0]` is the row length.
    pub dims: &'a [u64],
}

/// llama-quant.cpp's `tensor_category`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Category {
    Output,
    TokenEmbd,
    AttnQkv,
    AttnV,
    AttnK,
    AttnQ,
    AttnOutput,
    FfnUp,
    FfnGate,
    FfnDown,
    Other,
}

fn category(name: &str) -> Category {
    let has = |s: &str| name.contains(s);
    match name {
        "output.weight" => Category::Output,
        "token_embd.weight" | "per_layer_token_embd.weight" => Category::TokenEmbd,
        _ if has("attn_qkv.weight") || has("attn_kv_b.weight") => Category::AttnQkv,
        _ if has("attn_v.weight") => Category::AttnV,
        _ if has("attn_k.weight") => Category::AttnK,
        _ if has("attn_q.weight") => Category::AttnQ,
        _ if has("attn_output.weight") => Category::AttnOutput,
        _ if has("ffn_up") => Category::FfnUp,
        _ if has("ffn_gate") => Category::FfnGate,
        _ if has("ffn_down") => Category::FfnDown,
        _ => Category::Other,
    }
}

/// ggml's `ggml_n_dims`: 1 + the index of the last dimension above 1.
fn n_dims(dims: &[u64]) -> usize {
    dims.iter().rposition(|&d| d > 1).map_or(1, |i| i + 1)
}

/// `tensor_allows_quantization` for the tensors these architectures have.
pub(crate) fn allows_quantization(t: QuantTensor) -> bool {
    n_dims(t.dims) >= 2
        && t.name.ends_with("weight")
        && !t.name.contains("_norm.weight")
        && !t.name.contains("ffn_gate_inp.weight")
}

/// The layer `blk.N.` of a tensor name (`sscanf("blk.%d.")`).
fn layer_of(name: &str) -> Option<usize> {
    let rest = name.strip_prefix("blk.")?;
    let (n, _) = rest.split_once('.')?;
    n.parse().ok()
}

/// llama-quantize's `use_more_bits`: the first and last eighth of the layers and every third
/// one between.
pub(crate) fn use_more_bits(i: usize, n: usize) -> bool {
    i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2
}

/// `tensor_type_fallback`: the type a row of `cols` values can hold when `target` cannot.
pub(crate) fn fallback(target: GgmlType, cols: u64) -> GgmlType {
    let fits = |ty: GgmlType| cols.is_multiple_of(ty.block_size() as u64);
    if fits(target) {
        return target;
    }
    let next = match target {
        GgmlType::IQ4XS => GgmlType::IQ4NL,
        GgmlType::Q2K | GgmlType::Q3K => GgmlType::Q4_0,
        GgmlType::Q4K => GgmlType::Q5_0,
        GgmlType::Q5K => GgmlType::Q5_1,
        GgmlType::Q6K => GgmlType::Q8_0,
        other => other,
    };
    if fits(next) { next } else { GgmlType::F16 }
}

/// The type llama-quantize gives each tensor of a model quantized to Q4_K_M from F32/F16
/// (`None`: left as it is), in the order of `tensors`.
pub(crate) fn q4_k_m_types(tensors: &[QuantTensor], facts: ModelFacts) -> Vec<Option<GgmlType>> {
    let mut order: Vec<usize> = (0..tensors.len()).collect();
    // llama_model_loader's weight_name_comparer: by layer (-1 outside blocks), then by name.
    order.sort_by(|&a, &b| {
        let key = |i: usize| {
            (
                layer_of(tensors[i].name).map_or(-1, |l| l as i64),
                tensors[i].name,
            )
        };
        key(a).cmp(&key(b))
    });
    let n_attention_wv = tensors
        .iter()
        .filter(|t| matches!(category(t.name), Category::AttnV | Category::AttnQkv))
        .count();
    let tied = !tensors.iter().any(|t| t.name == "output.weight");
    let (mut i_attention_wv, mut i_ffn_down) = (0usize, 0usize);
    let mut out = vec![None; tensors.len()];
    for i in order {
        let t = tensors[i];
        if !allows_quantization(t) {
            continue;
        }
        let cat = category(t.name);
        let mut ty = GgmlType::Q4K;
        match cat {
            Category::Output | Category::TokenEmbd if cat == Category::Output || tied => {
                ty = if !t.dims[0].is_multiple_of(256) {
                    GgmlType::Q8_0
                } else {
                    GgmlType::Q6K
                };
            }
            Category::AttnV | Category::AttnQkv => {
                if use_more_bits(i_attention_wv, n_attention_wv) {
                    ty = GgmlType::Q6K;
                }
                if facts.is_70b && matches!(ty, GgmlType::Q3K | GgmlType::Q4K) {
                    ty = GgmlType::Q5K;
                }
                if facts.n_expert == 8 {
                    ty = GgmlType::Q8_0;
                }
                i_attention_wv += 1;
            }
            Category::AttnK if facts.n_expert == 8 => ty = GgmlType::Q8_0,
            Category::FfnDown => {
                // Experts are not consecutive in every model: their layer comes from the name.
                let layer = if facts.n_expert > 1 {
                    layer_of(t.name).unwrap_or(i_ffn_down)
                } else {
                    i_ffn_down
                };
                if use_more_bits(layer, facts.n_layer) {
                    ty = GgmlType::Q6K;
                }
                i_ffn_down += 1;
            }
            Category::AttnOutput if facts.n_expert == 8 => ty = GgmlType::Q5K,
            _ => {}
        }
        out[i] = Some(fallback(ty, t.dims[0]));
    }
    out
}

/// The type llama-quantize gives each tensor of a model quantized to MXFP4_MOE (`None`: left
/// as it is): experts (3-D, more than one) MXFP4, every other quantizable matrix Q8_0.
pub(crate) fn mxfp4_moe_types(tensors: &[QuantTensor]) -> Vec<Option<GgmlType>> {
    tensors
        .iter()
        .map(|&t| {
            let experts = t.dims.len() >= 3 && t.dims[2] > 1;
            let ty = if experts {
                GgmlType::Mxfp4
            } else {
                GgmlType::Q8_0
            };
            allows_quantization(t).then(|| fallback(ty, t.dims[0]))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_names_and_file_types() {
        assert_eq!(WeightTypes::parse("Q4_K_M"), Some(WeightTypes::Q4KM));
        assert_eq!(
            WeightTypes::parse("q6_k"),
            Some(WeightTypes::Single(GgmlType::Q6K))
        );
        assert_eq!(WeightTypes::parse("q8_k"), None);
        assert_eq!(WeightTypes::parse("q4_k_s"), None);
        assert_eq!(WeightTypes::Q4KM.file_type(), 15);
        assert_eq!(WeightTypes::Single(GgmlType::Q8_0).file_type(), 7);
        assert_eq!(WeightTypes::Q4KM.to_string(), "q4_k_m");
        assert_eq!(WeightTypes::parse("MXFP4_MOE"), Some(WeightTypes::Mxfp4Moe));
        assert_eq!(WeightTypes::Mxfp4Moe.file_type(), 38);
        assert!(!WeightTypes::Single(GgmlType::BF16).is_quantized());
    }

    /// llama-quantize's layer pattern: of 28 layers, the first 3, the last 4 and every third
    /// from layer 5.
    #[test]
    fn more_bits_layers() {
        let layers: Vec<usize> = (0..28).filter(|&i| use_more_bits(i, 28)).collect();
        assert_eq!(layers, [0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 24, 25, 26, 27]);
        let layers: Vec<usize> = (0..2).filter(|&i| use_more_bits(i, 2)).collect();
        assert_eq!(layers, [1]);
    }

    #[test]
    fn fallbacks_follow_the_block_sizes() {
        assert_eq!(fallback(GgmlType::Q4K, 2048), GgmlType::Q4K);
        assert_eq!(fallback(GgmlType::Q4K, 2880), GgmlType::Q5_0);
        assert_eq!(fallback(GgmlType::Q6K, 2880), GgmlType::Q8_0);
        assert_eq!(fallback(GgmlType::Q5K, 96), GgmlType::Q5_1);
        assert_eq!(fallback(GgmlType::Q6K, 100), GgmlType::F16);
        assert_eq!(fallback(GgmlType::Q8_0, 100), GgmlType::F16);
        assert_eq!(fallback(GgmlType::Mxfp4, 2880), GgmlType::Mxfp4);
    }

    #[test]
    fn quantizable_tensors() {
        let q = |name, dims: &[u64]| allows_quantization(QuantTensor { name, dims });
        assert!(q("blk.0.attn_q.weight", &[256, 256]));
        assert!(q("blk.0.ffn_up_exps.weight", &[256, 64, 8]));
        assert!(!q("blk.0.attn_norm.weight", &[256]));
        assert!(!q("blk.0.attn_q_norm.weight", &[128]));
        assert!(!q("blk.0.ffn_gate_inp.weight", &[256, 8]));
        assert!(!q("blk.0.ffn_up_exps.bias", &[64, 8]));
        assert!(!q("blk.0.attn_q.weight", &[256, 1]));
    }
}
