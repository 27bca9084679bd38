//! The RAM the store may hold, budget by budget: the cold tier's encoded bytes, the blocks
//! queued for the cold tier's encoder, redb's page cache and write-behind queue, and the remote
//! tier's in-flight bytes. The figures are the configured bounds (what `/stats` puts next to
//! the process's resident set), not current use.

use crate::demote_queue::QUEUE_DEPTH;
use crate::stack::TierStack;

impl TierStack {
    /// `(name, bytes)` for each RAM budget of the configured tiers; `block_bytes` is one raw
    /// K/V block (what a queued demotion holds).
    pub fn memory_budgets(&self, block_bytes: u64) -> Vec<(&'static str, u64)> {
        let mut out = Vec::new();
        if let Some(cold) = self.cold() {
            out.push((
                "cold_tier",
                cold.stats()
                    .budget_bytes
                    .load(std::sync::atomic::Ordering::Relaxed),
            ));
            out.push((
                "cold_encode_queue",
                (QUEUE_DEPTH as u64).saturating_mul(block_bytes),
            ));
        }
        if let Some(disk) = self.disk() {
            let (cache, queue) = disk.memory_budgets();
            out.push(("disk_page_cache", cache));
            out.push(("disk_write_queue", queue));
        }
        if let Some(remote) = self.remote() {
            out.push((
                "remote_inflight",
                u64::try_from(remote.options().max_inflight_bytes).unwrap_or(u64::MAX),
            ));
        }
        out
    }
}
