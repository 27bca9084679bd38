//! The cache-sizing advisor: an online estimate of the hot pool's LRU miss-ratio curve from the
//! block-hash reference stream, for the whole pool and per namespace, in bounded memory.
//!
//! **Estimator: SHARDS** (Waldspurger, Park, Garthwaite, Ahmad, *Efficient MRC Construction
//! with SHARDS*, FAST 2015), fixed-size variant (`SHARDS_max`):
//! - Every prompt block looked up by `match_prefix` is one reference, keyed by 64 bits of its
//!   chain hash (BLAKE3, so uniformly distributed; salted, so namespaces never alias). A
//!   prompt's blocks are one batch: every reuse distance is measured against the stack as it
//!   stood before the prompt (the pool matches the whole prompt before allocating for its
//!   misses), then the blocks move to the top deepest first, so the first block ends topmost
//!   and LRU loses a prompt's last blocks before its first, as the pool's leaf-first eviction
//!   does (fed one by one in prefix order, LRU would strand suffixes and under-predicted the
//!   pool by 0.07 on the uniform serve replay). A
//!   block sealed by a sequence that no prompt asked for (a generated block) enters the top
//!   of the stack without counting as a reference, as the real cache holds it from then on.
//! - Spatial sampling: a reference is sampled when its key is below a threshold `T` (the
//!   paper's `hash mod P < T` with `P = 2^64`); the rate is `R = T / 2^64`. Every reference
//!   to a sampled block is sampled, so reuse is observed exactly within the sample.
//! - For a sampled reference, the reuse distance (distinct sampled blocks touched since its
//!   last reference, counted with a Fenwick tree over access times) is scaled by `1/R` and
//!   added, with weight `1/R`, to a histogram of [`shards::BUCKETS`] buckets spanning up to
//!   `16×` the budget; first references count as misses at every size.
//! - Fixed size: at most `s_max` sampled blocks are tracked ([`TOTAL_S_MAX`] for the pool,
//!   [`NS_S_MAX`] per namespace). When a new one would exceed it, the largest key is dropped
//!   and `T` lowered to it, so the rate adapts to the working set and memory never grows;
//!   weighting each reference by `1/R` at its time is the paper's rescaling of old counts.
//! - The hit rate at `c` blocks is the weight of references with scaled distance below `c`
//!   (linear within a bucket), plus the `SHARDS_adj` correction (all references counted less
//!   the estimated total weight, credited to the first bucket, as the paper does: sampling
//!   error concentrates on the hottest blocks), over all references; the smallest budget
//!   reaching the target is read off the same cumulative sum. On the synthetic streams of the
//!   tests (600k-850k references, rates 0.02-0.1) the largest error per point is 0.033 with
//!   the correction and 0.047 without. Until `s_max` distinct blocks are seen, `R = 1` and the
//!   curve is the exact LRU curve of the stream.
//! - Memory: fixed at construction (capacities never change), at most [`MAX_NS_TRACKED`]
//!   namespaces tracked individually (later ones only in the total); the whole advisor stays
//!   under 1 MiB ([`Advisor::memory_bytes`], asserted in tests).
//!
//! It models LRU; the pool evicts by LRU-2 among leaf blocks and cannot evict blocks in use,
//! so the curve is the estimate an operator sizes with, not a promise.

mod fenwick;
mod shards;
mod sizing;
mod table;

#[cfg(test)]
mod tests;

pub use sizing::{SizingWarning, SizingWatch};

use crate::hash::BlockHash;
use crate::ids::NamespaceId;
use shards::Shards;

/// Sampled blocks tracked for the whole pool.
pub const TOTAL_S_MAX: usize = 4096;
/// Sampled blocks tracked per namespace.
pub const NS_S_MAX: usize = 512;
/// Namespaces with their own curve; later ones count in the total only.
pub const MAX_NS_TRACKED: usize = 8;
/// Multiples of the budget the curve reports.
pub const SCALES: [f64; 5] = [0.25, 0.5, 1.0, 2.0, 4.0];

/// One point of a predicted curve.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CurvePoint {
    /// Multiple of the current budget.
    pub scale: f64,
    /// Cache size in blocks.
    pub blocks: u64,
    /// Predicted hit rate of full prompt blocks with that many blocks.
    pub hit_rate: f64,
}

/// The advisor's view of the pool or one namespace.
#[derive(Clone, Debug, PartialEq)]
pub struct AdvisorSnapshot {
    /// Hot blocks the curve is relative to (the pool's, or the namespace's cap).
    pub budget_blocks: u64,
    /// Predicted hit rate at each of [`SCALES`] × the budget.
    pub curve: Vec<CurvePoint>,
    /// The configured target.
    pub target_hit_rate: f64,
    /// The smallest cache reaching the target, if within 16× the budget.
    pub smallest_budget_for_target: Option<u64>,
    /// References seen.
    pub refs: u64,
    /// References sampled.
    pub sampled_refs: u64,
    /// The sampling rate now.
    pub sampling_rate: f64,
    /// Bytes the estimator holds.
    pub memory_bytes: u64,
}

impl AdvisorSnapshot {
    /// The predicted hit rate at `scale` × the budget, if that scale is reported.
    pub fn at_scale(&self, scale: f64) -> Option<f64> {
        self.curve
            .iter()
            .find(|p| (p.scale - scale).abs() < 1e-9)
            .map(|p| p.hit_rate)
    }
}

