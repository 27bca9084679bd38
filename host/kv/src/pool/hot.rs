//! Hot-prefix warming (`[cache] auto_pin = K`): the pool tracks the prefixes prompts reuse
//! most, by the deepest block each match hit (its chain end), with counts decayed by half
//! every [`HALF_LIFE`] matches, in a fixed table of [`CANDIDATES`] entries (space-saving: a new
//! chain end replaces the lowest, starting one above it). The top `K` chains are pinned
//! (`Pinned`, every block from the end up to the root) and unpinned when they leave the top.
//! Invariants: only blocks this module pinned carry the auto mark, and it unpins only those
//! (an explicit `pin_prefix`/`unpin_prefix` takes a block over and clears its mark); at most a
//! quarter of the pool is auto-pinned; the table and the pinned list never grow after
//! creation. A new pool starts with no history: the host saves the pinned chains
//! (`hot_chains`, module `hot_seed`) and seeds them back after a restart (`seed_hot`).

use super::BlockPool;
use crate::hash::BlockHash;
use crate::ids::NIL;
use crate::meta::PinLevel;

/// Chain ends tracked.
pub const CANDIDATES: usize = 64;
/// Matches after which a count has halved.
pub const HALF_LIFE: f64 = 64.0;

#[derive(Clone, Copy, Debug)]
struct Cand {
    end: BlockHash,
    score: f64,
    at: u64,
}

/// The tracker and the blocks it pinned.
#[derive(Debug)]
pub(crate) struct HotPrefixes {
    k: usize,
    clock: u64,
    cands: Vec<Cand>,
    /// Chain ends pinned now (the top `k` when last applied).
    pinned_ends: Vec<BlockHash>,
    /// Blocks carrying the auto mark (`auto[id]`), and their ids.
    auto: Vec<bool>,
    auto_ids: Vec<u32>,
    max_pinned: usize,
}

impl HotPrefixes {
    pub fn new(n_blocks: usize) -> Self {
        let max_pinned = n_blocks / 4;
        Self {
            k: 0,
            clock: 0,
            cands: Vec::with_capacity(CANDIDATES),
            pinned_ends: Vec::with_capacity(CANDIDATES),
            auto: vec![false; n_blocks],
            auto_ids: Vec::with_capacity(max_pinned),
            max_pinned,
        }
    }

    fn decayed(&self, c: &Cand) -> f64 {
        c.score * (-((self.clock - c.at) as f64) / HALF_LIFE).exp2()
    }

    /// Counts one match ending at `end`.
    fn note(&mut self, end: BlockHash) {
        self.clock += 1;
        let now = self.clock;
        if let Some(i) = self.cands.iter().position(|c| c.end == end) {
            let s = self.decayed(&self.cands[i]) + 1.0;
            self.cands[i] = Cand {
                end,
                score: s,
                at: now,
            };
            return;
        }
        if self.cands.len() < CANDIDATES {
            self.cands.push(Cand {
                end,
                score: 1.0,
                at: now,
            });
            return;
        }
        let (i, low) = self
            .cands
            .iter()
            .enumerate()
            .map(|(i, c)| (i, self.decayed(c)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .unwrap_or((0, 0.0));
        self.cands[i] = Cand {
            end,
            score: low + 1.0,
            at: now,
        };
    }

    /// The pinned chain ends with their decayed counts, highest first.
    pub(super) fn pinned(&self) -> impl Iterator<Item = (BlockHash, f64)> + '_ {
        self.pinned_ends.iter().map(|e| {
            let score = self
                .cands
                .iter()
                .find(|c| c.end == *e)
                .map_or(0.0, |c| self.decayed(c));
            (*e, score)
        })
    }

    /// Sets the chain ending at `end` to at least `count` (a finite, non-negative count from a
    /// saved record; anything else counts as 1), taking the lowest slot when the table is full.
    fn seed(&mut self, end: BlockHash, count: f64) {
        let count = if count.is_finite() && count >= 1.0 {
            count.min(f64::from(u32::MAX))
        } else {
            1.0
        };
        let now = self.clock;
        if let Some(i) = self.cands.iter().position(|c| c.end == end) {
            let s = self.decayed(&self.cands[i]).max(count);
            self.cands[i] = Cand {
                end,
                score: s,
                at: now,
            };
            return;
        }
        let cand = Cand {
            end,
            score: count,
            at: now,
        };
        if self.cands.len() < CANDIDATES {
            self.cands.push(cand);
            return;
        }
        let low = self
            .cands
            .iter()
            .enumerate()
            .map(|(i, c)| (i, self.decayed(c)))
            .min_by(|a, b| a.1.total_cmp(&b.1));
        if let Some((i, s)) = low
            && s < count
        {
            self.cands[i] = cand;
        }
    }

    /// Orders candidates by decayed count (highest first); true when the top `k` changed.
    fn rank(&mut self) -> bool {
        let clock = self.clock;
        let decayed = |c: &Cand| c.score * (-((clock - c.at) as f64) / HALF_LIFE).exp2();
        self.cands
            .sort_unstable_by(|a, b| decayed(b).total_cmp(&decayed(a)).then(a.end.cmp(&b.end)));
        let top = self.cands.iter().take(self.k).map(|c| c.end);
        let same = self.pinned_ends.len() == top.len()
            && top.clone().all(|e| self.pinned_ends.contains(&e));
        !same
    }
}

impl BlockPool {
    /// Keeps the `k` most reused prefixes pinned (at most [`CANDIDATES`]); 0 turns it off
    /// and unpins what it pinned.
    pub fn set_auto_pin(&mut self, k: usize) {
        self.hot.k = k.min(CANDIDATES);
        self.apply_auto_pins();
    }

