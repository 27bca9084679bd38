//! Memory soak: `memoria serve` with SmolLM2, a store and small RAM budgets (`[cache]
//! budget_mb`, `[store] cold_mb`, `page_cache_mb`, `write_queue_mb`), under a bounded load of
//! distinct prompts that overflows the hot pool into the cold tier and the file. The resident
//! set, sampled from `/proc` throughout, and the kernel's own peak (`VmHWM`) stay under the
//! total that `/stats` `memory` reports; afterwards no sequence is left and the pool's blocks
//! add up.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

use super::client::{get, post};
use super::server::{Server, temp_dir};

const CLIENTS: usize = 3;
const SOAK: Duration = Duration::from_secs(15);
const MAX_REQUESTS_PER_CLIENT: usize = 200;
/// Requests each client sends however slow the machine (the soak's time bound applies after
/// them): 3 × 8 prompts of ~9 blocks each are more than the 136-block hot pool holds, so the
/// load reaches the lower tiers on a busy machine too.
const MIN_REQUESTS_PER_CLIENT: usize = 8;

/// Bytes of a `/proc/PID/status` line such as `VmRSS:`.
fn status_bytes(pid: u32, key: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(0, |k| k * 1024)
}

/// A prompt of about 150 tokens that no other request shares past its first words.
fn prompt(client: usize, i: usize) -> String {
    let words = [
        "river", "lantern", "copper", "meadow", "whistle", "harbor", "pepper", "glacier", "violet",
        "thunder", "marble", "orchard", "saddle", "compass", "ember", "quartz",
    ];
    let mut x = (client as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ i as u64;
    let mut out = format!("Story {client}-{i}:");
    for _ in 0..120 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.push(' ');
        out.push_str(words[(x % words.len() as u64) as usize]);
    }
    out
}

#[test]
fn a_soak_over_small_budgets_stays_within_the_memory_total_stats_reports() {
    let dir = temp_dir("memory-soak");
    let config = dir.join("memoria.toml");
    std::fs::write(
        &config,
        "[cache]\nbudget_mb = 48\n\n[store]\ncold_mb = 16\npage_cache_mb = 8\n\
         write_queue_mb = 16\nmax_disk_mb = 256\n",
    )
    .expect("config");
    let store = dir.join("store");
    let smollm = crate::shared::path("models/SmolLM2-135M-Instruct.Q4_1.gguf");
    let s = Server::start(
        "memory-soak",
        &[
            "-m",
            smollm.to_str().expect("utf-8"),
            "--config",
            config.to_str().expect("utf-8"),
            "--store",
            store.to_str().expect("utf-8"),
            "--admin-key",
            "admin-key-for-tests",
            "-np",
            "3",
            "-c",
            "512",
        ],
    );
    let admin = [("Authorization", "Bearer admin-key-for-tests")];
    let pid = s.child.id();
    let addr = s.addr;

    let stop = Arc::new(AtomicBool::new(false));
    let peak = Arc::new(AtomicU64::new(0));
    let sampler = {
        let (stop, peak) = (stop.clone(), peak.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                peak.fetch_max(status_bytes(pid, "VmRSS:"), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    let started = Instant::now();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            std::thread::spawn(move || {
                let mut done = 0;
                for i in 0..MAX_REQUESTS_PER_CLIENT {
                    if started.elapsed() >= SOAK && i >= MIN_REQUESTS_PER_CLIENT {
                        break;
                    }
                    let r = post(
                        addr,
                        "/v1/completions",
                        &json!({"prompt": prompt(c, i), "max_tokens": 4, "temperature": 0}),
                        &[],
                    );
                    assert_eq!(r.status, 200, "{}", r.text());
                    done += 1;
                }
                done
            })
        })
        .collect();
    let requests: usize = clients.into_iter().map(|c| c.join().expect("client")).sum();
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    sampler.join().expect("sampler");

    let stats = get(addr, "/stats", &admin).json();
    let memory = &stats["memory"];
    assert!(memory.is_object(), "no memory in /stats: {stats}");
    let total = memory["budget_total_bytes"].as_u64().expect("a total");
    let hwm = status_bytes(pid, "VmHWM:");
    let peak = peak.load(Ordering::Relaxed);
    eprintln!(
        "memory soak: {requests} requests in {:.1} s, peak RSS {} MiB (VmHWM {} MiB) of a \
         {} MiB total: {memory}",
        started.elapsed().as_secs_f64(),
        peak >> 20,
        hwm >> 20,
        total >> 20
    );
    assert!(requests >= 10, "the soak ran ({requests} requests)");
    let tiers = &stats["tiers"];
    assert!(
        tiers["cold"]["blocks"].as_u64() > Some(0) && tiers["disk"]["blocks"].as_u64() > Some(0),
        "the load overflowed the hot pool into the lower tiers: {tiers}"
    );
    assert!(
        peak > 0 && peak <= total,
        "peak RSS {peak} over the budgets' total {total}: {memory}"
    );
    assert!(hwm <= total, "VmHWM {hwm} over the budgets' total {total}");
    for key in [
        "weights",
        "hot_pool",
        "cold_tier",
        "disk_page_cache",
        "runtime",
    ] {
        assert!(
            memory["budgets"][key].as_u64() > Some(0),
            "no {key} budget: {memory}"
        );
    }
    assert_eq!(memory["budgets"]["cold_tier"], 16u64 << 20, "{memory}");
    for key in ["hot_pool", "cold_tier"] {
        let (used, budget) = (
            memory["used"][key].as_u64(),
            memory["budgets"][key].as_u64(),
        );
        assert!(
            used > Some(0) && used <= budget,
            "{key}: used within its budget: {memory}"
        );
    }
    assert_eq!(memory["budgets"]["disk_page_cache"], 8u64 << 20, "{memory}");
    let pool = &stats["pool"];
    assert_eq!(pool["sequences"], 0, "no sequence left: {pool}");
    let sum = ["blocks_used", "blocks_cached", "blocks_free"]
        .iter()
        .map(|k| pool[k].as_u64().expect("a count"))
        .sum::<u64>();
    assert_eq!(Some(sum), pool["blocks_total"].as_u64(), "{pool}");
    let m = get(addr, "/metrics", &admin).text();
    assert!(
        m.contains("memoria_memory_bytes{kind=\"budget\",budget=\"total\"}"),
        "no memory total in /metrics"
    );
}
