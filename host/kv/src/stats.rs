//! Pool statistics readable from any thread without locking the pool: the pool writes relaxed
//! atomics in an `Arc<PoolStats>`; the per-namespace map is write-locked only when a namespace
//! first appears. Gauges mirror the pool's own counts after every operation.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use crate::advisor::{Advisor, AdvisorSnapshot};
use crate::ids::NamespaceId;
use crate::misses::{LostTier, MissCounters, MissSnapshot};

/// Why a block was evicted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EvictReason {
    /// Memory was needed for another allocation.
    Capacity,
    /// Its namespace reached its cap.
    Quota,
    /// Its timed pin ran out and it was not hit since (such blocks go first).
    Ttl,
    /// The host asked for it (`evict_cached`).
    Explicit,
}

/// Counters and gauges for the whole pool or one namespace.
#[derive(Debug, Default)]
pub struct Counters {
    /// Blocks referenced by a block table (namespace: attributed to it).
    pub blocks_used: AtomicU64,
    /// Unreferenced sealed blocks kept as prefix cache.
    pub blocks_cached: AtomicU64,
    /// Prompt tokens found in the cache by `match_prefix`.
    pub hit_tokens: AtomicU64,
    /// Prompt tokens `match_prefix` did not find (left to compute).
    pub miss_tokens: AtomicU64,
    /// Blocks found by `match_prefix`.
    pub hit_blocks: AtomicU64,
    /// Blocks of the prompt not found.
    pub miss_blocks: AtomicU64,
    /// Blocks brought back from a lower tier.
    pub promotions: AtomicU64,
    /// `promotions` by the tier that served them, indexed by [`LostTier`] (`Hot` stays 0;
    /// a source that does not say is counted in `promotions` only).
    pub promoted_from: [AtomicU64; 4],
    /// Evictions because memory was needed.
    pub evict_capacity: AtomicU64,
    /// Evictions because a namespace hit its cap.
    pub evict_quota: AtomicU64,
    /// Evictions of blocks whose pin expired.
    pub evict_ttl: AtomicU64,
    /// Evictions asked for by the host.
    pub evict_explicit: AtomicU64,
    /// Sequences forked.
    pub forks: AtomicU64,
    /// Partial tail blocks copied on write.
    pub cow_copies: AtomicU64,
    /// Prompts that continued a cached partial tail block (token-granular hits; its tokens
    /// count in `hit_tokens`).
    pub tail_hits: AtomicU64,
    /// Blocks sealed to a hash already cached, replaced by the cached copy.
    pub dedups: AtomicU64,
    /// Live sequences.
    pub seqs_active: AtomicU64,
    /// Allocations refused because the namespace was at its cap.
    pub quota_errors: AtomicU64,
    /// Allocations refused because the pool was full.
    pub out_of_blocks_errors: AtomicU64,
    /// `miss_blocks` (and their tokens) by reason.
    pub misses: MissCounters,
}

/// Pool-wide statistics plus one [`Counters`] per namespace.
#[derive(Debug)]
pub struct PoolStats {
    /// Blocks in the pool.
    pub blocks_total: u64,
    /// Bytes per block.
    pub block_bytes: u64,
    /// Tokens per block.
    pub block_tokens: u64,
    /// Bytes of the index that drafts from resident blocks (fixed with the pool).
    pub draft_index_bytes: AtomicU64,
    /// Blocks on the free list.
    pub blocks_free: AtomicU64,
    /// Blocks whose memory may be resident (one past the highest block id ever used, or the end
    /// of the prefault runway past it): the arena is reserved for `blocks_total` but committed
    /// page by page as blocks are first used or about to be.
    pub blocks_committed: AtomicU64,
    /// Unfilled slots of in-use and cached blocks: only partially filled tail blocks contribute.
    pub wasted_slots: AtomicU64,
    /// Blocks pinned by hot-prefix warming (`auto_pin`).
    pub auto_pinned_blocks: AtomicU64,
    /// Times the auto-pinned set was re-applied (a saver polls it to know when to write).
    pub auto_pin_changes: AtomicU64,
    /// Whole-pool counters.
    pub total: Counters,
    namespaces: RwLock<HashMap<NamespaceId, Arc<Counters>>>,
    /// The cache-sizing advisor, fed by the pool's thread; readers lock it briefly.
    advisor: Mutex<Advisor>,
}

