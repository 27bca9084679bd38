//! Memory next to its budgets: the process's resident set now and at its peak (from
//! `/proc/self/status`), beside every bound the configuration sets — the weights inference
//! keeps resident, the hot K/V pool, the store's RAM (cold tier, its encoder queue, redb's page
//! cache and write queue, the remote tier's in-flight bytes), the embedding cache, the
//! request bodies being received and the guests' linear memories — and their sum with a fixed allowance for the runtime itself (code,
//! thread stacks, the engine's scratch, allocator slack), and what each holds now where that is
//! measured. `/stats` `memory` and
//! `memoria_memory_bytes{kind}`. Invariant: read-only, and every sum saturates.

use serde_json::{Map, Value, json};

use super::render::Out;
use crate::state::AppState;

/// RAM allowed beyond the configured budgets: the binary's code and data, tokio's and the
/// engine's threads, the engine's activations and logits, wasmtime's compiled code, and the
/// allocator's slack. Measured on SmolLM2 and Gemma 3 270M with 16 sessions (see the README).
pub const RUNTIME_ALLOWANCE_BYTES: u64 = 192 << 20;

/// `(name, bytes)` for each configured memory bound.
pub fn budgets(state: &AppState) -> Vec<(&'static str, u64)> {
    let pool = state.engine.pool_stats().snapshot();
    let model = state.engine.model();
    let mut out = vec![
        ("weights", model.weight_bytes()),
        ("hot_pool", pool.bytes_total()),
    ];
    if let Some(store) = &state.store {
        out.extend(store.memory_budgets(pool.block_bytes));
    }
    let n_embd = u64::try_from(model.hparams().n_embd).unwrap_or(u64::MAX);
    let entries = u64::try_from(state.engine.embedding_cache().capacity()).unwrap_or(u64::MAX);
    out.push((
        "embedding_cache",
        entries.saturating_mul(n_embd.saturating_mul(4)),
    ));
    if let Some(router) = &state.router {
        let guests = state
            .tenants()
            .iter()
            .filter(|ns| router.components(&ns.name).is_some_and(|c| !c.is_empty()))
            .map(|ns| {
                let l = &ns.spec.limits;
                let instances = u64::try_from(l.max_instances).unwrap_or(u64::MAX);
                l.memory_bytes.saturating_mul(instances)
            })
            .fold(0u64, u64::saturating_add);
        out.push(("guests", guests));
    }
    out.push((
        "request_bodies",
        u64::try_from(state.bodies.max()).unwrap_or(u64::MAX),
    ));
    out.push(("runtime", RUNTIME_ALLOWANCE_BYTES));
    out
}

/// `(name, bytes)` held now, for the budgets whose use is known (redb's page cache, the cold
/// tier's encoder queue and the guests' memories are bounded but not measured).
pub fn used(state: &AppState) -> Vec<(&'static str, u64)> {
    let pool = state.engine.pool_stats().snapshot();
    let model = state.engine.model();
    let mut out = vec![
        ("weights", model.weight_bytes()),
        ("hot_pool", pool.bytes_committed()),
    ];
    if let Some(store) = &state.store {
        let s = store.snapshot();
        if store.cold().is_some() {
            out.push(("cold_tier", s.cold.bytes));
        }
        if store.disk().is_some() {
            out.push(("disk_write_queue", s.redb.queue_bytes));
        }
        if let Some(r) = s.remote {
            out.push(("remote_inflight", r.queue_bytes));
        }
    }
    let n_embd = u64::try_from(model.hparams().n_embd).unwrap_or(u64::MAX);
    let held = u64::try_from(state.engine.embedding_cache().len()).unwrap_or(u64::MAX);
    out.push((
        "embedding_cache",
        held.saturating_mul(n_embd.saturating_mul(4)),
    ));
    out.push((
        "request_bodies",
        u64::try_from(state.bodies.used()).unwrap_or(u64::MAX),
    ));
    out
}

/// The sum of [`budgets`].
pub fn total(budgets: &[(&'static str, u64)]) -> u64 {
    budgets.iter().fold(0u64, |a, &(_, b)| a.saturating_add(b))
}

/// The process's (resident, peak resident) bytes; zeros where `/proc` cannot be read.
pub fn resident() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    (status_kib(&status, "VmRSS:"), status_kib(&status, "VmHWM:"))
}

/// A `KEY:   N kB` line of `/proc/PID/status`, in bytes (0 when absent or unreadable).
pub fn status_kib(status: &str, key: &str) -> u64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(0, |kib| kib.saturating_mul(1024))
}

/// The `/stats` object's `memory` entry.
pub(super) fn json(state: &AppState) -> Value {
    let b = budgets(state);
    let (rss, peak) = resident();
    let map = |pairs: &[(&'static str, u64)]| {
        let mut m = Map::new();
        for &(name, bytes) in pairs {
            m.insert(name.into(), json!(bytes));
        }
        Value::Object(m)
    };
    json!({
        "rss_bytes": rss,
        "rss_peak_bytes": peak,
        "budgets": map(&b),
        "used": map(&used(state)),
        "budget_total_bytes": total(&b),
    })
}

/// Appends `memoria_memory_bytes`.
pub(super) fn render(o: &mut Out, state: &AppState) {
    let b = budgets(state);
    let (rss, peak) = resident();
    o.family(
        "memoria_memory_bytes",
        "gauge",
        "Resident memory (kind=\"rss\", \"rss_peak\"), the bound of each budget \
         (kind=\"budget\", budget=NAME; budget=\"total\" is their sum) and what it holds now \
         where that is known (kind=\"used\").",
    );
    o.sample("memoria_memory_bytes", "kind=\"rss\"", rss);
    o.sample("memoria_memory_bytes", "kind=\"rss_peak\"", peak);
    for (name, bytes) in &b {
        o.sample(
            "memoria_memory_bytes",
            &format!("kind=\"budget\",budget=\"{name}\""),
            bytes,
        );
    }
    o.sample(
        "memoria_memory_bytes",
        "kind=\"budget\",budget=\"total\"",
        total(&b),
    );
    for (name, bytes) in used(state) {
        o.sample(
            "memoria_memory_bytes",
            &format!("kind=\"used\",budget=\"{name}\""),
            bytes,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines_are_read_in_kib_and_bad_ones_are_zero() {
        let s = "Name:\tmemoria\nVmHWM:\t  2048 kB\nVmRSS:\t1024 kB\nVmBad:\tlots kB\n";
        assert_eq!(status_kib(s, "VmRSS:"), 1024 * 1024);
        assert_eq!(status_kib(s, "VmHWM:"), 2048 * 1024);
        assert_eq!(status_kib(s, "VmBad:"), 0);
        assert_eq!(status_kib(s, "VmSwap:"), 0);
        assert_eq!(status_kib("VmRSS: 99999999999999999999 kB", "VmRSS:"), 0);
        assert_eq!(total(&[("a", u64::MAX), ("b", 1)]), u64::MAX);
        let (rss, peak) = resident();
        assert!(rss > 0 && peak >= rss, "{rss} {peak}");
    }
}
