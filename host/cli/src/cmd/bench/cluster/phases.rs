//! The three phases of `bench cluster` (prefix, round, decode), each returning its JSON figures.
//! Every prompt is fresh (a seed of its own), so nothing measured was cached by an earlier step.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};

use super::figures::{Figures, median, quantile_ms};
use super::{Setup, f};
use crate::cmd::bench::client::{Client, Streamed};
use crate::cmd::bench::procs::Proc;
use crate::cmd::bench::tokens::sized_text;

const COMPLETIONS: &str = "/v1/completions";
const CHAT: &str = "/v1/chat/completions";

/// How long A's write-behind queue may take to hand a prompt's blocks to the server.
const DRAIN_WAIT: Duration = Duration::from_secs(60);
/// Pause after the write queues emptied, for a commit or pipeline already taken off them.
const QUIET_SETTLE: Duration = Duration::from_millis(500);

pub async fn run(s: &Setup) -> anyhow::Result<Value> {
    let mut hosts = Vec::with_capacity(s.a.hosts);
    for i in 0..s.a.hosts {
        let name = format!("host-{}", (b'a' + i as u8) as char);
        hosts.push(s.host(&name, true)?);
    }
    let clients: Vec<Client> = hosts
        .iter()
        .map(|h| Client::new(h.addr, s.deadline))
        .collect();
    // Warm-up: page the weights in and grow the allocators before anything is timed.
    for c in &clients {
        let body = completion(&sized_text(&s.tok, 24, 9_999), 2, false);
        c.post(COMPLETIONS, &body).await.context("warm-up")?;
    }
    let prefix = prefix_phase(s, &clients[0], &clients[1]).await?;
    let round = round_phase(s, &hosts, &clients).await?;
    drop(hosts);
    let decode = decode_phase(s).await?;
    Ok(json!({
        "model": s.a.model,
        "hosts": s.a.hosts,
        "threads": s.a.threads,
        "context": s.n_ctx,
        "prefix": prefix,
        "round": round,
        "decode": decode,
    }))
}

fn completion(prompt: &str, max_tokens: usize, stream: bool) -> Value {
    let mut b = json!({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0});
    if stream {
        b["stream"] = json!(true);
        b["stream_options"] = json!({"include_usage": true});
    }
    b
}

async fn figures(c: &Client) -> anyhow::Result<Figures> {
    Ok(Figures::of(&c.get("/stats").await?))
}

fn usage(u: &Value, key: &str) -> u64 {
    u[key].as_u64().unwrap_or(0)
}

