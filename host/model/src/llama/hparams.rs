//! Hyper-parameters of a model, read and validated from GGUF metadata
//! (`{arch}.embedding_length`, `{arch}.attention.head_count`, ...), the way llama.cpp reads
//! them, with each architecture's defaults ([`Arch`]). The head size comes from
//! `attention.key_length` when present, so the query width `n_head * head_dim` may differ from
//! `n_embd` (Gemma 3: 4 × 256 = 1024 against 640). A missing or inconsistent key is an error
//! that names it.

mod rope;

pub use rope::RopeParams;

use super::ModelError;
use super::arch::Arch;
use crate::gguf::{GgufFile, MetaArray};

/// Activation of the gated feed-forward block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FfnAct {
    /// `silu(gate) * up` (llama, qwen, phi, granite, olmo2).
    Silu,
    /// `gelu_tanh(gate) * up` (Gemma).
    GeluTanh,
    /// gpt-oss's clamped SwiGLU (`swiglu_oai`).
    SwigluOai,
}

/// Which layers have a sliding window.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SwaLayers {
    /// Layer `il` is windowed unless `(il + 1) % period == 0` (llama.cpp's
    /// `set_swa_pattern(period)`: Gemma 3's 6 makes layers 5, 11, 17, ... global).
    Period(usize),
    /// One flag per layer (`attention.sliding_window_pattern` as an array).
    Each(Vec<bool>),
}

/// Sliding-window attention on some layers (llama.cpp's `LLAMA_SWA_TYPE_STANDARD`): a token at
/// position `p` of a windowed layer sees the positions `p0` with `p - p0 < window`, that is
/// `p + 1 - window ..= p`; other layers see every position up to `p`.
#[derive(Clone, Debug, PartialEq)]
pub struct SlidingWindow {
    /// Positions a token sees, itself included (`{arch}.attention.sliding_window`).
    pub window: usize,
    pub layers: SwaLayers,
}

/// How a mixture of experts weighs the experts it routes a token to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gating {
    /// Softmax over all router logits, the top `n_used` probabilities kept (Qwen3 MoE).
    SoftmaxAll,
    /// The top `n_used` router logits, softmax over those only (gpt-oss's `SOFTMAX_WEIGHT`).
    SoftmaxChosen,
}

/// A mixture-of-experts FFN.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Moe {
    /// Experts per layer (`{arch}.expert_count`).
    pub n_expert: usize,
    /// Experts per token (`{arch}.expert_used_count`).
    pub n_used: usize,
    /// Rows of each expert's gate and up matrices (`{arch}.expert_feed_forward_length`).
    pub n_ff: usize,
    pub gating: Gating,
    /// Whether the chosen weights are divided by their sum (Qwen3 MoE).
    pub normalize: bool,
    /// Multiplier of the weights (`{arch}.expert_weights_scale`; 1 for none).
    pub weights_scale: f32,
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
    /// Rows of the dense FFN's gate and up matrices (a MoE's experts have [`Moe::n_ff`]).
    pub n_ff: usize,
    pub n_ctx_train: usize,
    pub rms_eps: f32,
    /// RoPE of the layers that see the whole sequence.
    pub rope: RopeParams,
    /// RoPE of the sliding-window layers when it differs (Gemma 3's local base, OLMo 2's
    /// unscaled windows).
    pub rope_local: Option<RopeParams>,
    /// Multiplier of `q·k` before the softmax: `1/sqrt(head_dim)` unless the file or the
    /// architecture says otherwise (Granite's `attention.scale`, Gemma 27B's
    /// `1/sqrt(n_embd/n_head)`).
    pub attn_scale: f32,
    /// Soft-cap of the attention scores (Gemma 2's `attn_logit_softcapping`).
    pub attn_softcap: Option<f32>,
    /// Soft-cap of the logits (Gemma 2's `final_logit_softcapping`).
    pub final_softcap: Option<f32>,
    /// Multiplier of the token embeddings: Gemma's `sqrt(n_embd)`, Granite's
    /// `embedding_scale`.
    pub embd_scale: Option<f32>,
    /// Multiplier of every attention and FFN output before its residual add (Granite).
    pub residual_scale: Option<f32>,
    /// Divisor of the logits (Granite's `logit_scale`).
    pub logit_scale: Option<f32>,
    pub ffn_act: FfnAct,
    /// Sliding-window layers, if the model has any.
    pub swa: Option<SlidingWindow>,
    /// Layers with `(il + 1) % period == 0` get no RoPE (SmolLM3's NoPE layers).
    pub nope_period: Option<usize>,
    /// The mixture of experts, for MoE architectures.
    pub moe: Option<Moe>,
}

/// Upper bounds that keep a hostile file from asking for absurd buffers.
const MAX_DIM: usize = 1 << 17;
const MAX_LAYERS: usize = 1024;
const MAX_EXPERTS: usize = 1024;