#[derive(Debug)]
struct Tracked {
    ns: NamespaceId,
    budget: usize,
    est: Shards,
}

/// Estimators for the pool and the first namespaces.
#[derive(Debug)]
pub struct Advisor {
    budget: usize,
    target: f64,
    total: Shards,
    namespaces: Vec<Tracked>,
    /// Compaction buffer shared by every estimator (sized for the largest).
    scratch: Vec<(u32, u64)>,
}

/// The key of a block in the reference stream.
fn key(hash: &BlockHash) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&hash.0[8..16]);
    u64::from_le_bytes(b)
}

impl Advisor {
    /// An advisor for a pool of `budget_blocks` hot blocks, target 0.9.
    pub fn new(budget_blocks: usize) -> Self {
        Self {
            budget: budget_blocks.max(1),
            target: 0.9,
            total: Shards::new(TOTAL_S_MAX, budget_blocks),
            namespaces: Vec::with_capacity(MAX_NS_TRACKED),
            scratch: Vec::with_capacity(TOTAL_S_MAX + 1),
        }
    }

    /// Sets the target hit rate (ignored unless `0 < target < 1`).
    pub fn set_target(&mut self, target: f64) {
        if target > 0.0 && target < 1.0 {
            self.target = target;
        }
    }

    /// The target hit rate.
    pub fn target(&self) -> f64 {
        self.target
    }

    /// Starts a curve for `ns` (relative to `budget_blocks`) while fewer than
    /// [`MAX_NS_TRACKED`] are tracked; a tracked namespace only has its budget updated.
    pub fn track(&mut self, ns: NamespaceId, budget_blocks: Option<usize>) {
        let budget = budget_blocks.unwrap_or(self.budget).max(1);
        if let Some(t) = self.namespaces.iter_mut().find(|t| t.ns == ns) {
            t.budget = budget;
            return;
        }
        if self.namespaces.len() < MAX_NS_TRACKED {
            self.namespaces.push(Tracked {
                ns,
                budget,
                est: Shards::new(NS_S_MAX, self.budget),
            });
        }
    }

    /// A prompt of `ns` looked up `hash` (one block; see [`Advisor::access_prompt`]).
    pub fn access(&mut self, ns: NamespaceId, hash: &BlockHash) {
        self.access_prompt(ns, std::slice::from_ref(hash));
    }

    /// A prompt of `ns` looked up its full blocks `hashes` (in prefix order). They are fed
    /// deepest first and their distances measured before any moves, so LRU keeps a prompt's
    /// first blocks longest, as the pool's leaf-first eviction does.
    pub fn access_prompt(&mut self, ns: NamespaceId, hashes: &[BlockHash]) {
        let keys = hashes.iter().rev().map(key);
        self.total.access_all(keys.clone(), &mut self.scratch);
        if let Some(t) = self.namespaces.iter_mut().find(|t| t.ns == ns) {
            t.est.access_all(keys, &mut self.scratch);
        }
    }

    /// A sequence of `ns` sealed `hash` (it is now resident; not a reference).
    pub fn insert(&mut self, ns: NamespaceId, hash: &BlockHash) {
        let k = key(hash);
        self.total.insert(k, &mut self.scratch);
        if let Some(t) = self.namespaces.iter_mut().find(|t| t.ns == ns) {
            t.est.insert(k, &mut self.scratch);
        }
    }

    /// Bytes held by every estimator and the shared buffer.
    pub fn memory_bytes(&self) -> usize {
        self.total.memory_bytes()
            + self
                .namespaces
                .iter()
                .map(|t| t.est.memory_bytes())
                .sum::<usize>()
            + self.namespaces.capacity() * std::mem::size_of::<Tracked>()
            + self.scratch.capacity() * 16
            + std::mem::size_of::<Self>()
    }

    fn snapshot_of(&self, est: &Shards, budget: usize, memory: usize) -> AdvisorSnapshot {
        let curve = SCALES
            .iter()
            .map(|&scale| {
                let blocks = (budget as f64 * scale).round().max(1.0);
                CurvePoint {
                    scale,
                    blocks: blocks as u64,
                    hit_rate: est.hit_rate(blocks),
                }
            })
            .collect();
        AdvisorSnapshot {
            budget_blocks: budget as u64,
            curve,
            target_hit_rate: self.target,
            smallest_budget_for_target: est.smallest_for(self.target),
            refs: est.refs,
            sampled_refs: est.sampled,
            sampling_rate: est.rate(),
            memory_bytes: memory as u64,
        }
    }

    /// The whole pool's curve (memory: the whole advisor's).
    pub fn snapshot(&self) -> AdvisorSnapshot {
        self.snapshot_of(&self.total, self.budget, self.memory_bytes())
    }

    /// The curve of `ns`, if it is tracked.
    pub fn namespace(&self, ns: NamespaceId) -> Option<AdvisorSnapshot> {
        let t = self.namespaces.iter().find(|t| t.ns == ns)?;
        Some(self.snapshot_of(&t.est, t.budget, t.est.memory_bytes()))
    }

    /// The pool's predicted hit rate with `blocks` blocks.
    pub fn hit_rate_at(&self, blocks: usize) -> f64 {
        self.total.hit_rate(blocks as f64)
    }
}
