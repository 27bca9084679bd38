//! `memoria run`: tokenize a prompt as llama.cpp's `llama-simple` does (BOS per metadata,
//! special tokens parsed), generate, and print text or one JSON object.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use memoria_model::llama::KvDtype;
use memoria_sched::generate::{GenerateRequest, generate};
use memoria_sched::sampling::SamplingParams;
use serde_json::json;

use crate::load::load_model;

#[derive(Debug, Args)]
pub struct RunArgs {
    /// GGUF model file.
    #[arg(short = 'm', long)]
    model: PathBuf,
    /// Prompt text.
    #[arg(short = 'p', long, conflicts_with = "file")]
    prompt: Option<String>,
    /// Read the prompt from a file.
    #[arg(short = 'f', long)]
    file: Option<PathBuf>,
    /// Tokens to generate.
    #[arg(short = 'n', long = "n-predict", default_value_t = 64)]
    n_predict: usize,
    /// Temperature; 0 samples greedily.
    #[arg(long, default_value_t = 0.8)]
    temp: f32,
    /// Random seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Keep only the K most likely tokens (0: off).
    #[arg(long, default_value_t = 40)]
    top_k: usize,
    /// Nucleus sampling threshold (1: off).
    #[arg(long, default_value_t = 0.95)]
    top_p: f32,
    /// Minimum probability relative to the most likely token (0: off).
    #[arg(long, default_value_t = 0.05)]
    min_p: f32,
    /// Repetition penalty (1: off).
    #[arg(long, default_value_t = 1.0)]
    repeat_penalty: f32,
    /// Stop when this text is generated (repeatable).
    #[arg(long)]
    stop: Vec<String>,
    /// Threads (0: one per core).
    #[arg(short = 't', long, default_value_t = 0)]
    threads: usize,
    /// Context size (0: prompt + n-predict).
    #[arg(short = 'c', long = "ctx-size", default_value_t = 0)]
    ctx_size: usize,
    /// K/V cache element type: f16 (default, as llama.cpp) or f32.
    #[arg(long = "cache-type", default_value = "f16", value_parser = parse_kv)]
    cache_type: KvDtype,
    /// Print one JSON object instead of the text.
    #[arg(long)]
    json: bool,
    /// Write the logits after the last prompt token to this file as a JSON array.
    #[arg(long)]
    logits_out: Option<PathBuf>,
}

fn parse_kv(s: &str) -> Result<KvDtype, String> {
    KvDtype::parse(s).ok_or_else(|| format!("unknown cache type {s:?} (use f16 or f32)"))
}

pub fn main(a: RunArgs) -> anyhow::Result<()> {
    super::init_threads(a.threads)?;
    let prompt = match (&a.prompt, &a.file) {
        (Some(p), _) => p.clone(),
        (None, Some(f)) => {
            std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?
        }
        (None, None) => anyhow::bail!("give a prompt with -p TEXT or -f FILE"),
    };
    let loaded = load_model(&a.model, a.json)?;
    let tok = &loaded.tokenizer;
    let prompt_tokens = tok.encode(&prompt, true, true);
    let sampling = SamplingParams {
        temperature: a.temp,
        top_k: a.top_k,
        top_p: a.top_p,
        min_p: a.min_p,
        repeat_penalty: a.repeat_penalty,
        seed: a.seed,
        ..SamplingParams::default()
    };
    sampling.validate().context("sampling parameters")?;
    let req = GenerateRequest {
        prompt: prompt_tokens.clone(),
        max_tokens: a.n_predict,
        sampling,
        stop: a.stop.clone(),
        kv_dtype: a.cache_type,
        n_ctx: a.ctx_size,
        n_batch: 512,
    };
    let mut stdout = std::io::stdout().lock();
    if !a.json {
        stdout.write_all(prompt.as_bytes())?;
        stdout.flush()?;
    }
    let out = generate(&loaded.model, tok, &req, |text| {
        if !a.json {
            let _ = stdout.write_all(text.as_bytes());
            let _ = stdout.flush();
        }
    })?;
    if let Some(path) = &a.logits_out {
        let text = serde_json::to_string(&out.prompt_logits)?;
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    let t = out.timings;
    if a.json {
        let obj = json!({
            "prompt_tokens": prompt_tokens,
            "tokens": out.tokens,
            "text": out.text,
            "finish_reason": out.stop_reason.as_str(),
            "timings": {
                "load_ms": loaded.load_ms,
                "prompt_n": t.prompt_tokens,
                "prompt_ms": t.prompt_ms,
                "prompt_per_second": t.prompt_per_s(),
                "predicted_n": t.generated_tokens,
                "predicted_ms": t.generate_ms,
                "predicted_per_second": t.generate_per_s(),
            },
        });
        writeln!(stdout, "{obj}")?;
    } else {
        writeln!(stdout)?;
        eprintln!(
            "prompt: {} tokens, {:.1} ms ({:.1} t/s) | generated: {} tokens, {:.1} ms ({:.1} t/s)",
            t.prompt_tokens,
            t.prompt_ms,
            t.prompt_per_s(),
            t.generated_tokens,
            t.generate_ms,
            t.generate_per_s()
        );
    }
    Ok(())
}