/// Reads `{arch}.*` keys with the errors that name them.
pub(super) struct Keys<'a> {
    pub f: &'a GgufFile,
    pub arch: &'a str,
}

impl Keys<'_> {
    pub fn name(&self, k: &str) -> String {
        format!("{}.{k}", self.arch)
    }

    pub fn u64(&self, k: &str) -> Option<u64> {
        self.f.get_u64(&self.name(k))
    }

    pub fn f32(&self, k: &str) -> Option<f32> {
        self.f.get_f32(&self.name(k))
    }

    pub fn str(&self, k: &str) -> Option<&str> {
        self.f.get_str(&self.name(k))
    }

    /// A required count in `1..=max`.
    pub fn count(&self, k: &str, max: usize) -> Result<usize, ModelError> {
        let v = self
            .u64(k)
            .ok_or_else(|| ModelError::MissingKey(self.name(k)))?;
        self.in_range(k, v, max)
    }

    /// An optional count in `1..=max`.
    pub fn count_or(&self, k: &str, max: usize, default: usize) -> Result<usize, ModelError> {
        match self.u64(k) {
            Some(v) => self.in_range(k, v, max),
            None => Ok(default),
        }
    }

    fn in_range(&self, k: &str, v: u64, max: usize) -> Result<usize, ModelError> {
        match usize::try_from(v) {
            Ok(v) if (1..=max).contains(&v) => Ok(v),
            _ => Err(self.bad(k, format!("{v} out of range 1..={max}"))),
        }
    }

    /// An optional positive finite float.
    pub fn positive(&self, k: &str) -> Result<Option<f32>, ModelError> {
        match self.f32(k) {
            None => Ok(None),
            Some(v) if v.is_finite() && v > 0.0 => Ok(Some(v)),
            Some(v) => Err(self.bad(k, format!("{v} is not a positive number"))),
        }
    }

    pub fn bad(&self, k: &str, why: String) -> ModelError {
        ModelError::BadHParam {
            key: self.name(k),
            why,
        }
    }
}

