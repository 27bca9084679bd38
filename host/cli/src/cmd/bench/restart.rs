//! `memoria bench restart`: TTFT of a `--prefix`-token prompt computed from scratch, then as a hot
//! hit, then served from the redb tier by a fresh process (this binary, re-spawned with a hidden
//! flag) after a restart; plus decode speed with and without the store's write-through and the
//! store's write throughput, over `--rounds` rounds (medians, and each round's figure; the decode
//! slowdown is the median of each back-to-back pair's, so a machine's drift between pairs cancels;
//! both engines share one copy of the weights and decode one token per step). The store at
//! `--store` is cleared first. Prints figures; asserts nothing about speed.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use memoria_kv::NamespaceId;
use memoria_model::llama::Model;
use memoria_model::tokenizer::Tokenizer;
use memoria_sched::{EngineConfig, EngineHandle, Event, GenerateParams, Speculate};
use memoria_store::{TierStack, maintenance};
use serde_json::{Value, json};

use crate::cmd::store::{open_store, random_tokens};
use crate::load::load_model;

#[derive(Debug, Args)]
pub struct RestartArgs {
    /// GGUF model file.
    #[arg(short = 'm', long)]
    model: PathBuf,
    /// Prompt tokens.
    #[arg(long, default_value_t = 1000)]
    prefix: usize,
    /// Store directory (cleared first).
    #[arg(long = "store")]
    store: PathBuf,
    /// Tokens decoded for the write-throughput and slowdown figures.
    #[arg(long = "gen", default_value_t = 128)]
    gen_tokens: usize,
    /// Threads (0: one per core).
    #[arg(short = 't', long, default_value_t = 0)]
    threads: usize,
    /// Rounds: fresh prompts computed and hit hot, restarted processes, and pairs of decodes
    /// with and without the store (alternating which goes first); medians are reported.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
    /// Internal: measure the restart TTFT in this (fresh) process and print it as JSON.
    #[arg(long, hide = true)]
    restart_child: bool,
}

const SEED: u64 = 4242;

/// The bench's one namespace.
const NS: NamespaceId = NamespaceId(0);

/// The model and tokenizer, loaded once and shared by the engines a run starts: the decodes
/// with and without the store then read the very same weights, so the slowdown measures the
/// store and not two copies of the weights placed differently in memory.
type Shared = (Arc<Model>, Arc<Tokenizer>);

fn load(a: &RestartArgs) -> anyhow::Result<Shared> {
    let loaded = load_model(&a.model, true)?;
    Ok((Arc::new(loaded.model), Arc::new(loaded.tokenizer)))
}

fn start(
    a: &RestartArgs,
    (model, tokenizer): &Shared,
    store: Option<Arc<TierStack>>,
) -> anyhow::Result<(EngineHandle, usize)> {
    let hp = model.hparams().clone();
    anyhow::ensure!(
        a.prefix + a.gen_tokens + 64 <= hp.n_ctx_train,
        "prefix + gen exceeds the model context {}",
        hp.n_ctx_train
    );
    let kv_token = hp.n_layer * hp.kv_dim() * 2 * 2;
    let cfg = EngineConfig {
        kv_budget_bytes: (4 * (a.prefix + a.gen_tokens + 64) * kv_token).max(64 << 20),
        store: store.map(|s| s as _),
        ..EngineConfig::default()
    };
    let e = EngineHandle::start(model.clone(), tokenizer.clone(), cfg)?;
    e.namespaces()
        .insert(memoria_tenant::standalone(NS, "bench-restart"));
    Ok((e, hp.n_vocab))
}

/// Opens a session on `prompt` and prefills it: (milliseconds, logits checksum).
async fn ttft(e: &EngineHandle, prompt: &[u32]) -> anyhow::Result<(f64, String)> {
    let ns = NS;
    let started = Instant::now();
    let s = e.open(ns).await?;
    e.append(ns, s, prompt.to_vec()).await?;
    let logits = e.prefill(ns, s).await?;
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    e.close(ns, s).await?;
    // FNV-1a over the logits' bits: equal sums mean bit-identical logits (for a report).
    let sum = logits.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, x| {
        (h ^ u64::from(x.to_bits())).wrapping_mul(0x100_0000_01b3)
    });
    Ok((ms, format!("{sum:016x}")))
}

