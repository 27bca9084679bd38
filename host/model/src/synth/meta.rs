//! Metadata of a synthetic model: `general.*`, the `{arch}.*` hyper-parameters llama.cpp's
//! `load_hparams` / `load_arch_hparams` read, with the constants the family's converter writes
//! for its released models (Gemma 2's soft-caps, Phi-3.5's LongRoPE, Granite's multipliers,
//! gpt-oss's YaRN), and the tokenizer.

use super::arch::Arch;
use super::vocab::{spm_tokenizer, tokenizer_from_file};
use super::{SynthError, SynthSpec, SynthVocab};
use crate::gguf::{GgufWriter, MetaArray, MetaValue};

/// Phi-3.5's training context before LongRoPE (`original_max_position_embeddings`).
const PHI3_ORIGINAL_CONTEXT: usize = 4096;
/// gpt-oss: YaRN ×32 over 4096 positions.
const GPT_OSS_ORIGINAL_CONTEXT: usize = 4096;
const GPT_OSS_YARN_FACTOR: f32 = 32.0;
/// Granite 3.1 2B's multipliers.
const GRANITE_SCALES: [(&str, f32); 4] = [
    ("attention.scale", 0.015_625),
    ("embedding_scale", 12.0),
    ("residual_scale", 0.22),
    ("logit_scale", 8.0),
];
/// Gemma 2's soft-caps of the attention scores and of the logits.
const GEMMA2_SOFTCAPS: (f32, f32) = (50.0, 30.0);
/// Tokens llama.cpp looks up by text in a model whose name says Phi-3.
const PHI3_TOKENS: [&str; 4] = ["<unk>", "<s>", "</s>", "<|endoftext|>"];

fn u32_of(v: usize) -> MetaValue {
    MetaValue::U32(u32::try_from(v).unwrap_or(u32::MAX))
}

/// Writes general/arch/tokenizer metadata; returns the vocabulary size.
pub(super) fn add_metadata(w: &mut GgufWriter, spec: &SynthSpec) -> Result<usize, SynthError> {
    let arch = spec.arch;
    let a = arch.name();
    w.set("general.architecture", MetaValue::String(a.to_owned()))
        .set(
            "general.name",
            MetaValue::String(format!("synth-{a}-{}", spec.ty)),
        )
        .set("general.file_type", MetaValue::U32(spec.ty.file_type()));
    if spec.ty.is_quantized() {
        w.set("general.quantization_version", MetaValue::U32(2));
    }
    let tokenizer = tokenizer(spec)?;
    let tokens = tokenizer
        .iter()
        .find(|(k, _)| k == "tokenizer.ggml.tokens")
        .and_then(|(_, v)| v.as_array())
        .and_then(MetaArray::as_strings);
    let vocab_size = tokens.map_or(0, <[String]>::len);
    if arch == Arch::Phi3
        && let Some(missing) = PHI3_TOKENS
            .iter()
            .find(|t| !tokens.is_some_and(|all| all.iter().any(|s| s == *t)))
    {
        return Err(SynthError::BadSpec(format!(
            "a phi3 model's vocabulary must have the token {missing:?} (llama.cpp looks it up)"
        )));
    }
    let mut set = |key: &str, value: MetaValue| {
        w.set(&format!("{a}.{key}"), value);
    };
    set("context_length", u32_of(spec.context));
    set("embedding_length", u32_of(spec.dim));
    set("block_count", u32_of(spec.layers));
    set("feed_forward_length", u32_of(spec.ffn));
    set("attention.head_count", u32_of(spec.heads));
    set("attention.head_count_kv", u32_of(spec.kv_heads));
    set(
        "attention.layer_norm_rms_epsilon",
        MetaValue::F32(arch.rms_eps()),
    );
    set("rope.dimension_count", u32_of(spec.head_dim()));
    set("rope.freq_base", MetaValue::F32(spec.rope_base));
    set("vocab_size", u32_of(vocab_size));
    if arch.writes_key_length() || spec.q_dim() != spec.dim {
        set("attention.key_length", u32_of(spec.head_dim()));
        set("attention.value_length", u32_of(spec.head_dim()));
    }
    if let Some(m) = spec.moe {
        set("expert_count", u32_of(m.experts));
        set("expert_used_count", u32_of(m.used));
        set("expert_feed_forward_length", u32_of(m.ffn));
    }
    if let Some(window) = spec.window() {
        set("attention.sliding_window", u32_of(window));
    }
    match arch {
        Arch::Phi3 => {
            set(
                "rope.scaling.original_context_length",
                u32_of(PHI3_ORIGINAL_CONTEXT),
            );
            // Phi3MiniModel's converter: sqrt(1 + ln(scale) / ln(original)) when scaled.
            let scale = spec.context as f64 / PHI3_ORIGINAL_CONTEXT as f64;
            let attn_factor = if scale <= 1.0 {
                1.0
            } else {
                (1.0 + scale.ln() / (PHI3_ORIGINAL_CONTEXT as f64).ln()).sqrt()
            };
            set(
                "rope.scaling.attn_factor",
                MetaValue::F32(attn_factor as f32),
            );
        }
        Arch::Gemma2 => {
            set("attn_logit_softcapping", MetaValue::F32(GEMMA2_SOFTCAPS.0));
            set("final_logit_softcapping", MetaValue::F32(GEMMA2_SOFTCAPS.1));
        }
        Arch::Granite => {
            for (key, v) in GRANITE_SCALES {
                set(key, MetaValue::F32(v));
            }
        }
        Arch::GptOss => {
            set("rope.scaling.type", MetaValue::String("yarn".into()));
            set("rope.scaling.factor", MetaValue::F32(GPT_OSS_YARN_FACTOR));
            set(
                "rope.scaling.original_context_length",
                u32_of(GPT_OSS_ORIGINAL_CONTEXT),
            );
        }
        _ => {}
    }
    for (key, value) in tokenizer {
        w.set(&key, value);
    }
    Ok(vocab_size)
}

/// The `tokenizer.*` keys: copied, or generated (with Phi-3's `<|endoftext|>` last for phi3).
fn tokenizer(spec: &SynthSpec) -> Result<Vec<(String, MetaValue)>, SynthError> {
    Ok(match &spec.vocab {
        SynthVocab::FromFile(path) => tokenizer_from_file(path)?,
        SynthVocab::Size(n) if spec.arch == Arch::Phi3 => spm_tokenizer(*n, &["<|endoftext|>"]),
        SynthVocab::Size(n) => spm_tokenizer(*n, &[]),
    })
}
