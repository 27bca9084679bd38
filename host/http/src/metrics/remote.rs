//! The remote tier's figures (Valkey/Redis) in `/metrics` and `/stats`: blocks hit,
//! misses by reason (absent, timeout, error, breaker, deadline, bad value), bytes read and written,
//! writes and dropped writes, write-queue depth, breaker state and opens, and a fetch latency
//! histogram. Invariant: nothing is written when the server runs without a remote tier.

use memoria_store::remote::{LATENCY_BOUNDS_US, RemoteSnapshot};
use serde_json::{Value, json};

use super::render::Out;
use crate::state::AppState;

fn snapshot(state: &AppState) -> Option<RemoteSnapshot> {
    state.store.as_ref()?.remote().map(|r| r.snapshot())
}

/// Appends the remote tier's families.
pub(super) fn render(o: &mut Out, state: &AppState) {
    let Some(s) = snapshot(state) else { return };
    o.family(
        "memoria_remote_hits_total",
        "counter",
        "Blocks served by the remote tier (verified values).",
    );
    o.sample("memoria_remote_hits_total", "", s.hits);
    o.family(
        "memoria_remote_misses_total",
        "counter",
        "Blocks the remote tier did not serve, by reason (a bad value is also deleted).",
    );
    for (reason, n) in [
        ("absent", s.miss_absent),
        ("timeout", s.miss_timeout),
        ("error", s.miss_error),
        ("breaker", s.miss_breaker),
        ("deadline", s.miss_deadline),
        ("bad_value", s.bad_values),
    ] {
        o.sample(
            "memoria_remote_misses_total",
            &format!("reason=\"{reason}\""),
            n,
        );
    }
    let counters = [
        (
            "memoria_remote_read_bytes_total",
            "Value bytes received.",
            s.bytes_read,
        ),
        (
            "memoria_remote_written_bytes_total",
            "Value bytes written.",
            s.bytes_written,
        ),
        (
            "memoria_remote_writes_total",
            "Blocks written (acknowledged).",
            s.writes,
        ),
        (
            "memoria_remote_writes_dropped_total",
            "Writes dropped: full write-behind queue or open breaker.",
            s.writes_dropped,
        ),
        (
            "memoria_remote_write_errors_total",
            "Writes that failed on the wire.",
            s.write_errors,
        ),
        (
            "memoria_remote_errors_total",
            "Network operations that failed.",
            s.errors,
        ),
        (
            "memoria_remote_mget_runs_total",
            "MGET commands sent (one per run of keys of a lookup).",
            s.mget_runs,
        ),
        (
            "memoria_remote_breaker_opens_total",
            "Times the circuit breaker opened.",
            s.breaker_opens,
        ),
    ];
    for (name, help, v) in counters {
        o.family(name, "counter", help);
        o.sample(name, "", v);
    }
    let gauges = [
        (
            "memoria_remote_queue_bytes",
            "Bytes in the write-behind queue.",
            s.queue_bytes,
        ),
        (
            "memoria_remote_queue_blocks",
            "Blocks in the write-behind queue.",
            s.queue_blocks,
        ),
        (
            "memoria_remote_breaker_state",
            "Circuit breaker: 0 closed, 1 open, 2 half-open.",
            s.breaker,
        ),
        (
            "memoria_remote_server_keys",
            "Keys in the remote server's database at the last poll (every host's blocks).",
            s.server_keys,
        ),
        (
            "memoria_remote_server_bytes",
            "The remote server's used_memory at the last poll.",
            s.server_bytes,
        ),
    ];
    for (name, help, v) in gauges {
        o.family(name, "gauge", help);
        o.sample(name, "", v);
    }
    let name = "memoria_remote_fetch_seconds";
    o.family(
        name,
        "histogram",
        "Latency of one lookup of the remote tier (a batch of keys, its MGET runs pipelined).",
    );
    let mut cum = 0;
    for (i, bound) in LATENCY_BOUNDS_US.iter().enumerate() {
        cum += s.latency[i];
        let le = *bound as f64 / 1e6;
        o.sample(&format!("{name}_bucket"), &format!("le=\"{le}\""), cum);
    }
    cum += s.latency[LATENCY_BOUNDS_US.len()];
    o.sample(&format!("{name}_bucket"), "le=\"+Inf\"", cum);
    o.sample(&format!("{name}_sum"), "", s.latency_sum_us as f64 / 1e6);
    o.sample(&format!("{name}_count"), "", cum);
}

/// The `/stats` object's `remote` entry (null without a remote tier).
pub(super) fn json(state: &AppState) -> Value {
    match snapshot(state) {
        None => Value::Null,
        Some(s) => json!(s),
    }
}
