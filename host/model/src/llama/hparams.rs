//! Hyper-parameters of a llama-family model, read and validated from GGUF metadata
//! (`{arch}.embedding_length`, `{arch}.attention.head_count`, ...), the way llama.cpp reads them.
//! The head size comes from `attention.key_length` when present, so the query width
//! `n_head * head_dim` may differ from `n_embd` (Gemma 3: 4 × 256 = 1024 against 640).

use memoria_kernels::ops::RopeStyle;

use super::ModelError;
use crate::gguf::GgufFile;

/// Architectures the forward pass implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    /// Llama 2/3, TinyLlama, Mistral, SmolLM: RoPE on adjacent pairs, no QKV bias.
    Llama,
    /// Qwen2: QKV bias, NeoX-style RoPE.
    Qwen2,
    /// Gemma 3 (llama.cpp's `src/models/gemma3.cpp`): embeddings scaled by `sqrt(n_embd)`,
    /// RMS-normed Q and K per head, post-attention and post-FFN norms, GeGLU, NeoX RoPE, and
    /// sliding-window attention with its own RoPE base on 5 of every 6 layers.
    Gemma3,
}

impl Arch {
    /// The `general.architecture` string.
    pub fn name(self) -> &'static str {
        match self {
            Arch::Llama => "llama",
            Arch::Qwen2 => "qwen2",
            Arch::Gemma3 => "gemma3",
        }
    }

    fn parse(s: &str) -> Option<Arch> {
        match s {
            "llama" => Some(Arch::Llama),
            "qwen2" => Some(Arch::Qwen2),
            "gemma3" => Some(Arch::Gemma3),
            _ => None,
        }
    }
}

/// Activation of the gated feed-forward block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FfnAct {
    /// `silu(gate) * up` (llama, qwen2).
    Silu,
    /// `gelu_tanh(gate) * up` (Gemma).
    GeluTanh,
}

/// Sliding-window attention on some layers (llama.cpp's `LLAMA_SWA_TYPE_STANDARD`): a token at
/// position `p` of a windowed layer sees the positions `p0` with `p - p0 < window`, that is
/// `p + 1 - window ..= p`; other layers see every position up to `p`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SlidingWindow {
    /// Positions a token sees, itself included (`{arch}.attention.sliding_window`).
    pub window: usize,
    /// Layer `il` is windowed unless `(il + 1) % period == 0` (llama.cpp's
    /// `set_swa_pattern(6)` for Gemma 3: layers 5, 11, 17, ... are global).
    pub period: usize,
    /// RoPE base of the windowed layers (10000 for Gemma 3); their frequency scale is 1.
    pub rope_base: f32,
}

/// Validated model shape. Immutable once loaded.
#[derive(Clone, Debug, PartialEq)]
pub struct HParams {
    pub arch: Arch,
    pub n_vocab: usize,
    pub n_embd: usize,
    pub n_layer: usize,
    pub n_head: usize,
    pub n_head_kv: usize,
    pub head_dim: usize,
    pub n_ff: usize,
    pub n_ctx_train: usize,
    pub rms_eps: f32,
    pub rope_dims: usize,
    pub rope_base: f32,
    /// `1 / linear scaling factor`; 1.0 without scaling.
    pub rope_freq_scale: f32,
    pub rope_style: RopeStyle,
    /// Multiplier of `q·k` before the softmax: `1/sqrt(head_dim)`, except Gemma 3 27B (62
    /// layers), which uses `1/sqrt(n_embd/n_head)` as llama.cpp does.
    pub attn_scale: f32,
    /// Gemma's input scale `sqrt(n_embd)` on token embeddings; `None` for llama and qwen2.
    pub embd_scale: Option<f32>,
    pub ffn_act: FfnAct,
    /// Sliding-window layers, if the model has any.
    pub swa: Option<SlidingWindow>,
}

/// Upper bounds that keep a hostile file from asking for absurd buffers.
const MAX_DIM: usize = 1 << 17;
const MAX_LAYERS: usize = 1024;

