//! The remote tier's figures as atomics (readable from any thread) and a plain snapshot for
//! /stats and /metrics. Counters only grow; `queue_bytes`, `queue_blocks` and `breaker` are
//! gauges. Misses are counted per block, by reason, and refused values per [`Refusal`].

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use serde::Serialize;

/// Upper bounds (microseconds) of the fetch latency histogram's buckets; the last is +Inf.
pub const LATENCY_BOUNDS_US: [u64; 10] = [
    250, 500, 1_000, 2_000, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000,
];

/// Live figures of the remote tier.
#[derive(Debug, Default)]
pub struct RemoteStats {
    /// Blocks served (verified values).
    pub hits: AtomicU64,
    /// Blocks the server did not hold.
    pub miss_absent: AtomicU64,
    /// Blocks not fetched because an operation timed out.
    pub miss_timeout: AtomicU64,
    /// Blocks not fetched because of a connection or protocol error (refused, reset).
    pub miss_error: AtomicU64,
    /// Blocks not asked for because the breaker was open.
    pub miss_breaker: AtomicU64,
    /// Blocks a prefetch still wanted when its deadline (the estimated time to compute them)
    /// passed: computed instead.
    pub miss_deadline: AtomicU64,
    /// Values refused, whatever the reason (the sum of the `refused_*` counters).
    pub bad_values: AtomicU64,
    /// Values refused because their tag did not verify under the hosts' key (written by someone
    /// without the key, altered, or copied from another key); left on the server.
    pub refused_auth: AtomicU64,
    /// Values with a good tag that failed the codec's checks (truncated, garbage); deleted.
    pub refused_corrupt: AtomicU64,
    /// Intact values of another model, layout, namespace or tokens; deleted.
    pub refused_foreign: AtomicU64,
    /// Blocks written again because a lookup found them missing on the server while this host
    /// held them (the server restarted, was flushed, or evicted them).
    pub rewrites: AtomicU64,
    /// Times the server's key count fell by half or more between two size polls (a restart, a
    /// FLUSHALL): every block known to be there was forgotten, so lookups check again.
    pub server_losses: AtomicU64,
    /// Value bytes received.
    pub bytes_read: AtomicU64,
    /// Value bytes written (acknowledged).
    pub bytes_written: AtomicU64,
    /// Blocks written (acknowledged).
    pub writes: AtomicU64,
    /// Writes dropped: full queue or open breaker.
    pub writes_dropped: AtomicU64,
    /// Writes that failed on the wire.
    pub write_errors: AtomicU64,
    /// Keys deleted (bad values).
    pub deletes: AtomicU64,
    /// Network operations that failed (each counted once, whatever its size).
    pub errors: AtomicU64,
    /// Times the breaker opened.
    pub breaker_opens: AtomicU64,
    /// Breaker state (gauge): 0 closed, 1 open, 2 half-open.
    pub breaker: AtomicU64,
    /// Bytes in the write-behind queue (gauge).
    pub queue_bytes: AtomicU64,
    /// Writes in the write-behind queue (gauge).
    pub queue_blocks: AtomicU64,
    /// Keys in the server's database at the last size poll (gauge; every host's blocks, and
    /// anything else kept in that database).
    pub server_keys: AtomicU64,
    /// The server's `used_memory` at the last size poll (gauge).
    pub server_bytes: AtomicU64,
    /// Lookups answered (one batch of keys, however many MGET runs it took); each is one
    /// observation of the fetch latency.
    pub fetches: AtomicU64,
    /// MGET commands sent (a lookup sends one per run of keys, per slot in cluster mode).
    pub mget_runs: AtomicU64,
    /// Fetch latency histogram, per [`LATENCY_BOUNDS_US`] plus +Inf (not cumulative).
    pub latency: [AtomicU64; 11],
    /// Sum of fetch latencies, microseconds.
    pub latency_sum_us: AtomicU64,
}

/// Why a remote value was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Its tag did not verify under the hosts' key.
    Auth,
    /// Its tag verified, the codec's checks failed.
    Corrupt,
    /// Intact, but another model's, layout's, namespace's or tokens' value.
    Foreign,
}

impl Refusal {
    /// The label in `/metrics` (`memoria_remote_refused_total{reason=..}`).
    pub fn name(self) -> &'static str {
        match self {
            Refusal::Auth => "auth",
            Refusal::Corrupt => "corrupt",
            Refusal::Foreign => "foreign",
        }
    }
}

