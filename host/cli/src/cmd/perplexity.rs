//! `memoria perplexity`: perplexity of a text file as llama.cpp's `llama-perplexity` computes it.
//! The text is tokenized with BOS (special tokens not parsed), cut into chunks of `-c` tokens
//! (the first token of each replaced by BOS when the vocabulary adds one), each chunk decoded from
//! an empty cache, and only the second half of each chunk scored: the negative log-likelihood of
//! every token there given all before it in its chunk. Progress and the running estimate
//! (`[1]12.3456,[2]...`) go to stderr; the final estimate (or `--json`) to stdout.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail};
use clap::Args;
use memoria_model::llama::KvDtype;
use serde_json::json;

use super::forced::{self, Forcing};
use super::softmax;
use crate::load::load_model;

#[derive(Debug, Args)]
pub struct PerplexityArgs {
    /// GGUF model file.
    #[arg(short = 'm', long)]
    model: PathBuf,
    /// Text file to score.
    #[arg(short = 'f', long)]
    file: PathBuf,
    /// Tokens per chunk (llama-perplexity's context size).
    #[arg(short = 'c', long = "ctx-size", default_value_t = 512)]
    ctx: usize,
    /// Tokens per forward pass; several whole chunks share a pass when it holds them.
    #[arg(short = 'b', long = "batch-size", default_value_t = 2048)]
    batch: usize,
    /// Score at most this many chunks (default: all).
    #[arg(long)]
    chunks: Option<usize>,
    /// K/V cache element type: f16 (default, as llama.cpp) or f32.
    #[arg(long = "cache-type", default_value = "f16", value_parser = super::logprobs::parse_dtype)]
    cache_type: KvDtype,
    /// Threads (0: one per core).
    #[arg(short = 't', long, default_value_t = 0)]
    threads: usize,
    /// Print one JSON object on stdout.
    #[arg(long)]
    json: bool,
}

/// Running sums of the negative log-likelihood, as llama-perplexity keeps them.
#[derive(Default)]
struct Nll {
    sum: f64,
    sum2: f64,
    count: usize,
}

impl Nll {
    fn add(&mut self, nll: f64) {
        self.sum += nll;
        self.sum2 += nll * nll;
        self.count += 1;
    }

    fn ppl(&self) -> f64 {
        (self.sum / self.count.max(1) as f64).exp()
    }

    /// The standard error of the perplexity (llama-perplexity's `+/-`), 0 when undefined.
    fn ppl_stderr(&self) -> f64 {
        if self.count < 2 {
            return 0.0;
        }
        let n = self.count as f64;
        let mean = self.sum / n;
        let var = self.sum2 / n - mean * mean;
        if var > 0.0 {
            (var / (n - 1.0)).sqrt() * self.ppl()
        } else {
            0.0
        }
    }
}

pub fn main(a: PerplexityArgs) -> anyhow::Result<()> {
    super::init_threads(a.threads)?;
    if a.ctx < 4 {
        bail!("-c {} is too small: a chunk needs at least 4 tokens", a.ctx);
    }
    if a.batch == 0 {
        bail!("--batch-size must be at least 1");
    }
    let text = std::fs::read_to_string(&a.file)
        .with_context(|| format!("reading {}", a.file.display()))?;
    let mut loaded = load_model(&a.model, a.json)?;
    // Each chunk is a sequence of `-c` tokens (LongRoPE's factors follow, as in llama.cpp).
    loaded.model.set_context(a.ctx);
    let (model, tok) = (Arc::new(loaded.model), Arc::new(loaded.tokenizer));
    let n_ctx_train = model.hparams().n_ctx_train;
    if n_ctx_train > 0 && a.ctx > n_ctx_train {
        eprintln!(
            "perplexity: warning: the model was trained on only {n_ctx_train} context tokens ({} specified)",
            a.ctx
        );
    }
    eprintln!("perplexity: tokenizing the input ..");
    let started = Instant::now();
    let tokens = tok.encode(&text, true, false);
    eprintln!(
        "perplexity: tokenization took {:.3} ms",
        started.elapsed().as_secs_f64() * 1000.0
    );
    if tokens.len() < 2 * a.ctx {
        bail!(
            "you need at least {} tokens to evaluate perplexity with a context of {}; {} tokenizes to only {} tokens",
            2 * a.ctx,
            a.ctx,
            a.file.display(),
            tokens.len()
        );
    }
    let n_chunk = (tokens.len() / a.ctx).min(a.chunks.unwrap_or(usize::MAX));
    if n_chunk == 0 {
        bail!("--chunks 0: nothing to score");
    }
    let bos = tok.add_bos().then(|| tok.bos()).flatten();
    let seqs: Vec<Vec<u32>> = tokens
        .chunks_exact(a.ctx)
        .take(n_chunk)
        .map(|c| {
            let mut s = c.to_vec();
            if let Some(b) = bos {
                s[0] = b;
            }
            s
        })
        .collect();
    let n_seq = (a.batch / a.ctx).max(1);
    eprintln!(
        "perplexity: calculating perplexity over {n_chunk} chunks, n_ctx={}, batch_size={}, n_seq={n_seq}",
        a.ctx, a.batch
    );
    let first = a.ctx / 2;
    let last = a.ctx - 2;
    let f = Forcing {
        seqs: &seqs,
        batch: a.batch,
        kv: a.cache_type,
        from: first,
    };
    let mut nll = Nll::default();
    let started = Instant::now();
    forced::decode(model, tok, &f, |seq, pos, row| {
        if pos > last {
            return Ok(());
        }
        let next = seqs[seq][pos + 1];
        let lp = softmax::logprob(row, next).context("logits row shorter than the vocabulary")?;
        nll.add(-lp);
        if pos == last {
            if seq == 0 {
                progress_eta(started.elapsed().as_secs_f64(), n_chunk, n_seq);
            }
            eprint!("[{}]{:.4},", seq + 1, nll.ppl());
        }
        Ok(())
    })?;
    eprintln!();
    let (ppl, err) = (nll.ppl(), nll.ppl_stderr());
    if !ppl.is_finite() {
        bail!("the perplexity is not finite ({ppl}): the model's logits overflowed");
    }
    let mut out = std::io::stdout().lock();
    if a.json {
        let v = json!({
            "ppl": ppl,
            "ppl_stderr": err,
            "chunks": n_chunk,
            "tokens_scored": nll.count,
            "n_ctx": a.ctx,
        });
        writeln!(out, "{v}")?;
    } else {
        writeln!(out, "Final estimate: PPL = {ppl:.4} +/- {err:.5}")?;
    }
    Ok(())
}

/// llama-perplexity's line after the first pass: its time and the estimated total.
fn progress_eta(first_pass_s: f64, n_chunk: usize, n_seq: usize) {
    let mut total = (first_pass_s * n_chunk as f64 / n_seq as f64) as u64;
    let mut line = format!("perplexity: {first_pass_s:.2} seconds per pass - ETA ");
    if total >= 3600 {
        line.push_str(&format!("{} hours ", total / 3600));
        total %= 3600;
    }
    line.push_str(&format!("{:.2} minutes", total as f64 / 60.0));
    eprintln!("{line}");
}