/// Plain copy of [`Counters`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[allow(missing_docs)]
pub struct CountersSnapshot {
    pub blocks_used: u64,
    pub blocks_cached: u64,
    pub hit_tokens: u64,
    pub miss_tokens: u64,
    pub hit_blocks: u64,
    pub miss_blocks: u64,
    pub promotions: u64,
    pub promoted_from: [u64; 4],
    pub evict_capacity: u64,
    pub evict_quota: u64,
    pub evict_ttl: u64,
    pub evict_explicit: u64,
    pub forks: u64,
    pub cow_copies: u64,
    pub tail_hits: u64,
    pub dedups: u64,
    pub seqs_active: u64,
    pub quota_errors: u64,
    pub out_of_blocks_errors: u64,
    pub misses: MissSnapshot,
}

/// Plain copy of [`PoolStats`] with derived figures.
#[derive(Clone, Debug, PartialEq)]
pub struct StatsSnapshot {
    /// Blocks in the pool.
    pub blocks_total: u64,
    /// Free blocks.
    pub blocks_free: u64,
    /// Blocks whose memory may be resident (the rest is reserved address space only).
    pub blocks_committed: u64,
    /// Blocks in use.
    pub blocks_used: u64,
    /// Cached (evictable unless pinned) blocks.
    pub blocks_cached: u64,
    /// Bytes per block.
    pub block_bytes: u64,
    /// Tokens per block.
    pub block_tokens: u64,
    /// Unfilled slots in in-use and cached blocks (only partial tails).
    pub wasted_slots: u64,
    /// Whole-pool counters.
    pub total: CountersSnapshot,
    /// Per-namespace counters, sorted by namespace.
    pub namespaces: Vec<(NamespaceId, CountersSnapshot)>,
}

impl Counters {
    /// A plain copy.
    pub fn snapshot(&self) -> CountersSnapshot {
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        CountersSnapshot {
            blocks_used: r(&self.blocks_used),
            blocks_cached: r(&self.blocks_cached),
            hit_tokens: r(&self.hit_tokens),
            miss_tokens: r(&self.miss_tokens),
            hit_blocks: r(&self.hit_blocks),
            miss_blocks: r(&self.miss_blocks),
            promotions: r(&self.promotions),
            promoted_from: self.promoted_from.each_ref().map(r),
            evict_capacity: r(&self.evict_capacity),
            evict_quota: r(&self.evict_quota),
            evict_ttl: r(&self.evict_ttl),
            evict_explicit: r(&self.evict_explicit),
            forks: r(&self.forks),
            cow_copies: r(&self.cow_copies),
            tail_hits: r(&self.tail_hits),
            dedups: r(&self.dedups),
            seqs_active: r(&self.seqs_active),
            quota_errors: r(&self.quota_errors),
            out_of_blocks_errors: r(&self.out_of_blocks_errors),
            misses: self.misses.snapshot(),
        }
    }

    pub(crate) fn evictions_for(&self, reason: EvictReason) -> &AtomicU64 {
        match reason {
            EvictReason::Capacity => &self.evict_capacity,
            EvictReason::Quota => &self.evict_quota,
            EvictReason::Ttl => &self.evict_ttl,
            EvictReason::Explicit => &self.evict_explicit,
        }
    }
}

impl CountersSnapshot {
    /// Blocks brought back into the pool from tier `t`.
    pub fn promoted_from(&self, t: LostTier) -> u64 {
        self.promoted_from[t.bits() as usize]
    }

    /// Hit tokens over prompt tokens looked up (0 when none were).
    pub fn hit_rate(&self) -> f64 {
        let all = self.hit_tokens + self.miss_tokens;
        if all == 0 {
            0.0
        } else {
            self.hit_tokens as f64 / all as f64
        }
    }

    /// Prefill tokens not computed thanks to the cache.
    pub fn prefill_tokens_saved(&self) -> u64 {
        self.hit_tokens
    }

    /// Evictions for every reason.
    pub fn evictions(&self) -> u64 {
        self.evict_capacity + self.evict_quota + self.evict_ttl + self.evict_explicit
    }
}