impl HParams {
    /// Reads the hyper-parameters; `n_vocab` comes from the token embedding's shape.
    pub fn from_gguf(f: &GgufFile) -> Result<HParams, ModelError> {
        let arch_name = f
            .get_str("general.architecture")
            .ok_or_else(|| ModelError::MissingKey("general.architecture".into()))?;
        let arch = Arch::parse(arch_name)
            .ok_or_else(|| ModelError::UnsupportedArch(arch_name.to_string()))?;
        let k = Keys { f, arch: arch_name };
        let n_embd = k.count("embedding_length", MAX_DIM)?;
        let n_layer = k.count("block_count", MAX_LAYERS)?;
        let n_ff = k.count("feed_forward_length", 8 * MAX_DIM)?;
        let n_head = k.count("attention.head_count", MAX_DIM)?;
        let n_head_kv = k.count_or("attention.head_count_kv", MAX_DIM, n_head)?;
        let n_ctx_train = k.count("context_length", usize::MAX)?;
        let rms_eps = k
            .f32("attention.layer_norm_rms_epsilon")
            .ok_or_else(|| ModelError::MissingKey(k.name("attention.layer_norm_rms_epsilon")))?;
        if !(rms_eps.is_finite() && rms_eps >= 0.0) {
            return Err(k.bad(
                "attention.layer_norm_rms_epsilon",
                format!("{rms_eps} is not a small non-negative number"),
            ));
        }
        if !n_head.is_multiple_of(n_head_kv) {
            return Err(k.bad(
                "attention.head_count_kv",
                format!("{n_head_kv} does not divide head_count {n_head}"),
            ));
        }
        let head_dim = match k.u64("attention.key_length") {
            Some(_) => k.count("attention.key_length", MAX_DIM)?,
            None if n_embd.is_multiple_of(n_head) => n_embd / n_head,
            None => {
                return Err(k.bad(
                    "attention.head_count",
                    format!("{n_head} does not divide {n_embd} and there is no key_length"),
                ));
            }
        };
        if head_dim * n_head > MAX_DIM {
            return Err(k.bad(
                "attention.key_length",
                format!("{head_dim} with {n_head} heads out of range"),
            ));
        }
        if let Some(v) = k.u64("attention.value_length")
            && v != head_dim as u64
        {
            return Err(k.bad(
                "attention.value_length",
                format!("{v} ≠ key_length {head_dim} is not supported"),
            ));
        }
        let swa = sliding_window(&k, arch, n_layer)?;
        let (rope, rope_local) = rope::read(&k, arch, head_dim, n_ctx_train, swa.is_some())?;
        let attn_scale = attention_scale(&k, arch, n_embd, n_head, n_layer, head_dim)?;
        let granite = arch == Arch::Granite;
        let embd_scale = match arch {
            Arch::Gemma2 | Arch::Gemma3 => Some((n_embd as f32).sqrt()),
            Arch::Granite => k.positive("embedding_scale")?,
            _ => None,
        };
        let logit_scale = match arch {
            Arch::Granite => Some(
                k.positive("logit_scale")?
                    .ok_or_else(|| ModelError::MissingKey(k.name("logit_scale")))?,
            ),
            _ => None,
        };
        let (attn_softcap, final_softcap) = match arch {
            Arch::Gemma2 => (
                Some(k.positive("attn_logit_softcapping")?.unwrap_or(50.0)),
                Some(k.positive("final_logit_softcapping")?.unwrap_or(30.0)),
            ),
            Arch::Gemma3 => (None, k.positive("final_logit_softcapping")?),
            _ => (None, None),
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
            rope,
            rope_local,
            attn_scale,
            attn_softcap,
            final_softcap,
            embd_scale,
            residual_scale: if granite {
                k.positive("residual_scale")?
            } else {
                None
            },
            logit_scale,
            ffn_act: match arch {
                Arch::Gemma2 | Arch::Gemma3 => FfnAct::GeluTanh,
                Arch::GptOss => FfnAct::SwigluOai,
                _ => FfnAct::Silu,
            },
            swa,
            nope_period: (arch == Arch::SmolLm3).then_some(4),
            moe: if arch.is_moe() {
                Some(mixture(&k, arch)?)
            } else {
                None
            },
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
        let s = self.swa.as_ref()?;
        let windowed = match &s.layers {
            SwaLayers::Period(p) => *p == 0 || !(il + 1).is_multiple_of(*p),
            SwaLayers::Each(flags) => flags.get(il).copied().unwrap_or(false),
        };
        windowed.then_some(s.window)
    }

    /// Whether layer `il` rotates Q and K (all but SmolLM3's NoPE layers).
    pub fn layer_has_rope(&self, il: usize) -> bool {
        self.nope_period.is_none_or(|p| !(il + 1).is_multiple_of(p))
    }
}

/// The sliding window, as llama.cpp's `load_swa_pattern` reads it.
fn sliding_window(
    k: &Keys,
    arch: Arch,
    n_layer: usize,
) -> Result<Option<SlidingWindow>, ModelError> {
    let Some(default) = arch.swa_default() else {
        return Ok(None);
    };
    let window = match (k.u64("attention.sliding_window"), default.window) {
        // llama.cpp's loaders: a window of 0 means none.
        (Some(0), _) => return Ok(None),
        (Some(_), _) => k.count("attention.sliding_window", 1 << 24)?,
        (None, Some(w)) => w,
        (None, None) if arch == Arch::GptOss => {
            return Err(ModelError::MissingKey(k.name("attention.sliding_window")));
        }
        (None, None) => return Ok(None),
    };
    let key = k.name("attention.sliding_window_pattern");
    let layers = if let Some(MetaArray::Bool(flags)) = k.f.get_array(&key) {
        if flags.len() != n_layer {
            return Err(k.bad(
                "attention.sliding_window_pattern",
                format!("{} flags for {n_layer} layers", flags.len()),
            ));
        }
        SwaLayers::Each(flags.clone())
    } else {
        SwaLayers::Period(k.count_or(
            "attention.sliding_window_pattern",
            MAX_LAYERS,
            default.period,
        )?)
    };
    Ok(Some(SlidingWindow { window, layers }))
}

/// The multiplier of `q·k`.
fn attention_scale(
    k: &Keys,
    arch: Arch,
    n_embd: usize,
    n_head: usize,
    n_layer: usize,
    head_dim: usize,
) -> Result<f32, ModelError> {
    let per_head = 1.0 / (head_dim as f32).sqrt();
    Ok(match arch {
        // llama.cpp's LLM_TYPE_27B: gemma_pytorch's query_pre_attn_scalar.
        Arch::Gemma3 if n_layer == 62 => 1.0 / ((n_embd / n_head) as f32).sqrt(),
        Arch::Gemma2 if n_layer == 46 => 1.0 / ((n_embd / n_head) as f32).sqrt(),
        Arch::Granite => k.positive("attention.scale")?.unwrap_or(per_head),
        _ => per_head,
    })
}

/// The mixture of experts of a MoE architecture.
fn mixture(k: &Keys, arch: Arch) -> Result<Moe, ModelError> {
    let n_expert = k.count("expert_count", MAX_EXPERTS)?;
    let n_used = k.count("expert_used_count", n_expert)?;
    let n_ff = k.count("expert_feed_forward_length", 8 * MAX_DIM)?;
    let weights_scale = match k.f32("expert_weights_scale") {
        None => 1.0,
        Some(0.0) => 1.0,
        Some(v) if v.is_finite() && v > 0.0 => v,
        Some(v) => return Err(k.bad("expert_weights_scale", format!("{v} is not positive"))),
    };
    let (gating, normalize) = match arch {
        Arch::GptOss => (Gating::SoftmaxChosen, false),
        _ => (Gating::SoftmaxAll, true),
    };
    Ok(Moe {
        n_expert,
        n_used,
        n_ff,
        gating,
        normalize,
        weights_scale,
    })
}