/// Decodes `n` tokens after a fresh 64-token prompt: (tokens/s, blocks the store committed).
async fn decode(
    e: &EngineHandle,
    store: Option<&TierStack>,
    seed: u64,
    n_vocab: usize,
    n: usize,
) -> anyhow::Result<(f64, u64, f64)> {
    let ns = NS;
    let s = e.open(ns).await?;
    e.append(ns, s, random_tokens(seed, 64, n_vocab)).await?;
    e.prefill(ns, s).await?;
    if let Some(st) = store {
        st.flush()?;
    }
    let before = store.map_or(0, |st| st.snapshot().redb.puts);
    // One token per step in both arms: drafting depends on what each engine's pool holds (the
    // store's engine also keeps the TTFT prompts), so with it on the arms would do different
    // work for the same tokens and the slowdown would measure drafting, not the store.
    let params = GenerateParams {
        ignore_eos: true,
        close_when_done: true,
        speculation: Speculate::OFF,
        ..GenerateParams::greedy(n)
    };
    let mut stream = e.generate(ns, s, params)?;
    let mut first = None;
    let mut count = 0usize;
    loop {
        match stream.next().await {
            Some(Event::Token { .. }) => {
                count += 1;
                first.get_or_insert_with(Instant::now);
            }
            Some(Event::Done { .. }) => break,
            Some(Event::Error(err)) => anyhow::bail!("decode: {err}"),
            None => anyhow::bail!("decode: stream ended early"),
        }
    }
    let secs = first
        .map_or(0.0, |f: Instant| f.elapsed().as_secs_f64())
        .max(1e-9);
    if let Some(st) = store {
        st.flush()?;
    }
    let written = store.map_or(0, |st| st.snapshot().redb.puts) - before;
    Ok((count.saturating_sub(1) as f64 / secs, written, secs))
}

fn child(a: &RestartArgs) -> anyhow::Result<()> {
    crate::cmd::init_threads(a.threads)?;
    let store = open_store(Some(&a.store))?;
    let (e, n_vocab) = start(a, &load(a)?, store.clone())?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let prompt = random_tokens(SEED, a.prefix, n_vocab);
    let (ms, sum) = rt.block_on(ttft(&e, &prompt))?;
    let cached = e.pool_stats().snapshot().total.hit_tokens;
    e.shutdown();
    let redb = store.map(|s| s.snapshot().redb).unwrap_or_default();
    println!(
        "{}",
        json!({"ttft_ms": ms, "logits": sum, "cached_tokens": cached, "redb_hits": redb.hits})
    );
    Ok(())
}

