//! `memoria model synth`: writes a random-weight model of a real shape (a named preset such as
//! `qwen3-4b`, or any architecture and sizes) as GGUF, of one weight type or the Q4_K_M mix,
//! streaming it to disk with a progress bar; never downloads anything.

mod spec;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use memoria_model::gguf::MetaValue;
use memoria_model::synth::synthesize;

use crate::load::{human_count, type_mix};

#[derive(Debug, Subcommand)]
pub enum ModelCommand {
    /// Write a random-weight model of the given shape.
    Synth(SynthArgs),
}

#[derive(Debug, Args)]
pub struct SynthArgs {
    /// Output GGUF path.
    out: PathBuf,
    /// A released model's shape: stories110m, qwen3-1.7b, qwen3-4b, qwen3-30b-a3b,
    /// qwen3-30b-a3b-half, gemma2-2b, phi3-mini, gpt-oss-20b. The flags below override its
    /// values.
    #[arg(long)]
    preset: Option<String>,
    /// Architecture: llama, qwen2, qwen3, qwen3moe, phi3, gemma2, gemma3, granite, smollm3,
    /// olmo2, gpt-oss (default llama, or the preset's).
    #[arg(long)]
    arch: Option<String>,
    /// Embedding width (default 768).
    #[arg(long)]
    dim: Option<usize>,
    /// Transformer blocks (default 12).
    #[arg(long)]
    layers: Option<usize>,
    /// Attention heads (default 12).
    #[arg(long)]
    heads: Option<usize>,
    /// K/V heads (defaults to --heads, or the preset's).
    #[arg(long)]
    kv_heads: Option<usize>,
    /// Head size (default dim / heads).
    #[arg(long)]
    head_dim: Option<usize>,
    /// Feed-forward width (default 2048).
    #[arg(long)]
    ffn: Option<usize>,
    /// Experts per layer (qwen3moe, gpt-oss).
    #[arg(long)]
    experts: Option<usize>,
    /// Experts per token.
    #[arg(long)]
    experts_used: Option<usize>,
    /// Rows of each expert's gate and up matrices.
    #[arg(long)]
    expert_ffn: Option<usize>,
    /// Sliding window (gemma2, gemma3, gpt-oss; default the family's).
    #[arg(long)]
    window: Option<usize>,
    /// Copy the tokenizer from this GGUF file (e.g. a vocab-only file).
    #[arg(long, conflicts_with = "vocab_size")]
    vocab_from: Option<PathBuf>,
    /// Generate a SentencePiece-style vocabulary of this size instead (default 512, or the
    /// preset's).
    #[arg(long)]
    vocab_size: Option<usize>,
    /// Weight types: q4_k_m or mxfp4_moe (llama-quantize's mixes; with --preset the default is
    /// what the model ships as: mxfp4_moe for gpt-oss, else q4_k_m) or one type for every
    /// matrix: f32, f16, bf16, q8_0, q4_0, q4_k, q6_k, mxfp4, ... (default q8_0).
    #[arg(long = "type")]
    ty: Option<String>,
    /// Training context length written to the metadata (default 2048, or the preset's).
    #[arg(long)]
    context: Option<usize>,
    /// RoPE frequency base (default 10000, or the preset's).
    #[arg(long)]
    rope_base: Option<f32>,
    /// Write a separate output projection instead of tying it to the embedding.
    #[arg(long, conflicts_with = "tied")]
    untied: bool,
    /// Tie the output projection to the embedding (the default where the architecture allows).
    #[arg(long)]
    tied: bool,
    /// Random seed (default 1).
    #[arg(long)]
    seed: Option<u64>,
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
    let spec = spec::resolve(&a)?;
    let template = a.chat_template.as_deref().map(read_template).transpose()?;
    let started = Instant::now();
    let mut model = synthesize(&spec).with_context(|| format!("building {}", a.out.display()))?;
    if let Some(text) = template {
        model.set("tokenizer.chat_template", MetaValue::String(text));
    }
    let params: u64 = model
        .tensor_shapes()
        .map(|(_, dims, _)| dims.iter().product::<u64>())
        .sum();
    let mix = type_mix(model.tensor_shapes().map(|(_, _, ty)| ty));
    let total = model.file_size();
    let bar = if std::io::stderr().is_terminal() {
        ProgressBar::new(total)
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        ProgressStyle::with_template(
            "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} ETA {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    bar.set_message(format!("writing {}", a.out.display()));
    let written = model.write_to_reporting(&a.out, &mut |n| bar.set_position(n));
    bar.finish_and_clear();
    written.with_context(|| format!("writing {}", a.out.display()))?;
    eprintln!(
        "wrote {} ({total} bytes) in {:.1} s: {}, {} parameters, {mix}",
        a.out.display(),
        started.elapsed().as_secs_f64(),
        spec.arch.name(),
        human_count(params),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
