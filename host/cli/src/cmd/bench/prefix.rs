//! `memoria bench prefix`: `--clients` concurrent sessions share a `--prefix`-token prompt
//! prefix with distinct `--suffix`-token endings and generate `--gen` tokens each. Runs the round
//! with sharing (one salt) and without (a salt per client) and prints wall time, K/V bytes held
//! each way, TTFT of the first client and of the rest, aggregate generation speed, hit rate, and
//! the TTFT of one more client once the prefix is cached.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use clap::Args;
use memoria_kv::NamespaceId;
use memoria_sched::{EngineConfig, EngineHandle, Event, GenerateParams};
use memoria_tenant::standalone;
use serde_json::json;

use super::tokens::pseudo_tokens;
use crate::load::load_model;

#[derive(Debug, Args)]
pub struct PrefixArgs {
    /// GGUF model file.
    #[arg(short = 'm', long)]
    model: PathBuf,
    /// Concurrent sessions.
    #[arg(long, default_value_t = 16)]
    clients: usize,
    /// Shared prefix tokens.
    #[arg(long, default_value_t = 1000)]
    prefix: usize,
    /// Distinct suffix tokens per client.
    #[arg(long, default_value_t = 20)]
    suffix: usize,
    /// Tokens generated per client.
    #[arg(long = "gen", default_value_t = 16)]
    gen_tokens: usize,
    /// Threads (0: one per core).
    #[arg(short = 't', long, default_value_t = 0)]
    threads: usize,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

/// Figures of one round.
struct Round {
    wall_s: f64,
    peak_kv_bytes: u64,
    ttfts_ms: Vec<f64>,
    gen_tokens_per_s: f64,
    hit_rate: f64,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

pub fn main(a: PrefixArgs) -> anyhow::Result<()> {
    crate::cmd::init_threads(a.threads)?;
    anyhow::ensure!(a.clients > 0, "--clients must be at least 1");
    let loaded = load_model(&a.model, a.json)?;
    let hp = loaded.model.hparams().clone();
    let per_client = a.prefix + a.suffix + a.gen_tokens + 32;
    anyhow::ensure!(
        per_client - 32 <= hp.n_ctx_train,
        "prefix + suffix + gen exceeds the model context {}",
        hp.n_ctx_train
    );
    let kv_token = hp.n_layer * hp.kv_dim() * 2 * 2;
    let cfg = EngineConfig {
        kv_budget_bytes: ((a.clients + 1) * per_client * kv_token).max(64 << 20),
        ..EngineConfig::default()
    };
    let engine = EngineHandle::start(Arc::new(loaded.model), Arc::new(loaded.tokenizer), cfg)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let prefix = pseudo_tokens(7, a.prefix, hp.n_vocab);
    let shared = rt.block_on(round(&engine, &a, &prefix, hp.n_vocab, true, 1))?;
    // One more client after the round: its prefix is cached.
    let cached_ttft = rt.block_on(round(
        &engine,
        &PrefixArgs {
            clients: 1,
            ..a.clone_args()
        },
        &prefix,
        hp.n_vocab,
        true,
        1000,
    ))?;
    let unshared = rt.block_on(round(&engine, &a, &prefix, hp.n_vocab, false, 2))?;
    engine.shutdown();
    let mut rest: Vec<f64> = shared.ttfts_ms[1..].to_vec();
    rest.sort_by(f64::total_cmp);
    let first = shared.ttfts_ms[0];
    let obj = json!({
        "clients": a.clients,
        "prefix": a.prefix,
        "suffix": a.suffix,
        "gen": a.gen_tokens,
        "wall_s": shared.wall_s,
        "wall_unshared_s": unshared.wall_s,
        "kv_bytes_shared": shared.peak_kv_bytes,
        "kv_bytes_unshared": unshared.peak_kv_bytes,
        "ttft_first_ms": first,
        "ttft_rest_p50_ms": percentile(&rest, 0.5),
        "ttft_rest_p99_ms": percentile(&rest, 0.99),
        "ttft_cached_ms": cached_ttft.ttfts_ms[0],
        "gen_tokens_per_s": shared.gen_tokens_per_s,
        "hit_rate": shared.hit_rate,
    });
    if a.json {
        println!("{obj}");
    } else {
        println!("{}", serde_json::to_string_pretty(&obj)?);
        println!(
            "K/V held with sharing: {:.1}% of unshared; round {:.2}x faster than unshared; cached-prefix TTFT {:.1}x faster than computed",
            100.0 * shared.peak_kv_bytes as f64 / unshared.peak_kv_bytes.max(1) as f64,
            unshared.wall_s / shared.wall_s,
            first / cached_ttft.ttfts_ms[0].max(1e-9)
        );
    }
    Ok(())
}

impl PrefixArgs {
    fn clone_args(&self) -> PrefixArgs {
        PrefixArgs {
            model: self.model.clone(),
            ..*self
        }
    }
}

/// Runs `clients` concurrent sessions; `shared` gives them one salt, otherwise one each.
async fn round(
    e: &EngineHandle,
    a: &PrefixArgs,
    prefix: &[u32],
    n_vocab: usize,
    shared: bool,
    seed: u64,
) -> anyhow::Result<Round> {
    let before = e.pool_stats().snapshot().total;
    let started = Instant::now();
    let mut clients = tokio::task::JoinSet::new();
    for i in 0..a.clients {
        // One namespace for every client when shared, else one each (ids from 1).
        let ns = NamespaceId(if shared {
            0
        } else {
            u32::try_from(i).map_or(u32::MAX - 1, |i| i.saturating_add(1))
        });
        let label = if shared {
            "bench-prefix-shared".to_string()
        } else {
            format!("bench-prefix-{seed}-{i}")
        };
        e.namespaces().insert(standalone(ns, &label));
        let mut p = prefix.to_vec();
        p.extend(pseudo_tokens(
            seed * 100_000 + i as u64 + 11,
            a.suffix,
            n_vocab,
        ));
        let (e, n_gen) = (e.clone(), a.gen_tokens);
        clients.spawn(async move {
            let s = e.open(ns).await?;
            e.append(ns, s, p).await?;
            let params = GenerateParams {
                ignore_eos: true,
                ..GenerateParams::greedy(n_gen)
            };
            let mut st = e.generate(ns, s, params)?;
            let mut first: Option<Instant> = None;
            loop {
                match st.next().await {
                    Some(Event::Token { .. }) => {
                        first.get_or_insert_with(Instant::now);
                    }
                    Some(Event::Done { .. }) => break,
                    Some(Event::Error(err)) => anyhow::bail!("client {i}: {err}"),
                    None => anyhow::bail!("client {i}: stream ended early"),
                }
            }
            anyhow::Ok((i, ns, s, first.unwrap_or_else(Instant::now)))
        });
    }
    let stats = e.pool_stats().clone();
    let mut peak = 0u64;
    let mut results = Vec::with_capacity(a.clients);
    loop {
        let snap = stats.snapshot();
        peak = peak.max(snap.blocks_used * snap.block_bytes);
        tokio::select! {
            r = clients.join_next() => match r {
                Some(r) => results.push(r??),
                None => break,
            },
            _ = tokio::time::sleep(std::time::Duration::from_millis(2)) => {}
        }
    }
    let wall_s = started.elapsed().as_secs_f64();
    let mut ttfts = vec![0.0; a.clients];
    let mut first_token = None::<Instant>;
    for &(i, ns, s, first) in &results {
        ttfts[i] = first.duration_since(started).as_secs_f64() * 1000.0;
        first_token = Some(first_token.map_or(first, |f: Instant| f.min(first)));
        e.close(ns, s).await?;
    }
    let gen_s = first_token
        .map_or(wall_s, |t| wall_s - t.duration_since(started).as_secs_f64())
        .max(1e-9);
    let after = e.pool_stats().snapshot().total;
    let hits = after.hit_tokens - before.hit_tokens;
    let misses = after.miss_tokens - before.miss_tokens;
    Ok(Round {
        wall_s,
        peak_kv_bytes: peak,
        ttfts_ms: ttfts,
        gen_tokens_per_s: (a.clients * a.gen_tokens) as f64 / gen_s,
        hit_rate: if hits + misses == 0 {
            0.0
        } else {
            hits as f64 / (hits + misses) as f64
        },
    })
}
