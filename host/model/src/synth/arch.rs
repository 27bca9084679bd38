//! The architectures the synthesizer writes, by their GGUF `general.architecture` name, and
//! what each one's file must hold for llama.cpp's loader (`src/models/*.cpp`,
//! `load_arch_hparams` / `load_arch_tensors`): which tensors, which keys, which constants real
//! files of the family carry.

/// Architectures the synthesizer writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Arch {
    Llama,
    Qwen2,
    Qwen3,
    Qwen3Moe,
    Phi3,
    Gemma2,
    Gemma3,
    Granite,
    SmolLm3,
    Olmo2,
    GptOss,
}

/// How the output projection relates to the token embedding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tying {
    /// Either (`output.weight` optional).
    Either,
    /// Always tied: llama.cpp reads `token_embd` as the output and rejects an `output.weight`.
    Always,
    /// Never: llama.cpp requires `output.weight`.
    Never,
}

/// Where Q and K are RMS-normed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum QkNorm {
    None,
    /// One `[head_dim]` weight shared by the heads (Qwen3, Gemma 3).
    PerHead,
    /// Over the whole projection: `[q_dim]` and `[kv_dim]` (OLMo 2).
    Whole,
}

impl Arch {
    /// Every architecture.
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

    /// `general.architecture` value and metadata key prefix.
    pub const fn name(self) -> &'static str {
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

    /// The architecture called `name`.
    pub fn parse(name: &str) -> Option<Arch> {
        Arch::ALL.into_iter().find(|a| a.name() == name)
    }

    /// Every name, comma-separated.
    pub fn names() -> String {
        Arch::ALL.map(Arch::name).join(", ")
    }

    pub(crate) const fn rms_eps(self) -> f32 {
        match self {
            Arch::Llama | Arch::Phi3 | Arch::Granite | Arch::GptOss => 1e-5,
            _ => 1e-6,
        }
    }

    pub(crate) const fn tying(self) -> Tying {
        match self {
            Arch::Gemma2 => Tying::Always,
            Arch::Olmo2 | Arch::GptOss => Tying::Never,
            _ => Tying::Either,
        }
    }

    /// Whether the output is tied to the embedding unless asked otherwise (llama.cpp requires
    /// an output projection of OLMo 2 and gpt-oss).
    pub const fn default_tied(self) -> bool {
        !matches!(self.tying(), Tying::Never)
    }

    /// Whether the architecture is a mixture of experts (its spec needs a [`super::SynthMoe`]).
    pub const fn is_moe(self) -> bool {
        matches!(self, Arch::Qwen3Moe | Arch::GptOss)
    }

    /// The sliding window of the family's released models, for architectures that have one.
    pub(crate) const fn default_window(self) -> Option<usize> {
        match self {
            Arch::Gemma2 => Some(4096),
            Arch::Gemma3 => Some(512),
            Arch::GptOss => Some(128),
            _ => None,
        }
    }

    pub(crate) const fn qk_norm(self) -> QkNorm {
        match self {
            Arch::Qwen3 | Arch::Qwen3Moe | Arch::Gemma3 => QkNorm::PerHead,
            Arch::Olmo2 => QkNorm::Whole,
            _ => QkNorm::None,
        }
    }

    /// Whether llama.cpp sizes the attention as `n_embd` wide, so the head size must be
    /// `n_embd / n_head` (no `key_length` of another value).
    pub(crate) const fn q_dim_is_width(self) -> bool {
        matches!(self, Arch::Llama | Arch::Qwen2 | Arch::Phi3 | Arch::Olmo2)
    }

    /// Whether the converter writes `attention.key_length` / `value_length` even when the head
    /// size is `n_embd / n_head`.
    pub(crate) const fn writes_key_length(self) -> bool {
        matches!(
            self,
            Arch::Qwen3 | Arch::Qwen3Moe | Arch::Gemma2 | Arch::Gemma3 | Arch::GptOss
        )
    }

    /// Q, K and V biases (Qwen2, gpt-oss).
    pub(crate) const fn has_qkv_bias(self) -> bool {
        matches!(self, Arch::Qwen2 | Arch::GptOss)
    }

    /// Norms of the attention and FFN outputs before the residual adds.
    pub(crate) const fn has_post_norms(self) -> bool {
        matches!(self, Arch::Gemma2 | Arch::Gemma3 | Arch::Olmo2)
    }
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
        assert!(Arch::names().contains("qwen3moe, phi3"));
    }
}