impl HParams {
    /// Reads the hyper-parameters; `n_vocab` comes from the token embedding's shape.
    pub fn from_gguf(f: &GgufFile) -> Result<HParams, ModelError> {
        let arch_name = f
            .get_str("general.architecture")
            .ok_or_else(|| ModelError::MissingKey("general.architecture".into()))?;
        let arch = Arch::parse(arch_name)
            .ok_or_else(|| ModelError::UnsupportedArch(arch_name.to_string()))?;
        let key = |k: &str| format!("{arch_name}.{k}");
        let req = |k: &str| -> Result<usize, ModelError> {
            let full = key(k);
            f.get_u64(&full)
                .map(|v| v as usize)
                .ok_or(ModelError::MissingKey(full))
        };
        let n_embd = req("embedding_length")?;
        let n_layer = req("block_count")?;
        let n_ff = req("feed_forward_length")?;
        let n_head = req("attention.head_count")?;
        let n_head_kv = f
            .get_u64(&key("attention.head_count_kv"))
            .map_or(n_head, |v| v as usize);
        let n_ctx_train = req("context_length")?;
        let rms_eps = f
            .get_f32(&key("attention.layer_norm_rms_epsilon"))
            .ok_or_else(|| ModelError::MissingKey(key("attention.layer_norm_rms_epsilon")))?;
        let bad = |what: &str, why: String| ModelError::BadHParam {
            key: key(what),
            why,
        };
        if n_embd == 0 || n_embd > MAX_DIM {
            return Err(bad("embedding_length", format!("{n_embd} out of range")));
        }
        if n_layer == 0 || n_layer > MAX_LAYERS {
            return Err(bad("block_count", format!("{n_layer} out of range")));
        }
        if n_ff == 0 || n_ff > 8 * MAX_DIM {
            return Err(bad("feed_forward_length", format!("{n_ff} out of range")));
        }
        if n_head == 0 || n_head > MAX_DIM {
            return Err(bad(
                "attention.head_count",
                format!("{n_head} out of range"),
            ));
        }
        if n_head_kv == 0 || !n_head.is_multiple_of(n_head_kv) {
            return Err(bad(
                "attention.head_count_kv",
                format!("{n_head_kv} does not divide head_count {n_head}"),
            ));
        }
        let head_dim = match f.get_u64(&key("attention.key_length")) {
            Some(v) => usize::try_from(v).unwrap_or(usize::MAX),
            None if n_embd.is_multiple_of(n_head) => n_embd / n_head,
            None => {
                return Err(bad(
                    "attention.head_count",
                    format!("{n_head} does not divide {n_embd} and there is no key_length"),
                ));
            }
        };
        if head_dim == 0 || head_dim > MAX_DIM || head_dim * n_head > MAX_DIM {
            return Err(bad(
                "attention.key_length",
                format!("{head_dim} with {n_head} heads out of range"),
            ));
        }
        if let Some(v) = f.get_u64(&key("attention.value_length"))
            && v != head_dim as u64
        {
            return Err(bad(
                "attention.value_length",
                format!("{v} ≠ key_length {head_dim} is not supported"),
            ));
        }
        let rope_dims = f
            .get_u64(&key("rope.dimension_count"))
            .map_or(head_dim, |v| v as usize);
        if rope_dims == 0 || rope_dims > head_dim || !rope_dims.is_multiple_of(2) {
            return Err(bad(
                "rope.dimension_count",
                format!("{rope_dims} with head size {head_dim}"),
            ));
        }
        let rope_base = f.get_f32(&key("rope.freq_base")).unwrap_or(10000.0);
        let scaling_type = f.get_str(&key("rope.scaling.type")).unwrap_or("none");
        let factor = match scaling_type {
            "linear" => f.get_f32(&key("rope.scaling.factor")).unwrap_or(1.0),
            "none" => f.get_f32(&key("rope.scale_linear")).unwrap_or(1.0),
            other => {
                return Err(bad(
                    "rope.scaling.type",
                    format!("{other:?} is not supported"),
                ));
            }
        };
        if !(factor.is_finite() && factor > 0.0 && rope_base.is_finite() && rope_base > 0.0) {
            return Err(bad(
                "rope.freq_base",
                format!("base {rope_base}, scale {factor}"),
            ));
        }
        let swa = match arch {
            Arch::Gemma3 => {
                let window = f
                    .get_u64(&key("attention.sliding_window"))
                    .ok_or_else(|| ModelError::MissingKey(key("attention.sliding_window")))?;
                if window == 0 || window > 1 << 24 {
                    return Err(bad(
                        "attention.sliding_window",
                        format!("{window} out of range"),
                    ));
                }
                Some(SlidingWindow {
                    window: window as usize,
                    period: 6,
                    rope_base: 10000.0,
                })
            }
            Arch::Llama | Arch::Qwen2 => None,
        };
        let attn_scale = if arch == Arch::Gemma3 && n_layer == 62 {
            // llama.cpp's LLM_TYPE_27B: gemma_pytorch's query_pre_attn_scalar.
            1.0 / ((n_embd / n_head) as f32).sqrt()
        } else {
            1.0 / (head_dim as f32).sqrt()
        };
        let tok = f
            .tensor("token_embd.weight")
            .ok_or_else(|| ModelError::MissingTensor("token_embd.weight".into()))?;
        let n_vocab = tok.dims.get(1).copied().unwrap_or(0) as usize;
        if n_vocab == 0 || n_vocab > 1 << 22 {
            return Err(ModelError::BadTensor {
                name: "token_embd.weight".into(),
                why: format!("vocabulary size {n_vocab} out of range"),
            });
        }
        Ok(HParams {
            arch,
            n_vocab,
            n_embd,
            n_layer,
            n_head,
            n_head_kv,
            head_dim,
            n_ff,
            n_ctx_train,
            rms_eps,
            rope_dims,
            rope_base,
            rope_freq_scale: 1.0 / factor,
            rope_style: match arch {
                Arch::Llama => RopeStyle::Norm,
                Arch::Qwen2 | Arch::Gemma3 => RopeStyle::Neox,
            },
            attn_scale,
            embd_scale: (arch == Arch::Gemma3).then(|| (n_embd as f32).sqrt()),
            ffn_act: match arch {
                Arch::Gemma3 => FfnAct::GeluTanh,
                Arch::Llama | Arch::Qwen2 => FfnAct::Silu,
            },
            swa,
        })
    }

    /// Width of one K or V row: `n_head_kv * head_dim`.
    pub fn kv_dim(&self) -> usize {
        self.n_head_kv * self.head_dim
    }

    /// Width of the queries and of the attention output: `n_head * head_dim` (`n_embd` for
    /// llama and qwen2, not for Gemma 3).
    pub fn q_dim(&self) -> usize {
        self.n_head * self.head_dim
    }

    /// The sliding window of layer `il`: `Some(window)` on a windowed layer, `None` on a layer
    /// that sees the whole sequence.
    pub fn layer_window(&self, il: usize) -> Option<usize> {
        self.swa
            .filter(|s| s.period == 0 || !(il + 1).is_multiple_of(s.period))
            .map(|s| s.window)
    }
}
