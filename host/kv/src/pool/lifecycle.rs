//! Block lifecycle inside the pool: allocate, reference, release, evict, and keep the counts,
//! gauges, eviction heaps and parent/child links consistent on every transition.
//! Eviction is leaf-first: only cached blocks with no resident children are candidates, so a
//! resident block's whole ancestor chain stays resident and reachable from the root.

use std::cmp::Reverse;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use super::BlockPool;
use crate::error::PoolError;
use crate::ghost::Ghost;
use crate::ids::{NIL, NamespaceId};
use crate::meta::BlockState;
use crate::misses::LostTier;
use crate::namespace::NsState;
use crate::stats::{Counters, EvictReason};

impl BlockPool {
    /// The slot of `ns`, registering it (and its stats) on first use.
    pub(crate) fn ns_slot(&mut self, ns: NamespaceId) -> usize {
        if let Some(&slot) = self.ns_slots.get(&ns) {
            return slot;
        }
        let slot = self.namespaces.len();
        self.namespaces
            .push(NsState::new(ns, self.stats.register(ns)));
        self.ns_slots.insert(ns, slot);
        self.stats.advisor().track(ns, None);
        slot
    }

    pub(crate) fn now(&self) -> Instant {
        self.now.unwrap_or_else(Instant::now)
    }

    /// Adds `n` to a counter, pool-wide and for namespace slot `ns`.
    pub(crate) fn count<F: Fn(&Counters) -> &AtomicU64>(&self, ns: usize, field: F, n: u64) {
        field(&self.stats.total).fetch_add(n, Ordering::Relaxed);
        field(&self.namespaces[ns].stats).fetch_add(n, Ordering::Relaxed);
    }

    /// Adds one look-up's misses by reason, pool-wide and for namespace slot `ns`.
    pub(crate) fn count_misses(&self, ns: usize, t: &super::prefix::MissTally) {
        self.stats
            .total
            .misses
            .add_all(&t.blocks, &t.tokens, &t.lost_at);
        self.namespaces[ns]
            .stats
            .misses
            .add_all(&t.blocks, &t.tokens, &t.lost_at);
    }

    pub(crate) fn uncount<F: Fn(&Counters) -> &AtomicU64>(&self, ns: usize, field: F, n: u64) {
        field(&self.stats.total).fetch_sub(n, Ordering::Relaxed);
        field(&self.namespaces[ns].stats).fetch_sub(n, Ordering::Relaxed);
    }

    /// Moves a block to `to`, keeping counts, namespace holdings and gauges in step.
    fn set_state(&mut self, id: u32, to: BlockState) {
        let m = &mut self.metas[id as usize];
        let (from, owner) = (m.state, m.owner as usize);
        m.state = to;
        match from {
            BlockState::Free => self.namespaces[owner].held += 1,
            BlockState::Used => {
                self.n_used -= 1;
                self.uncount(owner, |c| &c.blocks_used, 1);
            }
            BlockState::Cached => {
                self.n_cached -= 1;
                self.uncount(owner, |c| &c.blocks_cached, 1);
            }
        }
        match to {
            BlockState::Free => self.namespaces[owner].held -= 1,
            BlockState::Used => {
                self.n_used += 1;
                self.count(owner, |c| &c.blocks_used, 1);
            }
            BlockState::Cached => {
                self.n_cached += 1;
                self.count(owner, |c| &c.blocks_cached, 1);
            }
        }
        let free = self.metas.len() - self.n_used - self.n_cached;
        self.stats.blocks_free.store(free as u64, Ordering::Relaxed);
    }

    /// Records an access for LRU-2. The block must not be in a heap (it is in use).
    pub(crate) fn touch(&mut self, id: u32) {
        self.tick += 1;
        let m = &mut self.metas[id as usize];
        debug_assert_eq!(m.heap_pos, NIL);
        m.penult = m.last;
        m.last = self.tick;
        m.lapsed = false;
    }

    pub(crate) fn set_filled(&mut self, id: u32, filled: usize) {
        let m = &mut self.metas[id as usize];
        self.wasted = self.wasted + m.filled as usize - filled;
        m.filled = filled as u32;
        self.stats
            .wasted_slots
            .store(self.wasted as u64, Ordering::Relaxed);
    }

    /// Takes a free block for namespace slot `owner`, with one reference. Callers make room first.
    pub(crate) fn alloc(&mut self, owner: usize) -> Result<u32, PoolError> {
        let id = self
            .free
            .pop_front(&mut self.metas)
            .ok_or(PoolError::OutOfBlocks {
                needed: 1,
                available: 0,
            })?;
        self.arena.note_used(id);
        self.stats
            .blocks_committed
            .fetch_max(self.arena.committed_blocks() as u64, Ordering::Relaxed);
        let m = &mut self.metas[id as usize];
        debug_assert_eq!(m.state, BlockState::Free);
        m.refcount = 1;
        m.owner = owner as u32;
        m.last = 0;
        m.penult = 0;
        self.wasted += self.layout.block_tokens;
        self.stats
            .wasted_slots
            .store(self.wasted as u64, Ordering::Relaxed);
        self.set_state(id, BlockState::Used);
        self.touch(id);
        Ok(id)
    }

    pub(crate) fn incref(&mut self, id: u32) {
        if self.metas[id as usize].state == BlockState::Cached {
            self.dequeue(id);
            self.set_state(id, BlockState::Used);
        }
        self.metas[id as usize].refcount += 1;
    }

    /// Drops one reference: a sealed block or retained tail at zero becomes cached, any other
    /// block free.
    pub(crate) fn decref(&mut self, id: u32) {
        let m = &mut self.metas[id as usize];
        debug_assert!(m.refcount > 0);
        m.refcount -= 1;
        if m.refcount > 0 {
            return;
        }
        if m.frozen() {
            self.set_state(id, BlockState::Cached);
            self.enqueue_if_evictable(id);
        } else {
            self.release(id);
        }
    }

