//! `memoria bench -m MODEL`: prompt processing (one sequence, `-p` tokens in batches of up to 512) and
//! generation (`-n` single-token steps) throughput, averaged over repetitions after a warm-up,
//! as llama.cpp's `llama-bench` measures pp and tg.

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use memoria_model::llama::{BatchToken, KvDtype, Model, Scratch};
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
    let loaded = load_model(&path, a.json)?;
    let model = &loaded.model;
    let n_vocab = model.hparams().n_vocab as u32;
    let reps = a.repetitions.max(1);
    let pp = (a.n_prompt > 0).then(|| {
        prompt_rate(model, a.n_prompt.min(16), a.batch, n_vocab)?;
        mean((0..reps).map(|_| prompt_rate(model, a.n_prompt, a.batch, n_vocab)))
    });
    let tg = (a.n_gen > 0).then(|| {
        gen_rate(model, a.n_gen.min(4), n_vocab)?;
        mean((0..reps).map(|_| gen_rate(model, a.n_gen, n_vocab)))
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
        if let Some(v) = pp {
            println!("pp{:<6} {v:10.2} t/s", a.n_prompt);
        }
        if let Some(v) = tg {
            println!("tg{:<6} {v:10.2} t/s", a.n_gen);
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

fn prompt_rate(model: &Model, n: usize, n_batch: usize, n_vocab: u32) -> anyhow::Result<f64> {
    let mut kv = model.new_contiguous_kv(KvDtype::F16, 1, n);
    let mut scratch = Scratch::default();
    let started = Instant::now();
    let mut start = 0;
    while start < n {
        let end = (start + n_batch.max(1)).min(n);
        let batch: Vec<BatchToken> = (start..end)
            .map(|pos| BatchToken {
                token: token(pos, n_vocab),
                pos,
                seq: 0,
                logits: pos + 1 == n,
            })
            .collect();
        model.forward(&batch, &mut kv, &mut scratch)?;
        start = end;
    }
    Ok(n as f64 / started.elapsed().as_secs_f64())
}

fn gen_rate(model: &Model, n: usize, n_vocab: u32) -> anyhow::Result<f64> {
    let mut kv = model.new_contiguous_kv(KvDtype::F16, 1, n);
    let mut scratch = Scratch::default();
    let started = Instant::now();
    for pos in 0..n {
        let step = [BatchToken {
            token: token(pos, n_vocab),
            pos,
            seq: 0,
            logits: true,
        }];
        model.forward(&step, &mut kv, &mut scratch)?;
    }
    Ok(n as f64 / started.elapsed().as_secs_f64())
}