/// Waits until `c` wrote `blocks` blocks more than `before` (or dropped or failed them) and its
/// write-behind queue is empty: (milliseconds waited, whether it got there).
async fn drained(c: &Client, before: &Figures, blocks: u64) -> anyhow::Result<(f64, bool)> {
    let started = Instant::now();
    loop {
        let d = figures(c).await?.since(before);
        if d.queue_blocks == 0 && d.writes + d.writes_dropped + d.write_errors >= blocks {
            return Ok((started.elapsed().as_secs_f64() * 1e3, true));
        }
        if started.elapsed() > DRAIN_WAIT {
            return Ok((started.elapsed().as_secs_f64() * 1e3, false));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits (at most [`DRAIN_WAIT`]) until no host has blocks queued for its disk writer or the
/// remote tier, then for the kernel's writeback (`sync`), then a settle for a write in progress
/// (a pipeline or commit already taken off a queue): the hosts and the server share this
/// machine's cores, so a timed request on B would otherwise race A's background writes, which
/// on a real cluster run on A's own cores.
async fn quiet(hosts: &[&Client]) -> anyhow::Result<()> {
    let started = Instant::now();
    for c in hosts {
        loop {
            let f = figures(c).await?;
            if (f.queue_blocks == 0 && f.disk_queue_blocks == 0) || started.elapsed() > DRAIN_WAIT {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    // The disk tier commits without fsync between durable commits, so the kernel writes those
    // pages back later: wait for it here rather than during the timed request.
    tokio::task::spawn_blocking(rustix::fs::sync)
        .await
        .context("sync")?;
    tokio::time::sleep(QUIET_SETTLE).await;
    Ok(())
}

/// TTFT on B of prompts A computed (fetched from the remote tier) against prompts of the same
/// length B computes.
async fn prefix_phase(s: &Setup, a: &Client, b: &Client) -> anyhow::Result<Value> {
    let n = s.a.max_tokens;
    let (mut remote_ms, mut compute_ms, mut wait_ms) = (Vec::new(), Vec::new(), Vec::new());
    let mut fetched = Figures::default();
    let mut rows = Vec::new();
    let (mut same, mut all_drained, mut prompt_tokens) = (true, true, 0);
    for r in 0..s.a.reps as u64 {
        let shared = sized_text(&s.tok, s.a.prefix, 1 + r);
        let fresh = sized_text(&s.tok, s.a.prefix, 101 + r);
        let before = figures(a).await?;
        let cold = a.post(COMPLETIONS, &completion(&shared, n, false)).await?;
        let want = cold["choices"][0]["text"]
            .as_str()
            .unwrap_or("")
            .to_string();
        prompt_tokens = usage(&cold["usage"], "prompt_tokens");
        let blocks = prompt_tokens / before.block_tokens;
        let (waited, ok) = drained(a, &before, blocks).await?;
        wait_ms.push(waited);
        all_drained &= ok;

        quiet(&[a, b]).await?;
        let b0 = figures(b).await?;
        let got: Streamed = b.stream(COMPLETIONS, &completion(&shared, n, true)).await?;
        let b1 = figures(b).await?;
        quiet(&[a, b]).await?;
        let computed: Streamed = b.stream(COMPLETIONS, &completion(&fresh, n, true)).await?;
        let b2 = figures(b).await?;
        let hit = b1.since(&b0);
        let miss = b2.since(&b1);
        fetched.add(&hit);
        same &= got.text == want;
        remote_ms.push(got.ttft_s * 1e3);
        compute_ms.push(computed.ttft_s * 1e3);
        rows.push(json!({
            "ttft_remote_ms": got.ttft_s * 1e3,
            "ttft_compute_ms": computed.ttft_s * 1e3,
            "b_computed_tokens": hit.prefill_tokens,
            "b_remote_tokens": hit.remote_hits * hit.block_tokens,
            "b_cached_tokens": got.usage["prompt_tokens_details"]["cached_tokens"].as_u64(),
            "bytes_fetched": hit.bytes_read,
            "compute_computed_tokens": miss.prefill_tokens,
            "compute_remote_tokens": miss.remote_hits * miss.block_tokens,
            "a_drain_wait_ms": waited,
            "same_text": got.text == want,
        }));
    }
    let (rm, cm) = (median(&remote_ms), median(&compute_ms));
    let mid = |k: &str| {
        let v: Vec<f64> = rows.iter().map(|r| r[k].as_f64().unwrap_or(0.0)).collect();
        median(&v)
    };
    Ok(json!({
        "prompt_tokens": prompt_tokens,
        "reps": s.a.reps,
        "ttft_remote_ms": rm,
        "ttft_compute_ms": cm,
        "speedup": cm / rm.max(1e-9),
        "b_computed_tokens": mid("b_computed_tokens"),
        "b_remote_tokens": mid("b_remote_tokens"),
        "b_cached_tokens": mid("b_cached_tokens"),
        "bytes_fetched": mid("bytes_fetched"),
        "fetches": fetched.fetches,
        "mget_runs": fetched.mget_runs,
        "fetch_p50_ms": quantile_ms(&fetched.latency, 0.5),
        "fetch_p99_ms": quantile_ms(&fetched.latency, 0.99),
        "fetch_mean_ms": fetched.latency_sum_us as f64 / 1e3 / fetched.fetches.max(1) as f64,
        "fetch_quantiles_from": "the hosts' fetch latency histogram buckets, linear within a bucket",
        "a_drain_wait_ms": median(&wait_ms),
        "a_drained": all_drained,
        "same_text": same,
        "runs": rows,
    }))
}

/// One round: every client's streamed chat sent at once to `to`.
async fn round(to: Client, bodies: &[Value]) -> (f64, Vec<anyhow::Result<Streamed>>) {
    let started = Instant::now();
    let tasks: Vec<_> = bodies
        .iter()
        .cloned()
        .map(|b| tokio::spawn(async move { to.stream(CHAT, &b).await }))
        .collect();
    let mut out = Vec::with_capacity(tasks.len());
    for t in tasks {
        out.push(
            t.await
                .unwrap_or_else(|e| Err(anyhow::anyhow!("client task: {e}"))),
        );
    }
    (started.elapsed().as_secs_f64(), out)
}

/// The round's chat bodies (system prompt of seed `seed`, questions of seeds after it) and the
/// tokens the cluster must compute at least: (bodies, shared full-block tokens, the rest).
fn round_bodies(s: &Setup, seed: u64) -> anyhow::Result<(Vec<Value>, u64, u64)> {
    let system = sized_text(&s.tok, s.a.prefix, seed);
    let mut bodies = Vec::with_capacity(s.a.clients);
    let mut prompts = Vec::with_capacity(s.a.clients);
    for i in 0..s.a.clients as u64 {
        let q = sized_text(&s.tok, s.a.question_tokens, seed * 1000 + 1 + i);
        let body = json!({
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": q}],
            "max_tokens": s.a.max_tokens,
            "temperature": 0,
            "stream": true,
            "stream_options": {"include_usage": true},
        });
        let toks = memoria_http::request_tokens(&s.chat, &s.tok, CHAT, body.to_string().as_bytes())
            .context("the round's chat request does not tokenize")?;
        if toks.len() + s.a.max_tokens > s.n_ctx {
            bail!(
                "a round prompt is {} tokens: with --max-tokens it exceeds the context {}",
                toks.len(),
                s.n_ctx
            );
        }
        prompts.push(toks);
        bodies.push(body);
    }
    let first = &prompts[0];
    let common = prompts
        .iter()
        .map(|p| p.iter().zip(first).take_while(|(x, y)| x == y).count())
        .min()
        .unwrap_or(0);
    let full = (common / 16 * 16) as u64;
    let rest = prompts.iter().map(|p| p.len() as u64 - full).sum();
    Ok((bodies, full, rest))
}

async fn sum_figures(clients: &[Client]) -> anyhow::Result<Vec<Figures>> {
    let mut v = Vec::with_capacity(clients.len());
    for c in clients {
        v.push(figures(c).await?);
    }
    Ok(v)
}

/// One round against `to`, with the prefill the hosts behind it computed meanwhile.
async fn measured_round(
    s: &Setup,
    to: Client,
    hosts: &[Client],
    seed: u64,
) -> anyhow::Result<Value> {
    let (bodies, full, rest) = round_bodies(s, seed)?;
    let before = sum_figures(hosts).await?;
    let (wall, outs) = round(to, &bodies).await;
    // The hosts' counters settle when the last stream ends; read them after it.
    let after = sum_figures(hosts).await?;
    let computed: u64 = after
        .iter()
        .zip(&before)
        .map(|(x, y)| x.since(y).prefill_tokens)
        .sum();
    let remote: u64 = after
        .iter()
        .zip(&before)
        .map(|(x, y)| x.since(y).remote_hits * x.block_tokens)
        .sum();
    let mut ttft = Vec::new();
    let mut per_backend = BTreeMap::new();
    let mut first_error = None;
    for o in &outs {
        match o {
            Ok(st) => {
                ttft.push(st.ttft_s);
                if let Some(b) = &st.backend {
                    *per_backend.entry(b.clone()).or_insert(0u64) += 1;
                }
            }
            Err(e) => {
                first_error.get_or_insert_with(|| format!("{e:#}"));
            }
        }
    }
    Ok(json!({
        "wall_s": wall,
        "ok": ttft.len(),
        "errors": outs.len() - ttft.len(),
        "first_error": first_error,
        "ttft_p50_s": median(&ttft),
        "computed_tokens": computed,
        "remote_tokens": remote,
        "shared_prefix_tokens": full,
        "unshared_tokens": rest,
        "prefix_computations": (computed as f64 - rest as f64) / full.max(1) as f64,
        "per_backend": per_backend,
    }))
}

/// The shared-prompt round on host A alone and through `memoria route` over every host,
/// alternating, `--reps` times each (a fresh system prompt per round), every round starting
/// with the hosts' write queues empty: the ratio of the median walls, and the round of each
/// kind whose wall is the median.
async fn round_phase(s: &Setup, hosts: &[Proc], clients: &[Client]) -> anyhow::Result<Value> {
    let route = s.route(hosts)?;
    let via = Client::new(route.addr, s.deadline);
    let all: Vec<&Client> = clients.iter().collect();
    let (mut ones, mut routed) = (Vec::new(), Vec::new());
    for r in 0..s.a.reps as u64 {
        quiet(&all).await?;
        ones.push(measured_round(s, clients[0], clients, 201 + 2 * r).await?);
        quiet(&all).await?;
        routed.push(measured_round(s, via, clients, 202 + 2 * r).await?);
    }
    drop(route);
    let walls = |runs: &[Value]| -> Vec<f64> { runs.iter().map(|x| f(&x["wall_s"])).collect() };
    let (one_walls, route_walls) = (walls(&ones), walls(&routed));
    let ratio = median(&route_walls) / median(&one_walls).max(1e-9);
    let most_computed = routed
        .iter()
        .map(|x| f(&x["prefix_computations"]))
        .fold(0.0, f64::max);
    Ok(json!({
        "clients": s.a.clients,
        "system_tokens": s.a.prefix,
        "question_tokens": s.a.question_tokens,
        "rounds": s.a.reps,
        "one_host": median_run(ones),
        "cluster": median_run(routed),
        "one_host_walls_s": one_walls,
        "cluster_walls_s": route_walls,
        "cluster_prefix_computations_max": most_computed,
        "route_over_one_host": ratio,
    }))
}

/// The run whose wall time is the median (the lower middle of an even count).
fn median_run(mut runs: Vec<Value>) -> Value {
    runs.sort_by(|a, b| f(&a["wall_s"]).total_cmp(&f(&b["wall_s"])));
    let mid = runs.len().saturating_sub(1) / 2;
    runs.into_iter().nth(mid).unwrap_or(Value::Null)
}

/// Tokens/s of one generation after a fresh 64-token prompt: (t/s, tokens).
async fn decode_once(s: &Setup, c: &Client, seed: u64) -> anyhow::Result<(f64, u64)> {
    let mut body = completion(&sized_text(&s.tok, 64, seed), s.a.decode_tokens, true);
    body["ignore_eos"] = json!(true);
    let out = c.stream(COMPLETIONS, &body).await?;
    let n = usage(&out.usage, "completion_tokens");
    let secs = (out.total_s - out.ttft_s).max(1e-9);
    Ok((n.saturating_sub(1) as f64 / secs, n))
}

/// Decode speed with the remote tier on and off. Two processes differ by a few percent on
/// this kind of machine whatever they run (where their memory landed), so the pairs are spread
/// over fresh host pairs alike but for the remote tier, each pair of processes measured twice
/// (on first, then off first) and started in alternating order, each run after [`quiet`]:
/// medians, and the median of the pairs' ratios.
async fn decode_phase(s: &Setup) -> anyhow::Result<Value> {
    let (mut with, mut without, mut tokens, mut written) = (Vec::new(), Vec::new(), 0, 0);
    let processes = s.a.reps.div_ceil(2);
    for p in 0..processes {
        let (on_name, plain_name) = (format!("host-remote-{p}"), format!("host-plain-{p}"));
        let (on, plain) = if p % 2 == 0 {
            let on = s.host(&on_name, true)?;
            (on, s.host(&plain_name, false)?)
        } else {
            let plain = s.host(&plain_name, false)?;
            (s.host(&on_name, true)?, plain)
        };
        let (oc, pc) = (
            Client::new(on.addr, s.deadline),
            Client::new(plain.addr, s.deadline),
        );
        for c in [&oc, &pc] {
            let warm = completion(&sized_text(&s.tok, 24, 9_998), 2, false);
            c.post(COMPLETIONS, &warm).await.context("warm-up")?;
        }
        let before = figures(&oc).await?;
        for order in [[true, false], [false, true]] {
            let seed = 500 + with.len() as u64;
            for remote in order {
                // Each measurement starts on quiet hosts: the last one's writes never run
                // into the next.
                quiet(&[&oc, &pc]).await?;
                let (t, n) = decode_once(s, if remote { &oc } else { &pc }, seed).await?;
                if remote {
                    with.push(t);
                    tokens = n;
                } else {
                    without.push(t);
                }
            }
        }
        written += figures(&oc).await?.since(&before).writes;
        drop((on, plain));
    }
    let (w, wo) = (median(&with), median(&without));
    let ratios: Vec<f64> = with
        .iter()
        .zip(&without)
        .map(|(a, b)| a / b.max(1e-9))
        .collect();
    Ok(json!({
        "tokens": tokens,
        "process_pairs": processes,
        "tokens_per_s_remote_on": w,
        "tokens_per_s_remote_off": wo,
        "slowdown_pct": 100.0 * (1.0 - w / wo.max(1e-9)),
        "pair_slowdown_pct": 100.0 * (1.0 - median(&ratios)),
        "runs_remote_on": with,
        "runs_remote_off": without,
        "remote_writes_during": written,
    }))
}
