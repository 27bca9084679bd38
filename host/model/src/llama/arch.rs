//! The architectures the forward pass implements, by their GGUF `general.architecture` name,
//! and what each one's graph does differently in llama.cpp (`src/models/*.cpp`): the block
//! structure is one, these are its options.

use memoria_kernels::ops::RopeStyle;

/// Architectures the forward pass implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Arch {
    /// Llama 2/3, TinyLlama, Mistral, SmolLM: RoPE on adjacent pairs, no QKV bias.
    Llama,
    /// Qwen2: QKV bias, NeoX-style RoPE.
    Qwen2,
    /// Qwen3: Q and K RMS-normed per head before RoPE, head size from `key_length`.
    Qwen3,
    /// Qwen3 MoE: Qwen3's attention, a softmax-routed mixture of SwiGLU experts.
    Qwen3Moe,
    /// Phi-3/3.5/4-mini: fused QKV and gate-up projections, LongRoPE factors, Q pre-scaled.
    Phi3,
    /// Gemma 2: embeddings × `sqrt(n_embd)`, soft-capped attention scores and logits, sliding
    /// windows on even layers, four norms per block, GeGLU.
    Gemma2,
    /// Gemma 3 (llama.cpp's `src/models/gemma3.cpp`): embeddings scaled by `sqrt(n_embd)`,
    /// RMS-normed Q and K per head, post-attention and post-FFN norms, GeGLU, NeoX RoPE, and
    /// sliding-window attention with its own RoPE base on 5 of every 6 layers.
    Gemma3,
    /// Granite 3.x: llama with four multipliers (embedding, attention, residual, logit).
    Granite,
    /// SmolLM3: llama with no RoPE on every fourth layer.
    SmolLm3,
    /// OLMo 2: no pre-norms, Q and K normed over the whole projection, post-norms.
    Olmo2,
    /// gpt-oss: attention sinks, biases, YaRN, sliding windows on even layers, and a mixture of
    /// clamped-SwiGLU experts routed by a softmax over the chosen ones.
    GptOss,
}

impl Arch {
    /// Every architecture, in the order of the error message listing them.
    pub const ALL: [Arch; 11] = [
        Arch::Llama,
        Arch::Qwen2,
        Arch::Qwen3,
        Arch::Qwen3Moe,
        Arch::Phi3,
        Arch::Gemma2,
        Arch::Gemma3,
        Arch::Granite,
        Arch::SmolLm3,
        Arch::Olmo2,
        Arch::GptOss,
    ];

    /// The `general.architecture` string.
    pub fn name(self) -> &'static str {
        match self {
            Arch::Llama => "llama",
            Arch::Qwen2 => "qwen2",
            Arch::Qwen3 => "qwen3",
            Arch::Qwen3Moe => "qwen3moe",
            Arch::Phi3 => "phi3",
            Arch::Gemma2 => "gemma2",
            Arch::Gemma3 => "gemma3",
            Arch::Granite => "granite",
            Arch::SmolLm3 => "smollm3",
            Arch::Olmo2 => "olmo2",
            Arch::GptOss => "gpt-oss",
        }
    }

    /// The architecture named `s`, if the forward pass implements it.
    pub fn parse(s: &str) -> Option<Arch> {
        Arch::ALL.into_iter().find(|a| a.name() == s)
    }

    /// The names of every architecture, comma-separated (for error messages).
    pub fn supported() -> String {
        Arch::ALL.map(Arch::name).join(", ")
    }

    /// How RoPE pairs dimensions (llama.cpp's `llama_model_rope_type`).
    pub fn rope_style(self) -> RopeStyle {
        match self {
            Arch::Llama | Arch::Granite | Arch::SmolLm3 => RopeStyle::Norm,
            Arch::Qwen2
            | Arch::Qwen3
            | Arch::Qwen3Moe
            | Arch::Phi3
            | Arch::Gemma2
            | Arch::Gemma3
            | Arch::Olmo2
            | Arch::GptOss => RopeStyle::Neox,
        }
    }

    /// Whether Q is multiplied by the attention scale before the attention (llama.cpp's
    /// `ggml_scale(Qcur, ...)` with `kq_scale = 1`) rather than the scores inside it.
    pub fn prescales_q(self) -> bool {
        matches!(self, Arch::Phi3 | Arch::Gemma2 | Arch::Gemma3)
    }

    /// Whether the residual stream is RMS-normed before attention and FFN (all but OLMo 2).
    pub fn has_pre_norms(self) -> bool {
        self != Arch::Olmo2
    }

    /// Whether the attention and FFN outputs are RMS-normed before their residual adds.
    pub fn has_post_norms(self) -> bool {
        matches!(self, Arch::Gemma2 | Arch::Gemma3 | Arch::Olmo2)
    }

    /// Whether Q and K are RMS-normed (per head, or over the whole projection for OLMo 2).
    pub fn has_qk_norm(self) -> bool {
        matches!(
            self,
            Arch::Qwen3 | Arch::Qwen3Moe | Arch::Gemma3 | Arch::Olmo2
        )
    }

    /// Whether the input embeddings are multiplied by `sqrt(n_embd)` (Gemma).
    pub fn scales_embeddings_by_width(self) -> bool {
        matches!(self, Arch::Gemma2 | Arch::Gemma3)
    }

    /// Whether the model has a mixture of experts instead of a dense FFN.
    pub fn is_moe(self) -> bool {
        matches!(self, Arch::Qwen3Moe | Arch::GptOss)
    }

    /// Whether the output projection must be its own tensor (no tying to the embedding).
    pub fn requires_output(self) -> bool {
        matches!(self, Arch::Olmo2 | Arch::GptOss)
    }

    /// Whether Q, K and V carry biases that must be present.
    pub fn requires_qkv_bias(self) -> bool {
        matches!(self, Arch::Qwen2 | Arch::GptOss)
    }

    /// The sliding-window layer pattern llama.cpp sets when the file gives none
    /// (`set_swa_pattern(n)`: layer `il` is windowed unless `il % n == n - 1`), and whether
    /// the architecture has windows without the `attention.sliding_window` key.
    pub(crate) fn swa_default(self) -> Option<SwaDefault> {
        match self {
            Arch::Gemma2 => Some(SwaDefault {
                period: 2,
                window: Some(4096),
            }),
            Arch::Gemma3 => Some(SwaDefault {
                period: 6,
                window: None,
            }),
            Arch::Olmo2 => Some(SwaDefault {
                period: 4,
                window: None,
            }),
            Arch::GptOss => Some(SwaDefault {
                period: 2,
                window: None,
            }),
            // Phi-3 files carry `sliding_window`, which llama.cpp ignores ("Phi SWA is
            // currently disabled"); the others have no windows.
            Arch::Llama
            | Arch::Qwen2
            | Arch::Qwen3
            | Arch::Qwen3Moe
            | Arch::Phi3
            | Arch::Granite
            | Arch::SmolLm3 => None,
        }
    }
}

/// An architecture's sliding-window defaults.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SwaDefault {
    /// Layer pattern period when the file gives none.
    pub period: usize,
    /// Window when the file gives none; `None`: no key, no windows (except gpt-oss, which
    /// requires the key).
    pub window: Option<usize>,
}

#[cfg(test)]
mod tests {
    use super::Arch;

    #[test]
    fn names_round_trip() {
        for a in Arch::ALL {
            assert_eq!(Arch::parse(a.name()), Some(a));
        }
        assert_eq!(Arch::parse("mamba"), None);
        assert!(Arch::supported().starts_with("llama, qwen2, qwen3"));
    }
}
