//! `memoria bench speculate`: decode speed with speculative decoding off and on, on the same
//! requests (the workloads in `workloads`), at each temperature. Each run gets a namespace of
//! its own, so no run drafts from another's memory; the tokens of the two runs must be equal
//! (speculation changes speed only), and a difference is an error. Prints a table, or with
//! `--json` one row per workload and temperature. With `--addr` the requests go to a running
//! server instead (see `remote`).

mod remote;
mod workloads;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use clap::Args;
use memoria_kv::NamespaceId;
use memoria_sched::sampling::SamplingParams;
use memoria_sched::{EngineConfig, EngineHandle, Event, GenerateParams, Speculate};
use memoria_tenant::standalone;
use serde::Serialize;

use crate::load::load_model;

#[derive(Debug, Args)]
pub struct SpeculateArgs {
    /// GGUF model file (or a catalogue name).
    #[arg(short = 'm', long, required_unless_present = "addr")]
    model: Option<PathBuf>,
    /// Ask a running server (memoria or llama-server) at HOST:PORT instead of loading a model.
    #[arg(long)]
    addr: Option<std::net::SocketAddr>,
    /// Tokens to generate per request.
    #[arg(short = 'n', long, default_value_t = 256)]
    ntg: usize,
    /// Comma-separated sampling temperatures (0: greedy).
    #[arg(long, default_value = "0,0.7", value_delimiter = ',')]
    temps: Vec<f32>,
    /// Comma-separated workloads (edit, quote, agent, story; default all).
    #[arg(long, value_delimiter = ',')]
    workloads: Vec<String>,
    /// Most draft tokens per step.
    #[arg(long, default_value_t = memoria_sched::speculation::DEFAULT_MAX_DRAFT)]
    draft_max: usize,
    /// What a row past the first costs in a pass, as a fraction of a one-row pass, instead of
    /// the engine's measurement (0 to 1): draft lengths then do not follow timing noise, so
    /// two builds draft alike.
    #[arg(long, value_parser = row_cost)]
    row_cost: Option<f64>,
    /// Threads (0: one per core).
    #[arg(short = 't', long, default_value_t = 0)]
    threads: usize,
    /// Print a JSON array of rows.
    #[arg(long)]
    json: bool,
}

/// One workload at one temperature, both ways.
#[derive(Debug, Serialize)]
struct Row {
    workload: &'static str,
    temperature: f32,
    prompt_tokens: usize,
    tokens: usize,
    off_tps: f64,
    on_tps: f64,
    speedup: f64,
    drafted: usize,
    accepted: usize,
}

/// One generation's figures.
struct Run {
    tokens: Vec<u32>,
    /// Decode tokens per second: from the first token to the last.
    tps: f64,
    drafted: usize,
    accepted: usize,
}

pub fn main(a: SpeculateArgs) -> anyhow::Result<()> {
    let chosen = chosen(&a)?;
    if let Some(addr) = a.addr {
        return main_remote(&a, addr, &chosen);
    }
    let Some(model) = &a.model else {
        anyhow::bail!("give -m MODEL or --addr HOST:PORT");
    };
    crate::cmd::init_threads(a.threads)?;
    let path = crate::cmd::pull::catalogue::model_arg(model)?;
    let loaded = load_model(&path, a.json)?;
    let tok = &loaded.tokenizer;
    let template = crate::load::chat_template(&loaded);
    let mut prompts = Vec::new();
    for w in &chosen {
        let ids = match &template {
            Some(t) => {
                let msgs = [memoria_model::chat::ChatMessage::new(
                    "user",
                    w.message.clone(),
                )];
                memoria_http::chat_tokens(t, tok, &msgs, None)
                    .map_err(|e| anyhow::anyhow!("chat template: {}", e.message))?
            }
            None => tok.encode(&w.message, true, true),
        };
        prompts.push((w.name, ids));
    }
    let cfg = EngineConfig {
        kv_budget_bytes: 512 << 20,
        draft_row_cost: a.row_cost,
        ..EngineConfig::default()
    };
    let engine = EngineHandle::start(Arc::new(loaded.model), Arc::new(loaded.tokenizer), cfg)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let on = Speculate {
        max_draft: a.draft_max,
        group: true,
    };
    let mut rows = Vec::new();
    let mut round = 0u32;
    if !a.json {
        println!(
            "| workload | temp | prompt | tokens |  off t/s |   on t/s | speed-up | accepted/drafted |"
        );
        println!(
            "|----------|------|--------|--------|----------|----------|----------|------------------|"
        );
    }
    for (name, prompt) in &prompts {
        for &temp in &a.temps {
            let mut run = |s: Speculate| {
                round += 1;
                rt.block_on(generate(&engine, round, prompt, a.ntg, temp, s))
            };
            let off = run(Speculate::OFF)?;
            let fast = run(on)?;
            anyhow::ensure!(
                fast.tokens == off.tokens,
                "{name} at temperature {temp}: speculation changed the tokens (a bug)"
            );
            let row = Row {
                workload: name,
                temperature: temp,
                prompt_tokens: prompt.len(),
                tokens: off.tokens.len(),
                off_tps: off.tps,
                on_tps: fast.tps,
                speedup: fast.tps / off.tps.max(f64::MIN_POSITIVE),
                drafted: fast.drafted,
                accepted: fast.accepted,
            };
            if !a.json {
                println!(
                    "| {:8} | {:4.1} | {:6} | {:6} | {:8.2} | {:8.2} | {:7.2}x | {:>16} |",
                    row.workload,
                    row.temperature,
                    row.prompt_tokens,
                    row.tokens,
                    row.off_tps,
                    row.on_tps,
                    row.speedup,
                    format!("{}/{}", row.accepted, row.drafted),
                );
            }
            rows.push(row);
        }
    }
    engine.shutdown();
    if a.json {
        println!("{}", serde_json::to_string(&rows)?);
    }
    Ok(())
}

