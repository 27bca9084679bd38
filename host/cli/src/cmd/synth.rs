//! `memoria model synth`: writes a random-weight model of a real shape (e.g. the 110M llama
//! shape) as GGUF, for benchmarks and tests; never downloads anything.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use clap::{Args, Subcommand};
use memoria_kernels::GgmlType;
use memoria_model::gguf::MetaValue;
use memoria_model::synth::{Arch as SynthArch, SynthSpec, SynthVocab, synthesize};

#[derive(Debug, Subcommand)]
pub enum ModelCommand {
    /// Write a random-weight model of the given shape.
    Synth(SynthArgs),
}

#[derive(Debug, Args)]
pub struct SynthArgs {
    /// Output GGUF path.
    out: PathBuf,
    /// Architecture: llama or qwen2.
    #[arg(long, default_value = "llama")]
    arch: String,
    /// Embedding width.
    #[arg(long, default_value_t = 768)]
    dim: usize,
    /// Transformer blocks.
    #[arg(long, default_value_t = 12)]
    layers: usize,
    /// Attention heads.
    #[arg(long, default_value_t = 12)]
    heads: usize,
    /// K/V heads (defaults to --heads).
    #[arg(long)]
    kv_heads: Option<usize>,
    /// Feed-forward width.
    #[arg(long, default_value_t = 2048)]
    ffn: usize,
    /// Copy the tokenizer from this GGUF file (e.g. a vocab-only file).
    #[arg(long, conflicts_with = "vocab_size")]
    vocab_from: Option<PathBuf>,
    /// Generate a SentencePiece-style vocabulary of this size instead.
    #[arg(long)]
    vocab_size: Option<usize>,
    /// Weight type: f32, f16, bf16, q8_0, q4_0, q4_k, q6_k.
    #[arg(long = "type", default_value = "q8_0")]
    ty: String,
    /// Training context length written to the metadata.
    #[arg(long, default_value_t = 2048)]
    context: usize,
    /// RoPE frequency base.
    #[arg(long, default_value_t = 10000.0)]
    rope_base: f32,
    /// Write a separate output projection instead of tying it to the embedding.
    #[arg(long)]
    untied: bool,
    /// Random seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write this file's text (Jinja) as the model's `tokenizer.chat_template`, replacing one
    /// copied with --vocab-from.
    #[arg(long, value_name = "FILE")]
    chat_template: Option<PathBuf>,
}

/// The text of a `--chat-template` file (not empty).
fn read_template(path: &std::path::Path) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--chat-template: reading {}", path.display()))?;
    anyhow::ensure!(
        !text.trim().is_empty(),
        "--chat-template: {} is empty",
        path.display()
    );
    Ok(text)
}

pub fn main(c: ModelCommand) -> anyhow::Result<()> {
    let ModelCommand::Synth(a) = c;
    let arch = match a.arch.as_str() {
        "llama" => SynthArch::Llama,
        "qwen2" => SynthArch::Qwen2,
        other => anyhow::bail!("--arch {other:?}: use llama or qwen2"),
    };
    let ty = parse_weight_type(&a.ty)?;
    let vocab = match (a.vocab_from, a.vocab_size) {
        (Some(p), None) => SynthVocab::FromFile(p),
        (None, Some(n)) => SynthVocab::Size(n),
        (None, None) => SynthVocab::Size(512),
        (Some(_), Some(_)) => anyhow::bail!("give --vocab-from or --vocab-size, not both"),
    };
    let spec = SynthSpec {
        arch,
        dim: a.dim,
        layers: a.layers,
        heads: a.heads,
        kv_heads: a.kv_heads.unwrap_or(a.heads),
        ffn: a.ffn,
        vocab,
        ty,
        context: a.context,
        seed: a.seed,
        rope_base: a.rope_base,
        tied_embeddings: !a.untied,
    };
    let template = a.chat_template.as_deref().map(read_template).transpose()?;
    let started = Instant::now();
    let mut model = synthesize(&spec).with_context(|| format!("building {}", a.out.display()))?;
    if let Some(text) = template {
        model.set("tokenizer.chat_template", MetaValue::String(text));
    }
    model
        .write_to(&a.out)
        .with_context(|| format!("writing {}", a.out.display()))?;
    let size = std::fs::metadata(&a.out).map(|m| m.len()).unwrap_or(0);
    eprintln!(
        "wrote {} ({size} bytes) in {:.1} s",
        a.out.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Parses `--type`: any weight type memoria implements (not the activation-only q8_1 / q8_k).
fn parse_weight_type(name: &str) -> anyhow::Result<GgmlType> {
    GgmlType::parse(name)
        .filter(|t| !t.is_activation_only())
        .with_context(|| format!("--type {name:?}: use {}", weight_type_names()))
}

/// The `--type` values accepted, comma-separated: every weight type memoria implements.
fn weight_type_names() -> String {
    GgmlType::ALL
        .into_iter()
        .filter(|t| !t.is_activation_only())
        .map(GgmlType::name)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_accepts_every_weight_type() {
        for t in GgmlType::ALL {
            assert_eq!(
                parse_weight_type(t.name()).ok(),
                (!t.is_activation_only()).then_some(t),
                "{t}"
            );
        }
        for name in ["q4_1", "Q5_0", "q8_0", "q4_k", "q6_k"] {
            assert!(parse_weight_type(name).is_ok(), "{name}");
        }
        let err = parse_weight_type("q8_1").unwrap_err().to_string();
        assert!(err.contains("q4_1") && !err.contains("q8_k"), "{err}");
    }

    #[test]
    fn chat_template_files_must_exist_and_hold_text() {
        let dir = std::env::temp_dir().join(format!("memoria-synth-tpl-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = dir.join("empty.jinja");
        std::fs::write(&empty, " \n").unwrap();
        assert!(
            read_template(&empty)
                .unwrap_err()
                .to_string()
                .contains("empty")
        );
        assert!(read_template(&dir.join("missing.jinja")).is_err());
        let ok = dir.join("t.jinja");
        std::fs::write(&ok, "{{ messages }}").unwrap();
        assert_eq!(read_template(&ok).unwrap(), "{{ messages }}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
