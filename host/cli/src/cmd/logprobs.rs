//! `memoria logprobs`: the top-k log-softmax after every position of a sequence, decoded in one
//! teacher-forced pass (the sequence given as text, tokenized as `memoria run` does, or as ids).
//! `--json` prints `{"ids":[...],"top_logprobs":[[[id,logprob],...],...]}`; `top_logprobs[i]`
//! ranks the candidates for the token after position `i`, best first.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::Args;
use memoria_model::llama::KvDtype;
use serde_json::json;

use super::forced::{self, Forcing};
use super::softmax;
use crate::load::load_model;

#[derive(Debug, Args)]
pub struct LogprobsArgs {
    /// GGUF model file.
    #[arg(short = 'm', long)]
    model: PathBuf,
    /// Text, tokenized as `memoria run` does (BOS per metadata, special tokens parsed).
    #[arg(
        short = 'p',
        long,
        conflicts_with = "ids",
        required_unless_present = "ids"
    )]
    prompt: Option<String>,
    /// Token ids, comma-separated (used as given: no BOS added).
    #[arg(long, value_delimiter = ',')]
    ids: Option<Vec<u32>>,
    /// Candidates per position.
    #[arg(long, default_value_t = 5)]
    top: usize,
    /// Tokens per forward pass.
    #[arg(short = 'b', long = "batch-size", default_value_t = 512)]
    batch: usize,
    /// K/V cache element type: f16 (default, as llama.cpp) or f32.
    #[arg(long = "cache-type", default_value = "f16", value_parser = parse_dtype)]
    cache_type: KvDtype,
    /// Threads (0: one per core).
    #[arg(short = 't', long, default_value_t = 0)]
    threads: usize,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

/// Parses a contiguous-cache element type (`f32` or `f16`).
pub fn parse_dtype(s: &str) -> Result<KvDtype, String> {
    KvDtype::parse(s).ok_or_else(|| format!("unknown cache type {s:?} (use f16 or f32)"))
}

/// Most candidates `--top` may ask for.
const MAX_TOP: usize = 1000;

pub fn main(a: LogprobsArgs) -> anyhow::Result<()> {
    super::init_threads(a.threads)?;
    if a.top == 0 || a.top > MAX_TOP {
        bail!("--top {} is out of range (1..={MAX_TOP})", a.top);
    }
    if a.batch == 0 {
        bail!("--batch-size must be at least 1");
    }
    let mut loaded = load_model(&a.model, a.json)?;
    let ids = match (&a.prompt, &a.ids) {
        (Some(p), _) => loaded.tokenizer.encode(p, true, true),
        (None, Some(ids)) => ids.clone(),
        (None, None) => bail!("give the sequence with -p TEXT or --ids 1,2,3"),
    };
    if ids.is_empty() {
        bail!("the sequence is empty");
    }
    // The context is the sequence, as llama.cpp's tools size it (LongRoPE's factors follow).
    loaded.model.set_context(ids.len());
    let model = Arc::new(loaded.model);
    let tokenizer = Arc::new(loaded.tokenizer);
    let hp = model.hparams();
    if let Some((i, id)) = ids
        .iter()
        .enumerate()
        .find(|(_, id)| **id as usize >= hp.n_vocab)
    {
        bail!(
            "token {id} at index {i} is not in the vocabulary (n_vocab {})",
            hp.n_vocab
        );
    }
    if hp.n_ctx_train > 0 && ids.len() > hp.n_ctx_train {
        bail!(
            "the sequence has {} tokens, more than the model's context of {}",
            ids.len(),
            hp.n_ctx_train
        );
    }
    let seqs = [ids];
    let f = Forcing {
        seqs: &seqs,
        batch: a.batch,
        kv: a.cache_type,
        from: 0,
    };
    let ids = &seqs[0];
    let mut top = Vec::with_capacity(ids.len());
    let mut next_lp = Vec::with_capacity(ids.len());
    forced::decode(model.clone(), tokenizer.clone(), &f, |_, pos, row| {
        top.push(softmax::top_k(row, a.top));
        next_lp.push(ids.get(pos + 1).and_then(|&n| softmax::logprob(row, n)));
        Ok(())
    })?;
    let mut out = std::io::stdout().lock();
    if a.json {
        let top_json: Vec<Vec<serde_json::Value>> = top
            .iter()
            .map(|cands| cands.iter().map(|(id, lp)| json!([id, lp])).collect())
            .collect();
        writeln!(out, "{}", json!({ "ids": ids, "top_logprobs": top_json }))?;
        return Ok(());
    }
    let piece = |id: u32| {
        format!(
            "{:?}",
            String::from_utf8_lossy(&tokenizer.token_to_piece(id, true))
        )
    };
    writeln!(
        out,
        "  pos      id piece            | next token: logprob | top {} candidates: id piece logprob",
        a.top
    )?;
    for (i, (id, cands)) in ids.iter().zip(&top).enumerate() {
        let next = match (ids.get(i + 1), next_lp[i]) {
            (Some(n), Some(lp)) => format!("{n} {} {lp:.4}", piece(*n)),
            _ => "-".to_string(),
        };
        write!(out, "{i:5} {id:7} {:<16} | {next:<28} |", piece(*id))?;
        for (c, lp) in cands {
            write!(out, " {c} {} {lp:.4}", piece(*c))?;
        }
        writeln!(out)?;
    }
    out.flush().context("writing the table")
}
