//! One fixed-size SHARDS estimator (SHARDS_max): samples keys below a threshold `T`, keeps
//! at most `s_max` of them with their last access time, and records each sampled reference's
//! reuse distance, scaled by `1/R` (`R = T / 2^64`), weighted `1/R`, into a histogram. When
//! a new key would exceed `s_max`, the largest sampled key is dropped and `T` lowered to it.
//! Hit rates carry the `SHARDS_adj` correction (see the module above).

use std::collections::BinaryHeap;

use super::fenwick::Fenwick;
use super::table::TimeTable;

/// Histogram buckets.
pub(crate) const BUCKETS: usize = 1024;
/// The histogram covers reuse distances up to this multiple of the budget it was built for.
pub(crate) const RANGE_SCALE: usize = 16;

#[derive(Debug)]
pub(crate) struct Shards {
    s_max: usize,
    /// Keys `< threshold` are sampled.
    threshold: u64,
    last: TimeTable,
    /// The sampled keys, largest first (exactly the keys of `last`).
    keys: BinaryHeap<u64>,
    marks: Fenwick,
    now: u32,
    /// Estimated references per bucket of scaled reuse distance.
    hist: Vec<f64>,
    /// Blocks per bucket.
    width: f64,
    /// Estimated references beyond the histogram's range.
    beyond: f64,
    /// Estimated first references (misses at every size).
    first: f64,
    /// References seen, sampled or not.
    pub refs: u64,
    /// References sampled.
    pub sampled: u64,
}

impl Shards {
    /// An estimator of at most `s_max` sampled keys, its histogram sized for budgets up to
    /// `RANGE_SCALE × budget_blocks`.
    pub fn new(s_max: usize, budget_blocks: usize) -> Self {
        let s_max = s_max.max(1);
        let range = budget_blocks.max(1).saturating_mul(RANGE_SCALE);
        Self {
            s_max,
            threshold: u64::MAX,
            last: TimeTable::new(s_max + 1),
            keys: BinaryHeap::with_capacity(s_max + 1),
            marks: Fenwick::new(4 * s_max),
            now: 0,
            hist: vec![0.0; BUCKETS],
            width: (range as f64 / BUCKETS as f64).max(1.0),
            beyond: 0.0,
            first: 0.0,
            refs: 0,
            sampled: 0,
        }
    }

    /// Bytes held (capacities, not lengths: they never change).
    pub fn memory_bytes(&self) -> usize {
        self.last.memory_bytes()
            + self.keys.capacity() * 8
            + self.marks.memory_bytes()
            + self.hist.len() * 8
            + std::mem::size_of::<Self>()
    }

    /// The sampling rate now.
    pub fn rate(&self) -> f64 {
        self.threshold as f64 / u64::MAX as f64
    }

    /// One prompt's references, looked up together: every reuse distance is measured against
    /// the stack as it stood before the prompt (as the pool matches a whole prompt before it
    /// allocates for its misses), then the keys move to the top in the order given, the last
    /// one topmost.
    pub fn access_all<I>(&mut self, keys: I, scratch: &mut Vec<(u32, u64)>)
    where
        I: Iterator<Item = u64> + Clone,
    {
        let rate = self.rate();
        let weight = 1.0 / rate;
        for key in keys.clone() {
            self.refs += 1;
            let key = key.max(1);
            if key >= self.threshold {
                continue;
            }
            self.sampled += 1;
            match self.last.get(key) {
                Some(t) => {
                    let after = self.last.len() as i64 - self.marks.prefix(t as usize);
                    let d = after.max(0) as f64 / rate;
                    match self.hist.get_mut((d / self.width) as usize) {
                        Some(h) => *h += weight,
                        None => self.beyond += weight,
                    }
                }
                None => self.first += weight,
            }
        }
        for key in keys {
            self.place(key, scratch);
        }
    }

    /// `key` became resident (a block sealed): a key not tracked yet enters at the top of the
    /// LRU stack (a generated block); a tracked one stays put (a prompt just placed it). No
    /// reference is counted.
    pub fn insert(&mut self, key: u64, scratch: &mut Vec<(u32, u64)>) {
        if self.last.get(key.max(1)).is_none() {
            self.place(key, scratch);
        }
    }

    /// Moves a sampled `key` to the top of the stack (tracking it if new).
    fn place(&mut self, key: u64, scratch: &mut Vec<(u32, u64)>) {
        let key = key.max(1);
        if key >= self.threshold {
            return;
        }
        if self.now as usize >= self.marks.len() {
            self.compact(scratch);
        }
        match self.last.get(key) {
            Some(t) => self.marks.add(t as usize, -1),
            None => {
                self.keys.push(key);
                if !self.shrink(key) {
                    return;
                }
            }
        }
        self.last.set(key, self.now);
        self.marks.add(self.now as usize, 1);
        self.now += 1;
    }

    /// Drops the largest keys while more than `s_max` are held, lowering the threshold; returns
    /// whether `key` is still held.
    fn shrink(&mut self, key: u64) -> bool {
        let mut kept = true;
        while self.keys.len() > self.s_max {
            let Some(top) = self.keys.pop() else { break };
            if let Some(t) = self.last.remove(top) {
                self.marks.add(t as usize, -1);
            }
            self.threshold = top;
            kept &= top != key;
        }
        kept
    }

    /// Renumbers access times `0..len` in order, freeing the upper slots.
    fn compact(&mut self, scratch: &mut Vec<(u32, u64)>) {
        scratch.clear();
        scratch.extend(self.last.iter().map(|(k, t)| (t, k)));
        scratch.sort_unstable();
        self.marks.clear();
        for (i, &(_, k)) in scratch.iter().enumerate() {
            self.last.set(k, i as u32);
            self.marks.add(i, 1);
        }
        self.now = scratch.len() as u32;
    }

    /// Estimated LRU hit rate with a cache of `blocks` blocks (0 before any reference).
    pub fn hit_rate(&self, blocks: f64) -> f64 {
        if self.refs == 0 {
            return 0.0;
        }
        ((self.hits_below(blocks) + self.adjustment()) / self.refs as f64).clamp(0.0, 1.0)
    }

    /// SHARDS_adj: the references sampling over- or under-counted (all references less the
    /// estimated ones), credited to the first bucket.
    fn adjustment(&self) -> f64 {
        self.refs as f64 - self.total_weight()
    }

    fn total_weight(&self) -> f64 {
        self.hist.iter().sum::<f64>() + self.beyond + self.first
    }

    /// Estimated references whose scaled reuse distance is below `blocks`.
    fn hits_below(&self, blocks: f64) -> f64 {
        let pos = (blocks / self.width).max(0.0);
        let whole = (pos as usize).min(self.hist.len());
        let mut s: f64 = self.hist[..whole].iter().sum();
        if let Some(h) = self.hist.get(whole) {
            s += h * (pos - whole as f64);
        }
        s
    }

    /// The smallest cache (in blocks) whose estimated hit rate reaches `target`, within the
    /// histogram's range.
    pub fn smallest_for(&self, target: f64) -> Option<u64> {
        if self.refs == 0 {
            return None;
        }
        let need = target * self.refs as f64;
        let mut s = self.adjustment();
        for (i, &h) in self.hist.iter().enumerate() {
            if s + h >= need && h > 0.0 {
                let frac = ((need - s) / h).clamp(0.0, 1.0);
                return Some(((i as f64 + frac) * self.width).ceil().max(1.0) as u64);
            }
            s += h;
        }
        None
    }
}
