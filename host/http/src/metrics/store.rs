//! The store's own figures in `/metrics` (`memoria_store_*`) and in `/stats` (`tiers.disk` and
//! `tiers.cold`): per lower tier, blocks written, dropped, removed as corrupt or foreign, lossy
//! hits, partial-tail hits and failed reads and writes; for the disk tier, the file and what the
//! budget charges, named saves against their budget, the write-behind queue, commits and the time
//! they took, and whether the writer stopped (on a full disk or another failure). The block counts,
//! bytes, hits, misses, evictions and budgets are `memoria_kv_*{tier=...}`. Invariant: nothing is
//! written when the server runs without a store; read-only.

use memoria_store::{TierSnapshot, TierStack};
use serde_json::{Value, json};

use super::render::Out;
use crate::state::AppState;

/// `(writer stopped, stopped because the disk is full)`.
fn writer_state(store: &TierStack) -> (bool, bool) {
    match store.disk().and_then(|d| d.failure()) {
        Some(e) => (true, e.is_full()),
        None => (false, false),
    }
}

/// Counters kept for every lower tier: (family, help, value).
type PerTier = (&'static str, &'static str, fn(&TierSnapshot) -> u64);

const PER_TIER: [PerTier; 8] = [
    (
        "memoria_store_puts_total",
        "Blocks written to a lower tier (disk: committed).",
        |t| t.puts,
    ),
    (
        "memoria_store_dropped_total",
        "Blocks a lower tier declined: over its budget, its write queue full, or its writer stopped.",
        |t| t.dropped,
    ),
    (
        "memoria_store_corrupt_removed_total",
        "Stored blocks that failed verification (checksum, length, format) and were removed.",
        |t| t.corrupt_removed,
    ),
    (
        "memoria_store_foreign_removed_total",
        "Stored blocks of another model, element type, layout or namespace, removed.",
        |t| t.foreign_removed,
    ),
    (
        "memoria_store_lossy_hits_total",
        "Lower-tier hits on blocks stored lossily (q8_0/q4_0): served, not bit-exact.",
        |t| t.lossy_hits,
    ),
    (
        "memoria_store_tail_hits_total",
        "Lower-tier hits on a retained partial tail (the tokens after a prompt's last whole block).",
        |t| t.tail_hits,
    ),
    (
        "memoria_store_read_errors_total",
        "Lower-tier reads that failed (a damaged page, an I/O error), served as misses.",
        |t| t.read_errors,
    ),
    (
        "memoria_store_write_errors_total",
        "Write transactions that failed (a full disk, an I/O error, a damaged file).",
        |t| t.write_errors,
    ),
];

/// Gauges of the disk tier: (family, help, value).
const DISK_GAUGES: [PerTier; 6] = [
    (
        "memoria_store_disk_file_bytes",
        "Size of the store file after the last commit.",
        |t| t.file_bytes,
    ),
    (
        "memoria_store_disk_charged_bytes",
        "File bytes the stored blocks cost, as the disk budget counts them.",
        |t| t.charged_bytes,
    ),
    (
        "memoria_store_saves_bytes",
        "Bytes of named session saves, as their budget counts them.",
        |t| t.saves_bytes,
    ),
    (
        "memoria_store_saves_budget_bytes",
        "The named saves' budget.",
        |t| t.saves_budget_bytes,
    ),
    (
        "memoria_store_writer_queue_blocks",
        "Blocks waiting in the disk tier's write-behind queue.",
        |t| t.queue_blocks,
    ),
    (
        "memoria_store_writer_queue_bytes",
        "Bytes waiting in the disk tier's write-behind queue.",
        |t| t.queue_bytes,
    ),
];

/// Appends the store's families.
pub(super) fn render(o: &mut Out, state: &AppState) {
    let Some(store) = &state.store else { return };
    let s = store.snapshot();
    let lower = [("cold", &s.cold), ("disk", &s.redb)];
    o.family(
        "memoria_store_budget_bytes",
        "gauge",
        "Byte budget of each lower tier (disk: the whole file).",
    );
    for (tier, t) in lower {
        o.sample(
            "memoria_store_budget_bytes",
            &format!("tier=\"{tier}\""),
            t.budget_bytes,
        );
    }
    for (name, help, value) in PER_TIER {
        o.family(name, "counter", help);
        for (tier, t) in lower {
            o.sample(name, &format!("tier=\"{tier}\""), value(t));
        }
    }
    for (name, help, value) in DISK_GAUGES {
        o.family(name, "gauge", help);
        o.sample(name, "", value(&s.redb));
    }
    let d = &s.redb;
    o.family(
        "memoria_store_commits_total",
        "counter",
        "Write transactions the disk tier committed.",
    );
    o.sample("memoria_store_commits_total", "", d.commits);
    o.family(
        "memoria_store_durable_commits_total",
        "counter",
        "Of the disk tier's commits, those made durable with an fsync (saves, flushes, and cache \
         blocks once a second); the others hold cache blocks only.",
    );
    o.sample("memoria_store_durable_commits_total", "", d.durable_commits);
    o.family(
        "memoria_store_writer_resumes_total",
        "counter",
        "Times the disk tier's writer wrote again after a disk failure (the file closed and reopened).",
    );
    o.sample("memoria_store_writer_resumes_total", "", d.resumes);
    o.family(
        "memoria_store_written_bytes_total",
        "counter",
        "Bytes the disk tier committed.",
    );
    o.sample("memoria_store_written_bytes_total", "", d.bytes_written);
    o.family(
        "memoria_store_write_seconds_total",
        "counter",
        "Time the disk tier's writer spent encoding and committing.",
    );
    o.sample(
        "memoria_store_write_seconds_total",
        "",
        d.write_micros as f64 / 1e6,
    );
    let (stopped, full) = writer_state(store);
    o.family(
        "memoria_store_writer_stopped",
        "gauge",
        "1 while the disk tier's writer is stopped by a failure (blocks dropped, saves refused).",
    );
    o.sample("memoria_store_writer_stopped", "", u8::from(stopped));
    o.family(
        "memoria_store_disk_full",
        "gauge",
        "1 while the disk tier's writer is stopped because the disk is full (ENOSPC).",
    );
    o.sample("memoria_store_disk_full", "", u8::from(full));
}

/// The `/stats` figures of a lower tier beyond blocks, bytes, hits, misses, evictions and
/// budget.
pub(super) fn tier_json(t: &TierSnapshot) -> Value {
    json!({
        "puts": t.puts,
        "dropped": t.dropped,
        "corrupt_removed": t.corrupt_removed,
        "foreign_removed": t.foreign_removed,
        "lossy_hits": t.lossy_hits,
        "tail_hits": t.tail_hits,
        "read_errors": t.read_errors,
        "write_errors": t.write_errors,
    })
}

/// The disk tier's `/stats` figures: file, saves, queue, commits and the writer's state.
pub(super) fn disk_json(store: &TierStack, d: &TierSnapshot) -> Value {
    let (stopped, full) = writer_state(store);
    json!({
        "file_bytes": d.file_bytes,
        "charged_bytes": d.charged_bytes,
        "saves_bytes": d.saves_bytes,
        "saves_budget_bytes": d.saves_budget_bytes,
        "queue_blocks": d.queue_blocks,
        "queue_bytes": d.queue_bytes,
        "commits": d.commits,
        "durable_commits": d.durable_commits,
        "writer_resumes": d.resumes,
        "compactions": d.compactions,
        "recoveries": d.recoveries,
        "bytes_written": d.bytes_written,
        "write_seconds": d.write_micros as f64 / 1e6,
        "writer_stopped": stopped,
        "full": full,
    })
}