fn spawn_child(a: &RestartArgs) -> anyhow::Result<Value> {
    let exe = std::env::current_exe().context("locating this binary")?;
    let out = Command::new(exe)
        .args(["bench", "restart", "--restart-child", "-m"])
        .arg(&a.model)
        .arg("--store")
        .arg(&a.store)
        .args([
            "--prefix",
            &a.prefix.to_string(),
            "-t",
            &a.threads.to_string(),
        ])
        .output()
        .context("spawning the restarted process")?;
    anyhow::ensure!(
        out.status.success(),
        "restarted process failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).context("reading the restarted process's figures")
}

/// The median of `v` (NaN when empty).
fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

fn clear(dir: &Path) -> anyhow::Result<()> {
    if dir.join(memoria_store::disk::tables::DB_FILE).exists() {
        maintenance::clear(dir, None)?;
    }
    Ok(())
}

pub fn main(a: RestartArgs) -> anyhow::Result<()> {
    if a.restart_child {
        return child(&a);
    }
    crate::cmd::init_threads(a.threads)?;
    clear(&a.store)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let rounds = a.rounds.max(1);
    let store = open_store(Some(&a.store))?.context("store")?;
    let shared = load(&a)?;
    let (e, n_vocab) = start(&a, &shared, Some(store.clone()))?;
    // A fresh prompt per round, computed, then hit hot; round 0's is the one restored later.
    let (mut compute, mut hot) = (Vec::new(), Vec::new());
    let mut identical = true;
    let mut sum0 = String::new();
    for r in 0..rounds {
        let prompt = random_tokens(SEED + r as u64, a.prefix, n_vocab);
        let (c, sum) = rt.block_on(ttft(&e, &prompt))?;
        let (h, hot_sum) = rt.block_on(ttft(&e, &prompt))?;
        identical &= sum == hot_sum;
        if r == 0 {
            sum0 = sum;
        }
        compute.push(c);
        hot.push(h);
    }
    // Decode with and without the store, in pairs, alternating which runs first.
    let (plain, _) = start(&a, &shared, None)?;
    let (mut tps_plain, mut tps_store) = (Vec::new(), Vec::new());
    let (mut written, mut decode_s) = (0u64, 0.0f64);
    for r in 0..rounds {
        let seed = 77 + r as u64;
        let mut with_store = || -> anyhow::Result<()> {
            let (t, w, d) = rt.block_on(decode(&e, Some(&store), seed, n_vocab, a.gen_tokens))?;
            tps_store.push(t);
            written += w;
            decode_s += d;
            Ok(())
        };
        if r % 2 == 0 {
            with_store()?;
            tps_plain.push(
                rt.block_on(decode(&plain, None, seed, n_vocab, a.gen_tokens))?
                    .0,
            );
        } else {
            let t = rt
                .block_on(decode(&plain, None, seed, n_vocab, a.gen_tokens))?
                .0;
            with_store()?;
            tps_plain.push(t);
        }
    }
    plain.shutdown();
    drop(plain);
    e.shutdown();
    drop(e);
    store.flush()?;
    let snap = store.snapshot().redb;
    drop(store);

    let mut restart = Vec::new();
    let mut restarted = Value::Null;
    for _ in 0..rounds {
        restarted = spawn_child(&a)?;
        identical &= restarted["logits"].as_str() == Some(sum0.as_str());
        restart.push(restarted["ttft_ms"].as_f64().unwrap_or(f64::NAN));
    }
    let (compute_ms, hot_ms, restart_ms) = (median(&compute), median(&hot), median(&restart));
    let (tps_plain_m, tps_store_m) = (median(&tps_plain), median(&tps_store));
    let pairs: Vec<f64> = tps_plain
        .iter()
        .zip(&tps_store)
        .map(|(p, s)| 100.0 * (1.0 - s / p.max(1e-9)))
        .collect();
    let slowdown = median(&pairs);
    let obj = json!({
        "ttft_compute_ms": compute_ms,
        "ttft_hot_ms": hot_ms,
        "ttft_restart_ms": restart_ms,
        "restart_speedup_vs_compute": compute_ms / restart_ms.max(1e-9),
        "restart_over_hot": restart_ms / hot_ms.max(1e-9),
        "restart_cached_tokens": restarted["cached_tokens"],
        "restart_redb_hits": restarted["redb_hits"],
        "identical_logits": identical,
        "rounds": rounds,
        "ttft_compute_ms_each": compute,
        "ttft_hot_ms_each": hot,
        "ttft_restart_ms_each": restart,
        "decode_tokens_per_s_no_store": tps_plain_m,
        "decode_tokens_per_s_store": tps_store_m,
        "decode_tokens_per_s_no_store_each": tps_plain,
        "decode_tokens_per_s_store_each": tps_store,
        "decode_slowdown_pct": slowdown,
        "decode_slowdown_pct_each": pairs,
        "store_blocks_written_while_decoding": written,
        "store_blocks_per_s_while_decoding": written as f64 / decode_s,
        "store_writer_blocks_per_s": snap.blocks_per_write_second(),
        "store_blocks": snap.blocks,
        "store_bytes": snap.bytes,
        "store_dropped": snap.dropped,
    });
    if a.json {
        println!("{obj}");
    } else {
        println!("{}", serde_json::to_string_pretty(&obj)?);
    }
    Ok(())
}
