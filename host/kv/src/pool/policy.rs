//! Eviction policy controls: the injectable clock, namespace priorities and caps, pins on a
//! prefix's blocks (with optional TTL), and explicit eviction. Pinned blocks are never evicted;
//! priority-pinned blocks and namespace priorities order eviction before LRU-2 recency.

use std::cmp::Reverse;
use std::time::{Duration, Instant};

use super::BlockPool;
use crate::hash::BlockHash;
use crate::ids::NamespaceId;
use crate::meta::PinLevel;
use crate::stats::EvictReason;

impl BlockPool {
    /// Fixes the pool's notion of now (for pin expiry) and lapses pins that expired by then.
    /// Without it the pool reads `Instant::now()`.
    pub fn set_now(&mut self, now: Instant) {
        self.now = Some(now);
        self.expire_pins();
    }

    /// Eviction priority of `ns`'s blocks: lower is evicted first (default 0).
    pub fn set_namespace_priority(&mut self, ns: NamespaceId, priority: i32) {
        let slot = self.ns_slot(ns);
        let n = &mut self.namespaces[slot];
        n.priority = priority;
        for &id in n.heap.items() {
            let m = &mut self.metas[id as usize];
            m.eff_prio = m.priority_under(priority);
        }
        n.heap.rebuild(&mut self.metas);
    }

    /// Caps the blocks attributed to `ns` (in use + cached); `None` lifts the cap. Over the cap,
    /// allocations evict the namespace's own cached blocks first, then fail with `QuotaExceeded`.
    pub fn set_namespace_cap(&mut self, ns: NamespaceId, cap: Option<usize>) {
        let slot = self.ns_slot(ns);
        self.namespaces[slot].cap = cap;
        self.stats.advisor().track(ns, cap);
    }

    /// The hit rate the advisor sizes for (`0 < target < 1`; other values are ignored).
    pub fn set_target_hit_rate(&mut self, target: f64) {
        self.stats.advisor().set_target(target);
    }

    /// Pins the resident blocks of the chain `root`, `tokens` (whole blocks, in prefix order,
    /// stopping at the first block not resident) at `level`, for `ttl` or until unpinned.
    /// Returns the blocks pinned. When a timed pin expires the block loses it and, until hit
    /// again, is evicted before every other block. A `ttl` too long to represent as an instant
    /// pins without expiry (saturating, never a panic).
    pub fn pin_prefix(
        &mut self,
        root: &BlockHash,
        tokens: &[u32],
        level: PinLevel,
        ttl: Option<Duration>,
    ) -> usize {
        let until = ttl.and_then(|d| self.now().checked_add(d));
        self.for_chain(root, tokens, |pool, id| pool.pin_block(id, level, until))
    }

    /// As [`BlockPool::pin_prefix`], for a chain given by its block hashes (in prefix order,
    /// stopping at the first not resident).
    pub fn pin_hashes(
        &mut self,
        hashes: &[BlockHash],
        level: PinLevel,
        ttl: Option<Duration>,
    ) -> usize {
        let until = ttl.and_then(|d| self.now().checked_add(d));
        let mut n = 0;
        for h in hashes {
            let Some(&id) = self.index.get(h) else { break };
            self.pin_block(id, level, until);
            n += 1;
        }
        n
    }

    fn pin_block(&mut self, id: u32, level: PinLevel, until: Option<Instant>) {
        self.dequeue(id);
        self.clear_auto_pin(id);
        let m = &mut self.metas[id as usize];
        m.pin = Some(level);
        m.pin_until = until;
        m.pin_epoch += 1;
        m.lapsed = false;
        if let Some(at) = until {
            self.timed_pins.push(Reverse((at, id, m.pin_epoch)));
        }
        self.enqueue_if_evictable(id);
    }

    /// Removes pins from the resident blocks of the chain; returns the blocks visited.
    pub fn unpin_prefix(&mut self, root: &BlockHash, tokens: &[u32]) -> usize {
        self.for_chain(root, tokens, |pool, id| {
            pool.dequeue(id);
            pool.clear_auto_pin(id);
            let m = &mut pool.metas[id as usize];
            m.pin = None;
            m.pin_until = None;
            m.pin_epoch += 1;
            pool.enqueue_if_evictable(id);
        })
    }

    /// Evicts up to `max` cached blocks in eviction order (leaf-first); returns how many.
    pub fn evict_cached(&mut self, max: usize) -> usize {
        self.expire_pins();
        let mut n = 0;
        while n < max && self.evict_next(None, EvictReason::Explicit) {
            n += 1;
        }
        n
    }

    fn for_chain(
        &mut self,
        root: &BlockHash,
        tokens: &[u32],
        mut f: impl FnMut(&mut Self, u32),
    ) -> usize {
        let mut prev = *root;
        let mut n = 0;
        for chunk in tokens.chunks_exact(self.layout.block_tokens) {
            let hash = BlockHash::chain(&prev, chunk);
            let Some(&id) = self.index.get(&hash) else {
                break;
            };
            f(self, id);
            prev = hash;
            n += 1;
        }
        n
    }
}