impl StatsSnapshot {
    /// Bytes of the whole arena.
    pub fn bytes_total(&self) -> u64 {
        self.blocks_total * self.block_bytes
    }

    /// Bytes of the arena that may be resident (committed), at most [`Self::bytes_total`].
    pub fn bytes_committed(&self) -> u64 {
        self.blocks_committed * self.block_bytes
    }

    /// Bytes of blocks in use.
    pub fn bytes_used(&self) -> u64 {
        self.blocks_used * self.block_bytes
    }

    /// Bytes of cached blocks.
    pub fn bytes_cached(&self) -> u64 {
        self.blocks_cached * self.block_bytes
    }

    /// Bytes of free blocks.
    pub fn bytes_free(&self) -> u64 {
        self.blocks_free * self.block_bytes
    }

    /// Internal fragmentation: unfilled slots over the slots of held blocks. Paged blocks have
    /// no external fragmentation (any free block serves any sequence, so nothing needs
    /// compacting); this only counts partially filled tail blocks, at most `B - 1` slots each.
    pub fn fragmentation(&self) -> f64 {
        let held = (self.blocks_used + self.blocks_cached) * self.block_tokens;
        if held == 0 {
            0.0
        } else {
            self.wasted_slots as f64 / held as f64
        }
    }
}

impl PoolStats {
    pub(crate) fn new(blocks_total: u64, block_bytes: u64, block_tokens: u64) -> Self {
        Self {
            blocks_total,
            block_bytes,
            block_tokens,
            draft_index_bytes: AtomicU64::new(0),
            blocks_free: AtomicU64::new(blocks_total),
            blocks_committed: AtomicU64::new(0),
            wasted_slots: AtomicU64::new(0),
            auto_pinned_blocks: AtomicU64::new(0),
            auto_pin_changes: AtomicU64::new(0),
            total: Counters::default(),
            namespaces: RwLock::new(HashMap::new()),
            advisor: Mutex::new(Advisor::new(
                usize::try_from(blocks_total).unwrap_or(usize::MAX),
            )),
        }
    }

    /// The advisor, locked (the pool's thread feeds it; hold it only briefly).
    pub(crate) fn advisor(&self) -> MutexGuard<'_, Advisor> {
        self.advisor.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The advisor's curve for the whole pool.
    pub fn advisor_snapshot(&self) -> AdvisorSnapshot {
        self.advisor().snapshot()
    }

    /// The advisor's curve for `ns`, when it is one of the namespaces tracked individually.
    pub fn advisor_namespace(&self, ns: NamespaceId) -> Option<AdvisorSnapshot> {
        self.advisor().namespace(ns)
    }

    /// The counters of `ns`, registering them on first use (the only write to the map).
    pub(crate) fn register(&self, ns: NamespaceId) -> Arc<Counters> {
        let mut map = self.namespaces.write().unwrap_or_else(|e| e.into_inner());
        map.entry(ns).or_default().clone()
    }

    /// The counters of one namespace, if it has appeared.
    pub fn namespace(&self, ns: NamespaceId) -> Option<Arc<Counters>> {
        let map = self.namespaces.read().unwrap_or_else(|e| e.into_inner());
        map.get(&ns).cloned()
    }

    /// A plain copy of everything.
    pub fn snapshot(&self) -> StatsSnapshot {
        let mut namespaces: Vec<(NamespaceId, CountersSnapshot)> = {
            let map = self.namespaces.read().unwrap_or_else(|e| e.into_inner());
            map.iter().map(|(id, c)| (*id, c.snapshot())).collect()
        };
        namespaces.sort_by_key(|(id, _)| *id);
        let total = self.total.snapshot();
        StatsSnapshot {
            blocks_total: self.blocks_total,
            blocks_free: self.blocks_free.load(Ordering::Relaxed),
            blocks_committed: self.blocks_committed.load(Ordering::Relaxed),
            blocks_used: total.blocks_used,
            blocks_cached: total.blocks_cached,
            block_bytes: self.block_bytes,
            block_tokens: self.block_tokens,
            wasted_slots: self.wasted_slots.load(Ordering::Relaxed),
            total,
            namespaces,
        }
    }
}
