//! The cold RAM tier: encoded (compressed, optionally lossy) blocks in memory under a byte
//! budget, evicted least-recently-used first. Invariants: `bytes` equals the sum of the stored
//! values' lengths and never exceeds the budget after a put returns; `lru` holds exactly one
//! entry per stored block, keyed by its last-use tick.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use memoria_kv::BlockHash;

use crate::remote::events::Tier as Place;
use crate::residency::Residency;
use crate::stats::TierStats;
use crate::tier::Tier;

#[derive(Default)]
struct Inner {
    map: HashMap<BlockHash, (Vec<u8>, u64)>,
    lru: BTreeMap<u64, BlockHash>,
    bytes: usize,
    tick: u64,
}

/// Compressed blocks in RAM with LRU eviction.
pub struct ColdTier {
    budget: usize,
    inner: Mutex<Inner>,
    stats: Arc<TierStats>,
    /// Told every block stored and removed, once watched.
    watch: OnceLock<Arc<Residency>>,
}

impl std::fmt::Debug for ColdTier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ColdTier")
            .field("budget", &self.budget)
            .finish_non_exhaustive()
    }
}

impl ColdTier {
    /// An empty tier holding at most `budget` encoded bytes.
    pub fn new(budget: usize) -> Self {
        let stats = TierStats::default();
        TierStats::add(&stats.budget_bytes, budget as u64);
        Self {
            budget,
            inner: Mutex::new(Inner::default()),
            stats: Arc::new(stats),
            watch: OnceLock::new(),
        }
    }

    /// Reports every block stored and removed from now on to `r` (the first watcher stays).
    pub fn watch(&self, r: Arc<Residency>) {
        let _ = self.watch.set(r);
    }

    fn moved(&self, hash: &BlockHash, held: bool) {
        if let Some(r) = self.watch.get() {
            r.record(*hash, Place::Cold, held);
        }
    }

    /// This tier's figures.
    pub fn stats(&self) -> &Arc<TierStats> {
        &self.stats
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        crate::sync::lock(&self.inner)
    }

    fn publish(&self, g: &Inner) {
        use std::sync::atomic::Ordering::Relaxed;
        self.stats.blocks.store(g.map.len() as u64, Relaxed);
        self.stats.bytes.store(g.bytes as u64, Relaxed);
    }

    /// Stores a block and returns the blocks evicted to make room (oldest first), so the
    /// caller can move them down a tier. A block larger than the budget is dropped.
    pub fn put_evicting(&self, hash: &BlockHash, encoded: Vec<u8>) -> Vec<(BlockHash, Vec<u8>)> {
        if encoded.len() > self.budget {
            TierStats::add(&self.stats.dropped, 1);
            return Vec::new();
        }
        let mut g = self.lock();
        remove_locked(&mut g, hash);
        g.tick += 1;
        let tick = g.tick;
        g.bytes += encoded.len();
        g.map.insert(*hash, (encoded, tick));
        g.lru.insert(tick, *hash);
        self.moved(hash, true);
        let mut out = Vec::new();
        while g.bytes > self.budget {
            let Some((_, victim)) = g.lru.pop_first() else {
                break;
            };
            if let Some((v, _)) = g.map.remove(&victim) {
                g.bytes -= v.len();
                self.moved(&victim, false);
                out.push((victim, v));
            }
        }
        TierStats::add(&self.stats.puts, 1);
        TierStats::add(&self.stats.evictions, out.len() as u64);
        self.publish(&g);
        out
    }

    /// Hashes of every stored block (for tests and tools).
    pub fn hashes(&self) -> Vec<BlockHash> {
        self.lock().map.keys().copied().collect()
    }
}

fn remove_locked(g: &mut Inner, hash: &BlockHash) -> bool {
    match g.map.remove(hash) {
        Some((v, tick)) => {
            g.bytes -= v.len();
            g.lru.remove(&tick);
            true
        }
        None => false,
    }
}

impl Tier for ColdTier {
    fn name(&self) -> &'static str {
        "cold"
    }

    fn get(&self, hash: &BlockHash) -> Option<Vec<u8>> {
        let mut g = self.lock();
        g.tick += 1;
        let tick = g.tick;
        let Inner { map, lru, .. } = &mut *g;
        let (v, t) = map.get_mut(hash)?;
        lru.remove(t);
        *t = tick;
        lru.insert(tick, *hash);
        Some(v.clone())
    }

    fn put(&self, hash: &BlockHash, encoded: Vec<u8>) {
        self.put_evicting(hash, encoded);
    }

    fn contains(&self, hash: &BlockHash) -> bool {
        self.lock().map.contains_key(hash)
    }

    fn remove(&self, hash: &BlockHash) -> bool {
        let mut g = self.lock();
        let r = remove_locked(&mut g, hash);
        self.publish(&g);
        if r {
            self.moved(hash, false);
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(i: u8) -> BlockHash {
        BlockHash([i; 32])
    }

    #[test]
    fn evicts_least_recently_used_within_budget() {
        let t = ColdTier::new(30);
        assert!(t.put_evicting(&h(1), vec![1; 10]).is_empty());
        assert!(t.put_evicting(&h(2), vec![2; 10]).is_empty());
        assert!(t.put_evicting(&h(3), vec![3; 10]).is_empty());
        assert_eq!(t.get(&h(1)), Some(vec![1; 10]));
        let out = t.put_evicting(&h(4), vec![4; 10]);
        assert_eq!(out, vec![(h(2), vec![2; 10])]);
        assert!(t.contains(&h(1)) && !t.contains(&h(2)));
        let s = t.stats().snapshot();
        assert_eq!((s.blocks, s.bytes, s.evictions), (3, 30, 1));
        assert!(t.remove(&h(1)));
        assert!(!t.remove(&h(1)));
        assert_eq!(t.stats().snapshot().bytes, 20);
        t.put(&h(9), vec![0; 31]);
        assert_eq!(t.stats().snapshot().dropped, 1);
    }

    #[test]
    fn replacing_a_block_keeps_the_byte_count() {
        let t = ColdTier::new(100);
        t.put(&h(1), vec![0; 40]);
        t.put(&h(1), vec![0; 20]);
        assert_eq!(t.stats().snapshot().bytes, 20);
        assert_eq!(t.hashes(), vec![h(1)]);
    }
}
