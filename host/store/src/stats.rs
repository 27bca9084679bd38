//! Store figures as atomics, one [`TierStats`] per tier, readable from any thread while the
//! engine and the writer run. Gauges (`blocks`, `bytes`, `queue_*`) are stored, counters only
//! ever grow.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use serde::Serialize;

/// Live figures of one tier.
#[derive(Debug, Default)]
pub struct TierStats {
    /// Blocks held (gauge).
    pub blocks: AtomicU64,
    /// Encoded bytes held (gauge).
    pub bytes: AtomicU64,
    pub hits: AtomicU64,
    /// Partial tails served (disk only; not counted in `hits`, which are whole blocks).
    pub tail_hits: AtomicU64,
    /// Of the hits, blocks stored lossily (q8_0/q4_0): served, but not bit-exact.
    pub lossy_hits: AtomicU64,
    pub misses: AtomicU64,
    /// Blocks written (for redb: committed).
    pub puts: AtomicU64,
    /// Blocks evicted for the tier's budget.
    pub evictions: AtomicU64,
    /// Stored values that failed verification (checksum, length, format) and were removed.
    pub corrupt_removed: AtomicU64,
    /// Stored values for another model, element type, layout or namespace, removed.
    pub foreign_removed: AtomicU64,
    /// Puts declined: budget too small for the block, or the write queue was full.
    pub dropped: AtomicU64,
    /// Blocks waiting in the write-behind queue (gauge; redb only).
    pub queue_blocks: AtomicU64,
    /// Bytes waiting in the write-behind queue (gauge; redb only).
    pub queue_bytes: AtomicU64,
    /// Write transactions committed (redb only).
    pub commits: AtomicU64,
    /// Of the commits, those made durable with an fsync (redb only; the others hold cache
    /// blocks only).
    pub durable_commits: AtomicU64,
    /// Times the writer resumed after a disk failure (redb only).
    pub resumes: AtomicU64,
    /// Time spent encoding and committing, in microseconds (redb only).
    pub write_micros: AtomicU64,
    /// Bytes committed (redb only).
    pub bytes_written: AtomicU64,
    /// The tier's byte budget (gauge; for redb: the whole file).
    pub budget_bytes: AtomicU64,
    /// File bytes the stored blocks cost, as the budget counts them (gauge; redb only).
    pub charged_bytes: AtomicU64,
    /// Bytes of named saves, as their budget counts them (gauge; redb only).
    pub saves_bytes: AtomicU64,
    /// The named saves' budget (gauge; redb only).
    pub saves_budget_bytes: AtomicU64,
    /// Size of the store file after the last commit (gauge; redb only).
    pub file_bytes: AtomicU64,
    /// Reads that failed (a damaged page, an I/O error) and were served as misses.
    pub read_errors: AtomicU64,
    /// Write transactions that failed (full disk, I/O error, damaged file).
    pub write_errors: AtomicU64,
    /// Times the file was compacted to bring it back within its budget (redb only).
    pub compactions: AtomicU64,
    /// Times a damaged file was moved aside and an empty one started (redb only,
    /// `--store-recover`).
    pub recoveries: AtomicU64,
}

/// A plain copy of [`TierStats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TierSnapshot {
    pub blocks: u64,
    pub bytes: u64,
    pub hits: u64,
    pub tail_hits: u64,
    pub lossy_hits: u64,
    pub misses: u64,
    pub puts: u64,
    pub evictions: u64,
    pub corrupt_removed: u64,
    pub foreign_removed: u64,
    pub dropped: u64,
    pub queue_blocks: u64,
    pub queue_bytes: u64,
    pub commits: u64,
    pub durable_commits: u64,
    pub resumes: u64,
    pub write_micros: u64,
    pub bytes_written: u64,
    pub budget_bytes: u64,
    pub charged_bytes: u64,
    pub saves_bytes: u64,
    pub saves_budget_bytes: u64,
    pub file_bytes: u64,
    pub read_errors: u64,
    pub write_errors: u64,
    pub compactions: u64,
    pub recoveries: u64,
}

impl TierStats {
    /// A plain copy.
    pub fn snapshot(&self) -> TierSnapshot {
        TierSnapshot {
            blocks: self.blocks.load(Relaxed),
            bytes: self.bytes.load(Relaxed),
            hits: self.hits.load(Relaxed),
            tail_hits: self.tail_hits.load(Relaxed),
            lossy_hits: self.lossy_hits.load(Relaxed),
            misses: self.misses.load(Relaxed),
            puts: self.puts.load(Relaxed),
            evictions: self.evictions.load(Relaxed),
            corrupt_removed: self.corrupt_removed.load(Relaxed),
            foreign_removed: self.foreign_removed.load(Relaxed),
            dropped: self.dropped.load(Relaxed),
            queue_blocks: self.queue_blocks.load(Relaxed),
            queue_bytes: self.queue_bytes.load(Relaxed),
            commits: self.commits.load(Relaxed),
            durable_commits: self.durable_commits.load(Relaxed),
            resumes: self.resumes.load(Relaxed),
            write_micros: self.write_micros.load(Relaxed),
            bytes_written: self.bytes_written.load(Relaxed),
            budget_bytes: self.budget_bytes.load(Relaxed),
            charged_bytes: self.charged_bytes.load(Relaxed),
            saves_bytes: self.saves_bytes.load(Relaxed),
            saves_budget_bytes: self.saves_budget_bytes.load(Relaxed),
            file_bytes: self.file_bytes.load(Relaxed),
            read_errors: self.read_errors.load(Relaxed),
            write_errors: self.write_errors.load(Relaxed),
            compactions: self.compactions.load(Relaxed),
            recoveries: self.recoveries.load(Relaxed),
        }
    }

    pub(crate) fn add(field: &AtomicU64, n: u64) {
        field.fetch_add(n, Relaxed);
    }
}

impl TierSnapshot {
    /// Blocks committed per second of write time (0 before the first commit).
    pub fn blocks_per_write_second(&self) -> f64 {
        if self.write_micros == 0 {
            0.0
        } else {
            self.puts as f64 * 1e6 / self.write_micros as f64
        }
    }
}

/// Figures of the whole stack.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct StoreSnapshot {
    /// Compressed RAM tier.
    pub cold: TierSnapshot,
    /// redb tier.
    pub redb: TierSnapshot,
    /// Whether the cold tier stores f16 blocks lossily.
    pub cold_lossy: bool,
    /// The remote tier (Valkey/Redis), when configured.
    pub remote: Option<crate::remote::RemoteSnapshot>,
}
