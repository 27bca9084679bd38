//! Named shapes of released models, for benchmarks that need a model of that size and type
//! without its weights. Each is the model's `config.json` (and the case of llama.cpp's
//! `load_arch_hparams` that recognises it by layer count and width):
//!
//! | preset | source | shape |
//! |---|---|---|
//! | `stories110m` | llama2.c | 12 layers, 768, 12/12 heads, ffn 2048, vocab 32000 |
//! | `qwen3-1.7b` | Qwen/Qwen3-1.7B (`LLM_TYPE_1_7B`) | 28 layers, 2048, 16/8 heads × 128, ffn 6144, vocab 151936, tied |
//! | `qwen3-4b` | Qwen/Qwen3-4B (`LLM_TYPE_4B`) | 36 layers, 2560, 32/8 heads × 128, ffn 9728, vocab 151936, tied |
//! | `qwen3-30b-a3b` | Qwen/Qwen3-30B-A3B (`LLM_TYPE_30B_A3B`) | 48 layers, 2048, 32/4 heads × 128, 128 experts, top 8, expert ffn 768, vocab 151936, untied |
//! | `qwen3-30b-a3b-half` | the same, 24 layers | about half the bytes: fits beside llama.cpp in 24 GiB |
//! | `gemma2-2b` | google/gemma-2-2b (`LLM_TYPE_2B`) | 26 layers, 2304, 8/4 heads × 256, ffn 9216, vocab 256000, window 4096, soft-caps 50/30 |
//! | `phi3-mini` | microsoft/Phi-3.5-mini-instruct (`LLM_TYPE_3B`) | 32 layers, 3072, 32/32 heads × 96, ffn 8192, vocab 32064, LongRoPE 128k over 4k, untied |
//! | `gpt-oss-20b` | openai/gpt-oss-20b (`LLM_TYPE_20B`) | 24 layers, 2880, 64/8 heads × 64, 32 experts, top 4, expert ffn 2880, vocab 201088, window 128, YaRN ×32 over 4k, untied; MXFP4_MOE by default |
//!
//! Contexts, RoPE bases and epsilons are the released models' (Qwen3: 40960, base 1e6; Gemma 2:
//! 8192; Phi-3.5: 131072; gpt-oss: 131072, base 150000). Vocabularies are generated unless the caller copies one (the Qwen
//! presets match llama.cpp's `models/ggml-vocab-qwen2.gguf`, 151936 tokens; `phi3-mini` its
//! `ggml-vocab-phi-3.gguf`, 32064).

use super::{Arch, SynthMoe, SynthSpec, SynthVocab, WeightTypes};

/// Preset names with what they are.
pub const PRESETS: &[(&str, &str)] = &[
    ("stories110m", "llama2.c's stories110M shape (llama)"),
    ("qwen3-1.7b", "Qwen3-1.7B (qwen3)"),
    ("qwen3-4b", "Qwen3-4B (qwen3)"),
    (
        "qwen3-30b-a3b",
        "Qwen3-30B-A3B (qwen3moe, 128 experts, top 8)",
    ),
    (
        "qwen3-30b-a3b-half",
        "Qwen3-30B-A3B with 24 of its 48 layers (qwen3moe)",
    ),
    ("gemma2-2b", "Gemma 2 2B (gemma2)"),
    ("phi3-mini", "Phi-3.5-mini (phi3, LongRoPE)"),
    (
        "gpt-oss-20b",
        "gpt-oss-20b (gpt-oss, 32 experts, top 4; mxfp4_moe by default)",
    ),
];

/// Qwen3's common shape.
fn qwen3(layers: usize, dim: usize, heads: usize, kv_heads: usize, ffn: usize) -> SynthSpec {
    SynthSpec {
        arch: Arch::Qwen3,
        dim,
        layers,
        heads,
        kv_heads,
        head_dim: Some(128),
        ffn,
        moe: None,
        window: None,
        vocab: SynthVocab::Size(151_936),
        ty: WeightTypes::Q4KM,
        context: 40_960,
        seed: 1,
        rope_base: 1_000_000.0,
        tied_embeddings: true,
    }
}

/// The weight types a preset is written in unless asked otherwise: what the model ships as
/// (gpt-oss: MXFP4 experts), else Q4_K_M.
pub fn default_types(name: &str) -> WeightTypes {
    if name.eq_ignore_ascii_case("gpt-oss-20b") {
        WeightTypes::Mxfp4Moe
    } else {
        WeightTypes::Q4KM
    }
}

/// The preset called `name` (case-insensitive), of weight types `ty`.
pub fn preset(name: &str, ty: WeightTypes) -> Option<SynthSpec> {
    let spec = match name.to_ascii_lowercase().as_str() {
        "stories110m" => SynthSpec::stories110m(ty),
        "qwen3-1.7b" => qwen3(28, 2048, 16, 8, 6144),
        "qwen3-4b" => qwen3(36, 2560, 32, 8, 9728),
        n @ ("qwen3-30b-a3b" | "qwen3-30b-a3b-half") => SynthSpec {
            arch: Arch::Qwen3Moe,
            layers: if n.ends_with("half") { 24 } else { 48 },
            heads: 32,
            kv_heads: 4,
            moe: Some(SynthMoe {
                experts: 128,
                used: 8,
                ffn: 768,
            }),
            tied_embeddings: false,
            ..qwen3(48, 2048, 32, 4, 6144)
        },
        "gemma2-2b" => SynthSpec {
            arch: Arch::Gemma2,
            dim: 2304,
            layers: 26,
            heads: 8,
            kv_heads: 4,
            head_dim: Some(256),
            ffn: 9216,
            moe: None,
            window: Some(4096),
            vocab: SynthVocab::Size(256_000),
            ty,
            context: 8192,
            seed: 1,
            rope_base: 10_000.0,
            tied_embeddings: true,
        },
        "phi3-mini" => SynthSpec {
            arch: Arch::Phi3,
            dim: 3072,
            layers: 32,
            heads: 32,
            kv_heads: 32,
            head_dim: None,
            ffn: 8192,
            moe: None,
            window: None,
            vocab: SynthVocab::Size(32_064),
            ty,
            context: 131_072,
            seed: 1,
            rope_base: 10_000.0,
            tied_embeddings: false,
        },
        "gpt-oss-20b" => SynthSpec {
            arch: Arch::GptOss,
            dim: 2880,
            layers: 24,
            heads: 64,
            kv_heads: 8,
            head_dim: Some(64),
            ffn: 2880,
            moe: Some(SynthMoe {
                experts: 32,
                used: 4,
                ffn: 2880,
            }),
            window: Some(128),
            vocab: SynthVocab::Size(201_088),
            ty,
            context: 131_072,
            seed: 1,
            rope_base: 150_000.0,
            tied_embeddings: false,
        },
        _ => return None,
    };
    Some(SynthSpec { ty, ..spec })
}

/// The preset names, comma-separated.
pub fn preset_names() -> String {
    PRESETS
        .iter()
        .map(|(n, _)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}
