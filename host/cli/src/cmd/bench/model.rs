//! `memoria bench -m MODEL`: prompt processing (one sequence, `-p` tokens in batches of up to 512) and
//! generation (`-n` single-token steps) throughput, averaged over repetitions after a warm-up,
//! optionally after `-d` tokens already in the context (untimed), as llama.cpp's `llama-bench`
//! measures pp, tg and `pp @ d`.

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use memoria_model::llama::{BatchToken, ContiguousKv, KvDtype, Model, Scratch};
use serde_json::json;

use crate::load::load_model;

#[derive(Debug, Args)]
pub struct ModelBenchArgs {
    /// GGUF model file.
    #[arg(short = 'm', long, required = true)]
    model: Option<PathBuf>,
    /// Prompt tokens to process (0: skip).
    #[arg(short = 'p', long = "n-prompt", default_value_t = 512)]
    n_prompt: usize,
    /// Tokens to generate (0: skip).
    #[arg(short = 'n', long = "n-gen", default_value_t = 128)]
    n_gen: usize,
    /// Threads (0: one per core).
    #[arg(short = 't', long, default_value_t = 0)]
    threads: usize,
    /// Repetitions of each test.
    #[arg(short = 'r', long, default_value_t = 3)]
    repetitions: usize,
    /// Tokens already in the context before each timed test (llama-bench's `-d`), untimed.
    #[arg(short = 'd', long = "n-depth", default_value_t = 0)]
    depth: usize,
    /// Tokens per prefill forward pass.
    #[arg(short = 'b', long = "batch-size", default_value_t = 512)]
    batch: usize,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

pub fn main(a: ModelBenchArgs) -> anyhow::Result<()> {
    let path = a
        .model
        .clone()
        .ok_or_else(|| anyhow::anyhow!("give a model with -m"))?;
    crate::cmd::init_threads(a.threads)?;
    let mut loaded = load_model(&path, a.json)?;
    let longest = a.depth.saturating_add(a.n_prompt.max(a.n_gen));
    // llama-bench's context: the test's depth plus its tokens.
    loaded.model.set_context(longest.max(1));
    let model = &loaded.model;
    let n_vocab = model.hparams().n_vocab as u32;
    let reps = a.repetitions.max(1);
    let n_ctx = model.hparams().n_ctx_train;
    if n_ctx > 0 && longest > n_ctx {
        anyhow::bail!(
            "-d {} + -p/-n exceed the model's context of {n_ctx} tokens",
            a.depth
        );
    }
    let at = Depth {
        tokens: a.depth,
        batch: a.batch,
        n_vocab,
    };
    let pp = (a.n_prompt > 0).then(|| {
        prompt_rate(model, a.n_prompt.min(16), &at)?;
        mean((0..reps).map(|_| prompt_rate(model, a.n_prompt, &at)))
    });
    let tg = (a.n_gen > 0).then(|| {
        gen_rate(model, a.n_gen.min(4), &at)?;
        mean((0..reps).map(|_| gen_rate(model, a.n_gen, &at)))
    });
    let pp = pp.transpose()?;
    let tg = tg.transpose()?;
    let threads = rayon::current_num_threads();
    if a.json {
        println!(
            "{}",
            json!({
                "model": path.display().to_string(),
                "threads": threads,
                "n_prompt": a.n_prompt,
                "n_gen": a.n_gen,
                "n_depth": a.depth,
                "pp_tokens_per_s": pp,
                "tg_tokens_per_s": tg,
            })
        );
    } else {
        let hp = model.hparams();
        println!(
            "model: {} ({} layers, dim {}, {} threads)",
            path.display(),
            hp.n_layer,
            hp.n_embd,
            threads
        );
        let depth = match a.depth {
            0 => String::new(),
            d => format!(" @ d{d}"),
        };
        if let Some(v) = pp {
            println!("{:<14} {v:10.2} t/s", format!("pp{}{depth}", a.n_prompt));
        }
        if let Some(v) = tg {
            println!("{:<14} {v:10.2} t/s", format!("tg{}{depth}", a.n_gen));
        }
    }
    Ok(())
}

fn mean(rates: impl Iterator<Item = anyhow::Result<f64>>) -> anyhow::Result<f64> {
    let v: Vec<f64> = rates.collect::<Result<_, _>>()?;
    Ok(v.iter().sum::<f64>() / v.len() as f64)
}

/// Deterministic pseudo-random token ids (the ids do not change the cost).
fn token(i: usize, n_vocab: u32) -> u32 {
    ((i as u64).wrapping_mul(2_654_435_761) % u64::from(n_vocab)) as u32
}

/// The untimed context each test starts from.
struct Depth {
    tokens: usize,
    batch: usize,
    n_vocab: u32,
}

/// Forwards positions `range` of the pseudo-random text in batches of `n_batch`, logits for the
/// last position only.
fn prefill(
    model: &Model,
    kv: &mut ContiguousKv,
    scratch: &mut Scratch,
    range: std::ops::Range<usize>,
    at: &Depth,
) -> anyhow::Result<()> {
    let mut start = range.start;
    while start < range.end {
        let end = (start + at.batch.max(1)).min(range.end);
        let batch: Vec<BatchToken> = (start..end)
            .map(|pos| BatchToken {
                token: token(pos, at.n_vocab),
                pos,
                seq: 0,
                logits: pos + 1 == range.end,
            })
            .collect();
        model.forward(&batch, kv, scratch)?;
        start = end;
    }
    Ok(())
}

fn prompt_rate(model: &Model, n: usize, at: &Depth) -> anyhow::Result<f64> {
    let mut kv = model.new_contiguous_kv(KvDtype::F16, 1, at.tokens + n);
    let mut scratch = Scratch::default();
    prefill(model, &mut kv, &mut scratch, 0..at.tokens, at)?;
    let started = Instant::now();
    prefill(model, &mut kv, &mut scratch, at.tokens..at.tokens + n, at)?;
    Ok(n as f64 / started.elapsed().as_secs_f64())
}

fn gen_rate(model: &Model, n: usize, at: &Depth) -> anyhow::Result<f64> {
    let mut kv = model.new_contiguous_kv(KvDtype::F16, 1, at.tokens + n);
    let mut scratch = Scratch::default();
    prefill(model, &mut kv, &mut scratch, 0..at.tokens, at)?;
    let started = Instant::now();
    for pos in at.tokens..at.tokens + n {
        let step = [BatchToken {
            token: token(pos, at.n_vocab),
            pos,
            seq: 0,
            logits: true,
        }];
        model.forward(&step, &mut kv, &mut scratch)?;
    }
    Ok(n as f64 / started.elapsed().as_secs_f64())
}