    /// Puts a block in its namespace's eviction heap when it is cached, leaf and not pinned.
    pub(crate) fn enqueue_if_evictable(&mut self, id: u32) {
        let m = &mut self.metas[id as usize];
        if !m.evictable() || m.heap_pos != NIL {
            return;
        }
        let ns = &mut self.namespaces[m.owner as usize];
        m.eff_prio = m.priority_under(ns.priority);
        ns.heap.push(&mut self.metas, id);
    }

    pub(crate) fn dequeue(&mut self, id: u32) {
        let m = &self.metas[id as usize];
        if m.heap_pos != NIL {
            self.namespaces[m.owner as usize]
                .heap
                .remove(&mut self.metas, id);
        }
    }

    /// Returns an unreferenced block to the free list, unindexing and unlinking it if sealed.
    pub(crate) fn release(&mut self, id: u32) {
        let m = &mut self.metas[id as usize];
        debug_assert!(m.refcount == 0 && m.heap_pos == NIL && m.children == 0);
        let (hash, parent, filled) = (m.hash.take(), m.parent, m.filled as usize);
        let tail_of = m.tail_of.take();
        m.parent = NIL;
        m.pin = None;
        m.pin_until = None;
        m.pin_epoch += 1;
        m.lapsed = false;
        m.filled = 0;
        self.wasted -= self.layout.block_tokens - filled;
        self.stats
            .wasted_slots
            .store(self.wasted as u64, Ordering::Relaxed);
        if let Some(h) = hash {
            self.index.remove(&h);
            self.content.remove(id);
            self.forget_drafts(id);
        }
        if let Some(p) = tail_of {
            self.forget_tail(p, id);
        }
        self.clear_auto_pin(id);
        self.set_state(id, BlockState::Free);
        self.free.push_front(&mut self.metas, id);
        if parent != NIL {
            self.metas[parent as usize].children -= 1;
            self.enqueue_if_evictable(parent);
        }
    }

    /// Evicts a cached leaf block: hands it to the tier sink, then frees it.
    fn evict(&mut self, id: u32, reason: EvictReason) {
        self.dequeue(id);
        let m = &self.metas[id as usize];
        let reason = if m.lapsed { EvictReason::Ttl } else { reason };
        let owner = m.owner as usize;
        if let Some(h) = m.hash {
            let ghost = Ghost {
                expired: reason == EvictReason::Ttl,
                tier: self.sink.keeps().unwrap_or(LostTier::Hot),
            };
            self.ghost.record(&h, ghost);
            let b = self.layout.block_tokens;
            let at = id as usize * b;
            let tokens = &self.block_tokens[at..at + b];
            self.sink
                .demote(&h, self.namespaces[owner].id, tokens, self.arena.block(id));
        }
        self.count(owner, |c| c.evictions_for(reason), 1);
        self.release(id);
    }

    /// Evicts the best candidate of namespace slot `only`, or of the whole pool.
    pub(crate) fn evict_next(&mut self, only: Option<usize>, reason: EvictReason) -> bool {
        let pick = match only {
            Some(ns) => self.namespaces[ns].heap.peek(),
            None => self
                .namespaces
                .iter()
                .filter_map(|n| n.heap.peek())
                .min_by_key(|&id| (self.metas[id as usize].evict_key(), id)),
        };
        match pick {
            Some(id) => {
                self.evict(id, reason);
                true
            }
            None => false,
        }
    }

    /// Ensures `need` blocks can be allocated to namespace slot `ns`, evicting its own cached
    /// blocks for its cap and then any cached blocks for capacity. Fails before evicting
    /// anything when free plus cached blocks cannot cover `need`.
    pub(crate) fn make_room(&mut self, ns: usize, need: usize) -> Result<(), PoolError> {
        if need == 0 {
            return Ok(());
        }
        self.expire_pins();
        let available = self.free.len() + self.n_cached;
        if available < need {
            self.count(ns, |c| &c.out_of_blocks_errors, 1);
            return Err(PoolError::OutOfBlocks {
                needed: need,
                available,
            });
        }
        if let Some(cap) = self.namespaces[ns].cap {
            while self.namespaces[ns].held + need > cap {
                if !self.evict_next(Some(ns), EvictReason::Quota) {
                    self.count(ns, |c| &c.quota_errors, 1);
                    let n = &self.namespaces[ns];
                    return Err(PoolError::QuotaExceeded {
                        ns: n.id,
                        cap,
                        held: n.held,
                        needed: need,
                    });
                }
            }
        }
        while self.free.len() < need {
            if !self.evict_next(None, EvictReason::Capacity) {
                self.count(ns, |c| &c.out_of_blocks_errors, 1);
                return Err(PoolError::OutOfBlocks {
                    needed: need,
                    available: self.free.len(),
                });
            }
        }
        Ok(())
    }

    /// Lapses timed pins whose expiry has passed: they lose the pin and, until hit again, are
    /// evicted before anything else.
    pub(crate) fn expire_pins(&mut self) {
        let now = self.now();
        while let Some(&Reverse((at, id, epoch))) = self.timed_pins.peek() {
            if at > now {
                break;
            }
            self.timed_pins.pop();
            let m = &self.metas[id as usize];
            if m.pin_epoch != epoch || m.state == BlockState::Free {
                continue;
            }
            self.dequeue(id);
            let m = &mut self.metas[id as usize];
            m.pin = None;
            m.pin_until = None;
            m.pin_epoch += 1;
            m.lapsed = true;
            self.enqueue_if_evictable(id);
        }
    }
}
