//! `memoria bench batched`: llama-batched-bench's workload through the engine. For each B in
//! `--npl`, B sessions with distinct `--npp`-token prompts prefill together, then decode `--ntg`
//! tokens each in continuous batches; prints its table (PP, TG, B, N_KV, T_PP, S_PP, T_TG, S_TG,
//! T, S) or, with `--json`, an array of rows with those fields in lower case.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use clap::Args;
use memoria_kv::NamespaceId;
use memoria_sched::{EngineConfig, EngineHandle, Event, GenerateParams};
use memoria_tenant::standalone;
use serde::Serialize;

use super::tokens::pseudo_tokens;
use crate::load::load_model;

#[derive(Debug, Args)]
pub struct BatchedArgs {
    /// GGUF model file.
    #[arg(short = 'm', long)]
    model: PathBuf,
    /// Prompt tokens per session.
    #[arg(long, default_value_t = 512)]
    npp: usize,
    /// Generated tokens per session.
    #[arg(long, default_value_t = 128)]
    ntg: usize,
    /// Comma-separated session counts.
    #[arg(long, default_value = "1,4,16", value_delimiter = ',')]
    npl: Vec<usize>,
    /// Threads (0: one per core).
    #[arg(short = 't', long, default_value_t = 0)]
    threads: usize,
    /// Tokens per forward pass.
    #[arg(short = 'b', long = "batch-size", default_value_t = 512)]
    batch: usize,
    /// Print a JSON array of rows.
    #[arg(long)]
    json: bool,
}

/// One row of the table.
#[derive(Debug, Serialize)]
struct Row {
    pp: usize,
    tg: usize,
    b: usize,
    n_kv: usize,
    t_pp: f64,
    s_pp: f64,
    t_tg: f64,
    s_tg: f64,
    t: f64,
    s: f64,
}

pub fn main(a: BatchedArgs) -> anyhow::Result<()> {
    crate::cmd::init_threads(a.threads)?;
    let mut loaded = load_model(&a.model, a.json)?;
    loaded.model.set_context(a.npp + a.ntg);
    let n_vocab = loaded.model.hparams().n_vocab;
    let n_ctx = loaded.model.hparams().n_ctx_train;
    anyhow::ensure!(
        a.npp + a.ntg <= n_ctx,
        "npp + ntg = {} exceeds the model context {n_ctx}",
        a.npp + a.ntg
    );
    let max_b = a.npl.iter().copied().max().unwrap_or(1);
    let model = Arc::new(loaded.model);
    let kv_row = model.hparams().n_layer * model.hparams().kv_dim() * 2 * 2;
    let budget = (max_b * (a.npp + a.ntg + 32) * kv_row).max(64 << 20);
    let cfg = EngineConfig {
        kv_budget_bytes: budget,
        step_tokens: a.batch,
        ..EngineConfig::default()
    };
    let engine = EngineHandle::start(model, Arc::new(loaded.tokenizer), cfg)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut rows = Vec::new();
    if !a.json {
        println!(
            "|    PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |      T s |    S t/s |"
        );
        println!(
            "|-------|--------|------|--------|----------|----------|----------|----------|----------|----------|"
        );
    }
    for (round, &b) in a.npl.iter().enumerate() {
        let row = rt.block_on(run_round(&engine, round, b, a.npp, a.ntg, n_vocab))?;
        if !a.json {
            println!(
                "| {:5} | {:6} | {:4} | {:6} | {:8.3} | {:8.2} | {:8.3} | {:8.2} | {:8.3} | {:8.2} |",
                row.pp,
                row.tg,
                row.b,
                row.n_kv,
                row.t_pp,
                row.s_pp,
                row.t_tg,
                row.s_tg,
                row.t,
                row.s
            );
        }
        rows.push(row);
    }
    engine.shutdown();
    if a.json {
        println!("{}", serde_json::to_string(&rows)?);
    }
    Ok(())
}

async fn run_round(
    e: &EngineHandle,
    round: usize,
    b: usize,
    npp: usize,
    ntg: usize,
    n_vocab: usize,
) -> anyhow::Result<Row> {
    // A namespace per round, so no round reuses another's cached prompts.
    let ns = NamespaceId(u32::try_from(round).unwrap_or(u32::MAX - 1));
    e.namespaces()
        .insert(standalone(ns, &format!("bench-batched-{round}")));
    let mut sessions = Vec::with_capacity(b);
    for i in 0..b {
        let s = e.open(ns).await?;
        e.append(
            ns,
            s,
            pseudo_tokens(((round as u64) << 32) | i as u64, npp, n_vocab),
        )
        .await?;
        sessions.push(s);
    }
    let started = Instant::now();
    let prefills: Vec<_> = sessions.iter().map(|&s| e.prefill(ns, s)).collect();
    for p in prefills {
        p.await?;
    }
    let t_pp = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let mut streams = Vec::with_capacity(b);
    for &s in &sessions {
        // llama-batched-bench does not speculate: neither does its counterpart.
        let params = GenerateParams {
            close_when_done: true,
            ignore_eos: true,
            speculation: memoria_sched::Speculate::OFF,
            ..GenerateParams::greedy(ntg)
        };
        streams.push(e.generate(ns, s, params)?);
    }
    for mut st in streams {
        while let Some(ev) = st.next().await {
            match ev {
                Event::Token { .. } => {}
                Event::Done { .. } => break,
                Event::Error(err) => anyhow::bail!("generation failed: {err}"),
            }
        }
    }
    let t_tg = started.elapsed().as_secs_f64();
    let n_kv = b * (npp + ntg);
    let t = t_pp + t_tg;
    Ok(Row {
        pp: npp,
        tg: ntg,
        b,
        n_kv,
        t_pp,
        s_pp: (b * npp) as f64 / t_pp,
        t_tg,
        s_tg: (b * ntg) as f64 / t_tg,
        t,
        s: n_kv as f64 / t,
    })
}
