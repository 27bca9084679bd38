//! `memoria run`: tokenize a prompt as llama.cpp's `llama-simple` does (BOS per metadata,
//! special tokens parsed), prefill and generate through the engine (the same sessions, block
//! pool and batching as the server), and print text or one JSON object.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use memoria_kv::{KvElem, NamespaceId};
use memoria_sched::sampling::SamplingParams;
use memoria_sched::{EngineConfig, EngineHandle, Event, GenerateParams};
use serde_json::json;

use crate::load::load_model;

#[derive(Debug, Args)]
pub struct RunArgs {
    /// GGUF model file, or a pulled catalogue name (`smollm2-135m-instruct`).
    #[arg(short = 'm', long)]
    model: PathBuf,
    /// Send the prompt as a user message in the model's chat template (for chat models, as
    /// llama-cli's conversation mode does for one turn).
    #[arg(long = "chat", visible_alias = "cnv")]
    chat: bool,
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
    /// K/V cache element type: f16 (default, as llama.cpp), f32, q8_0 or q4_0.
    #[arg(long = "cache-type", default_value = "f16", value_parser = parse_kv)]
    cache_type: KvElem,
    /// Print one JSON object instead of the text.
    #[arg(long)]
    json: bool,
    /// Write the logits after the last prompt token to this file as a JSON array.
    #[arg(long)]
    logits_out: Option<PathBuf>,
    /// Persistent prefix-state store directory: blocks computed here are kept on disk and
    /// reused by later runs on the same store.
    #[arg(long = "store")]
    store: Option<PathBuf>,
}

/// Parses a K/V element type name.
pub fn parse_kv(s: &str) -> Result<KvElem, String> {
    [KvElem::F16, KvElem::F32, KvElem::Q8_0, KvElem::Q4_0]
        .into_iter()
        .find(|e| e.name() == s.to_ascii_lowercase())
        .ok_or_else(|| format!("unknown cache type {s:?} (use f16, f32, q8_0 or q4_0)"))
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
    let path = super::pull::catalogue::model_arg(&a.model)?;
    let loaded = load_model(&path, a.json)?;
    let load_ms = loaded.load_ms;
    let tok = &loaded.tokenizer;
    let chat_template = crate::load::chat_template(&loaded);
    let prompt_tokens = match (&chat_template, a.chat) {
        (Some(t), true) => {
            let msgs = [memoria_model::chat::ChatMessage::new(
                "user",
                prompt.clone(),
            )];
            memoria_http::chat_tokens(t, tok, &msgs, None)
                .map_err(|e| anyhow::anyhow!("--chat: {}", e.message))?
        }
        (None, true) => anyhow::bail!("--chat: this model has no chat template"),
        (_, false) => tok.encode(&prompt, true, true),
    };
    let is_chat_model = chat_template.is_some();
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
    let mut model = loaded.model;
    let max_context = if a.ctx_size > 0 {
        a.ctx_size
    } else {
        model.hparams().n_ctx_train
    };
    model.set_context(max_context);
    let model = Arc::new(model);
    let store = crate::cmd::store::open_store(a.store.as_deref())?;
    if !a.json {
        eprintln!("memoria: {}", crate::load::summary(&model, max_context));
    }
    let cfg = EngineConfig {
        kv_elem: a.cache_type,
        max_context,
        store: store.clone().map(|s| s as _),
        ..EngineConfig::default()
    };
    let engine = EngineHandle::start(model, Arc::new(loaded.tokenizer), cfg)?;
    let params = GenerateParams {
        sampling,
        max_tokens: a.n_predict,
        stop: a.stop.clone(),
        close_when_done: true,
        ignore_eos: false,
        constraint: None,
        speculation: memoria_sched::Speculate::AUTO,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut stdout = std::io::stdout().lock();
    if !a.json {
        stdout.write_all(prompt.as_bytes())?;
        stdout.flush()?;
    }
    let ns = NamespaceId(0);
    engine
        .namespaces()
        .insert(memoria_tenant::standalone(ns, super::store::CLI_SALT_LABEL));
    let (out, prompt_logits, t) = rt.block_on(async {
        let session = engine.open(ns).await?;
        engine.append(ns, session, prompt_tokens.clone()).await?;
        let started = Instant::now();
        let prompt_logits = engine.prefill(ns, session).await?;
        let prompt_ms = started.elapsed().as_secs_f64() * 1000.0;
        let started = Instant::now();
        let mut stream = engine.generate(ns, session, params)?;
        let (mut tokens, mut text, mut finish) = (Vec::new(), String::new(), "length");
        while let Some(ev) = stream.next().await {
            let piece = match ev {
                Event::Token { id, text, .. } => {
                    tokens.push(id);
                    text.into_string()
                }
                Event::Done {
                    reason, text_tail, ..
                } => {
                    finish = reason.as_str();
                    text_tail
                }
                Event::Error(e) => anyhow::bail!("generation failed: {e}"),
            };
            text.push_str(&piece);
            if !a.json {
                stdout.write_all(piece.as_bytes())?;
                stdout.flush()?;
            }
        }
        let t = Timings {
            prompt_n: prompt_tokens.len(),
            prompt_ms,
            predicted_n: tokens.len(),
            predicted_ms: started.elapsed().as_secs_f64() * 1000.0,
        };
        anyhow::Ok(((tokens, text, finish), prompt_logits, t))
    })?;
    engine.shutdown();
    let (tokens, text, finish) = out;
    if let Some(path) = &a.logits_out {
        let text = serde_json::to_string(&prompt_logits)?;
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    if a.json {
        let obj = json!({
            "prompt_tokens": prompt_tokens,
            "tokens": tokens,
            "text": text,
            "finish_reason": finish,
            "cached_tokens": engine.pool_stats().snapshot().total.hit_tokens,
            "store": store.as_ref().map(|s| s.snapshot()),
            "timings": {
                "load_ms": load_ms,
                "prompt_n": t.prompt_n,
                "prompt_ms": t.prompt_ms,
                "prompt_per_second": rate(t.prompt_n, t.prompt_ms),
                "predicted_n": t.predicted_n,
                "predicted_ms": t.predicted_ms,
                "predicted_per_second": rate(t.predicted_n, t.predicted_ms),
            },
        });
        writeln!(stdout, "{obj}")?;
    } else {
        writeln!(stdout)?;
        eprintln!(
            "prompt: {} tokens, {:.1} ms ({:.1} t/s) | generated: {} tokens, {:.1} ms ({:.1} t/s)",
            t.prompt_n,
            t.prompt_ms,
            rate(t.prompt_n, t.prompt_ms),
            t.predicted_n,
            t.predicted_ms,
            rate(t.predicted_n, t.predicted_ms)
        );
        if is_chat_model && !a.chat && t.predicted_n <= 1 {
            eprintln!(
                "hint: this is a chat model and it ended the text at once; add --chat to send the prompt as a user message in its chat template"
            );
        }
    }
    Ok(())
}

/// Prompt and generation timings of one run.
struct Timings {
    prompt_n: usize,
    prompt_ms: f64,
    predicted_n: usize,
    predicted_ms: f64,
}

fn rate(n: usize, ms: f64) -> f64 {
    if ms > 0.0 {
        n as f64 * 1000.0 / ms
    } else {
        0.0
    }
}