impl RemoteStats {
    pub(crate) fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Relaxed);
    }

    /// Counts one refused value.
    pub(crate) fn refused(&self, why: Refusal) {
        Self::add(&self.bad_values, 1);
        Self::add(
            match why {
                Refusal::Auth => &self.refused_auth,
                Refusal::Corrupt => &self.refused_corrupt,
                Refusal::Foreign => &self.refused_foreign,
            },
            1,
        );
    }

    pub(crate) fn sub(c: &AtomicU64, n: u64) {
        let _ = c.try_update(Relaxed, Relaxed, |v| Some(v.saturating_sub(n)));
    }

    pub(crate) fn observe_fetch(&self, micros: u64) {
        let i = LATENCY_BOUNDS_US
            .iter()
            .position(|b| micros <= *b)
            .unwrap_or(LATENCY_BOUNDS_US.len());
        Self::add(&self.latency[i], 1);
        Self::add(&self.latency_sum_us, micros);
        Self::add(&self.fetches, 1);
    }

    /// All misses, whatever the reason (bad values included).
    pub fn misses(&self) -> u64 {
        self.snapshot().misses()
    }

    /// A plain copy.
    pub fn snapshot(&self) -> RemoteSnapshot {
        let g = |c: &AtomicU64| c.load(Relaxed);
        RemoteSnapshot {
            hits: g(&self.hits),
            miss_absent: g(&self.miss_absent),
            miss_timeout: g(&self.miss_timeout),
            miss_error: g(&self.miss_error),
            miss_breaker: g(&self.miss_breaker),
            miss_deadline: g(&self.miss_deadline),
            bad_values: g(&self.bad_values),
            refused_auth: g(&self.refused_auth),
            refused_corrupt: g(&self.refused_corrupt),
            refused_foreign: g(&self.refused_foreign),
            rewrites: g(&self.rewrites),
            server_losses: g(&self.server_losses),
            bytes_read: g(&self.bytes_read),
            bytes_written: g(&self.bytes_written),
            writes: g(&self.writes),
            writes_dropped: g(&self.writes_dropped),
            write_errors: g(&self.write_errors),
            deletes: g(&self.deletes),
            errors: g(&self.errors),
            breaker_opens: g(&self.breaker_opens),
            breaker: g(&self.breaker),
            queue_bytes: g(&self.queue_bytes),
            queue_blocks: g(&self.queue_blocks),
            server_keys: g(&self.server_keys),
            server_bytes: g(&self.server_bytes),
            fetches: g(&self.fetches),
            mget_runs: g(&self.mget_runs),
            latency: self.latency.each_ref().map(g),
            latency_sum_us: g(&self.latency_sum_us),
        }
    }
}

impl RemoteSnapshot {
    /// Refused values per reason, for `/metrics`.
    pub fn refused(&self) -> [(Refusal, u64); 3] {
        [
            (Refusal::Auth, self.refused_auth),
            (Refusal::Corrupt, self.refused_corrupt),
            (Refusal::Foreign, self.refused_foreign),
        ]
    }

    /// All misses, whatever the reason (bad values included).
    pub fn misses(&self) -> u64 {
        self.miss_absent
            + self.miss_timeout
            + self.miss_error
            + self.miss_breaker
            + self.miss_deadline
            + self.bad_values
    }
}

/// A plain copy of [`RemoteStats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RemoteSnapshot {
    pub hits: u64,
    pub miss_absent: u64,
    pub miss_timeout: u64,
    pub miss_error: u64,
    pub miss_breaker: u64,
    pub miss_deadline: u64,
    pub bad_values: u64,
    pub refused_auth: u64,
    pub refused_corrupt: u64,
    pub refused_foreign: u64,
    pub rewrites: u64,
    pub server_losses: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub writes: u64,
    pub writes_dropped: u64,
    pub write_errors: u64,
    pub deletes: u64,
    pub errors: u64,
    pub breaker_opens: u64,
    pub breaker: u64,
    pub queue_bytes: u64,
    pub queue_blocks: u64,
    pub server_keys: u64,
    pub server_bytes: u64,
    pub fetches: u64,
    pub mget_runs: u64,
    pub latency: [u64; 11],
    pub latency_sum_us: u64,
}