    /// Blocks pinned by hot-prefix warming now.
    pub fn auto_pinned_blocks(&self) -> usize {
        self.hot.auto_ids.len()
    }

    /// A match hit up to the block `end`: counts it and re-pins when the top changes.
    pub(crate) fn note_hot(&mut self, end: BlockHash) {
        if self.hot.k == 0 {
            return;
        }
        self.hot.note(end);
        if self.hot.rank() {
            self.apply_auto_pins();
        }
    }

    /// Counts the chain ending at `end` as reused `count` times (a re-warmed prefix from a
    /// saved record) and re-pins when the top changes; nothing when `auto_pin` is off.
    pub fn seed_hot(&mut self, end: BlockHash, count: f64) {
        if self.hot.k == 0 {
            return;
        }
        self.hot.seed(end, count);
        if self.hot.rank() {
            self.apply_auto_pins();
        }
    }

    /// The pinned chain ends and their decayed counts, highest first.
    pub(super) fn hot_pinned(&self) -> Vec<(BlockHash, f64)> {
        self.hot.pinned().collect()
    }

    /// Unpins every auto-pinned block, then pins the chains of the current top `k`.
    fn apply_auto_pins(&mut self) {
        let mut ids = std::mem::take(&mut self.hot.auto_ids);
        for id in ids.drain(..) {
            if !std::mem::take(&mut self.hot.auto[id as usize]) {
                continue;
            }
            self.dequeue(id);
            self.metas[id as usize].pin = None;
            self.enqueue_if_evictable(id);
        }
        self.hot.auto_ids = ids;
        self.hot.pinned_ends.clear();
        for i in 0..self.hot.k.min(self.hot.cands.len()) {
            let end = self.hot.cands[i].end;
            self.hot.pinned_ends.push(end);
            let mut id = self.index.get(&end).copied().unwrap_or(NIL);
            while id != NIL && self.hot.auto_ids.len() < self.hot.max_pinned {
                let m = &self.metas[id as usize];
                let parent = m.parent;
                if m.pin.is_none() {
                    self.dequeue(id);
                    self.metas[id as usize].pin = Some(PinLevel::Pinned);
                    self.hot.auto[id as usize] = true;
                    self.hot.auto_ids.push(id);
                }
                id = parent;
            }
        }
        self.stats.auto_pinned_blocks.store(
            self.hot.auto_ids.len() as u64,
            std::sync::atomic::Ordering::Relaxed,
        );
        self.stats
            .auto_pin_changes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// An explicit pin or unpin took block `id` over: hot-prefix warming leaves it alone.
    pub(crate) fn clear_auto_pin(&mut self, id: u32) {
        if let Some(a) = self.hot.auto.get_mut(id as usize) {
            *a = false;
        }
    }
}