/// `--row-cost`: a fraction in (0, 1].
fn row_cost(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 1.0 => Ok(v),
        _ => Err(format!("{s:?} is not a row cost in (0, 1]")),
    }
}

/// The workloads `--workloads` names (all by default).
fn chosen(a: &SpeculateArgs) -> anyhow::Result<Vec<workloads::Workload>> {
    let mut chosen = workloads::all();
    if !a.workloads.is_empty() {
        chosen.retain(|w| a.workloads.iter().any(|n| n == w.name));
        anyhow::ensure!(
            !chosen.is_empty(),
            "--workloads: none of edit, quote, agent, story"
        );
    }
    Ok(chosen)
}

/// The table from a running server.
fn main_remote(
    a: &SpeculateArgs,
    addr: std::net::SocketAddr,
    chosen: &[workloads::Workload],
) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut rows = Vec::new();
    if !a.json {
        println!(
            "| workload | temp | tokens |  off t/s |   on t/s | speed-up | accepted/drafted | same text |"
        );
        println!(
            "|----------|------|--------|----------|----------|----------|------------------|-----------|"
        );
    }
    for w in chosen {
        for &temp in &a.temps {
            let off = rt.block_on(remote::ask(addr, w, a.ntg, temp, true))?;
            let on = rt.block_on(remote::ask(addr, w, a.ntg, temp, false))?;
            let row = Row {
                workload: w.name,
                temperature: temp,
                prompt_tokens: 0,
                tokens: on.tokens,
                off_tps: off.tps,
                on_tps: on.tps,
                speedup: on.tps / off.tps.max(f64::MIN_POSITIVE),
                drafted: on.drafted,
                accepted: on.accepted,
            };
            if !a.json {
                println!(
                    "| {:8} | {:4.1} | {:6} | {:8.2} | {:8.2} | {:7.2}x | {:>16} | {:>9} |",
                    row.workload,
                    row.temperature,
                    row.tokens,
                    row.off_tps,
                    row.on_tps,
                    row.speedup,
                    format!("{}/{}", row.accepted, row.drafted),
                    if on.text == off.text { "yes" } else { "no" },
                );
            }
            rows.push(row);
        }
    }
    if a.json {
        println!("{}", serde_json::to_string(&rows)?);
    }
    Ok(())
}

/// One generation of `prompt` in a namespace of its own.
async fn generate(
    e: &EngineHandle,
    round: u32,
    prompt: &[u32],
    ntg: usize,
    temperature: f32,
    speculation: Speculate,
) -> anyhow::Result<Run> {
    let ns = NamespaceId(round);
    e.namespaces()
        .insert(standalone(ns, &format!("bench-speculate-{round}")));
    let s = e.open(ns).await?;
    e.append(ns, s, prompt.to_vec()).await?;
    e.prefill(ns, s).await?;
    let sampling = if temperature > 0.0 {
        SamplingParams {
            temperature,
            ..SamplingParams::default()
        }
    } else {
        SamplingParams::greedy()
    };
    let params = GenerateParams {
        sampling,
        close_when_done: true,
        speculation,
        ..GenerateParams::greedy(ntg)
    };
    let mut stream = e.generate(ns, s, params)?;
    let mut tokens = Vec::new();
    let (mut first, mut last) = (None, Instant::now());
    while let Some(ev) = stream.next().await {
        match ev {
            Event::Token { id, .. } => {
                last = Instant::now();
                first.get_or_insert(last);
                tokens.push(id);
            }
            Event::Done { usage, .. } => {
                let span = first.map_or(0.0, |f| (last - f).as_secs_f64());
                let tps = if tokens.len() > 1 && span > 0.0 {
                    (tokens.len() - 1) as f64 / span
                } else {
                    0.0
                };
                return Ok(Run {
                    tokens,
                    tps,
                    drafted: usage.drafted,
                    accepted: usage.draft_accepted,
                });
            }
            Event::Error(err) => anyhow::bail!("generation failed: {err}"),
        }
    }
    anyhow::bail!("the generation ended without a result")
}
