//! Staging: how a prompt's blocks get from the lower tiers into RAM before the engine links
//! them. The engine hashes a fresh context's chain once, keeps the blocks the hot pool already
//! holds, and asks a [`Stager`] (the store, on a thread of its own) for the rest; the stager
//! reads, verifies and decodes them into a [`Staged`] set, which the engine's prefix match then
//! uses as its [`TierSource`]: the step only copies blocks that are already in memory.

use memoria_kernels::pages::{HUGE_PAGE, HugeMap};

use crate::hash::BlockHash;
use crate::hash::ModelFingerprint;
use crate::layout::KvLayout;
use crate::misses::LostTier;
use crate::tier::{SourceMiss, TierSource};

/// One block a stager is asked for: its place in the chain and its hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WantedBlock {
    /// The block's index in the context (block `i` holds tokens `i*B..(i+1)*B`).
    pub index: usize,
    pub hash: BlockHash,
}

/// A staging request: the blocks of one context the hot pool lacks, in chain order.
#[derive(Clone, Debug)]
pub struct StageRequest {
    pub model: ModelFingerprint,
    pub layout: KvLayout,
    /// The namespace's chain root, which every private block is checked against.
    pub root: BlockHash,
    /// The leading blocks that are public and the common root they are checked against.
    pub public: (usize, BlockHash),
    /// The context's tokens (at least the wanted blocks').
    pub tokens: Vec<u32>,
    /// The blocks wanted, by rising index; blocks between them are held hot.
    pub wanted: Vec<WantedBlock>,
}

/// What staging found for one block.
#[derive(Debug)]
enum Found {
    /// Its bytes, at `offset` in the staged buffer, and the tier that held them.
    Hit {
        offset: usize,
        tier: LostTier,
    },
    Miss(SourceMiss),
}

/// The staged bytes: a huge-page mapping when they span one (a restored context's megabytes
/// fault in 2 MiB at a time), a plain vector otherwise.
#[derive(Debug)]
enum Buf {
    Small(Vec<u8>),
    Huge(HugeMap),
}

impl Default for Buf {
    fn default() -> Self {
        Buf::Small(Vec::new())
    }
}

impl Buf {
    fn new(len: usize) -> Buf {
        if len >= HUGE_PAGE
            && let Ok(m) = HugeMap::new(len)
        {
            return Buf::Huge(m);
        }
        Buf::Small(vec![0; len])
    }

    fn as_slice(&self) -> &[u8] {
        match self {
            Buf::Small(v) => v,
            Buf::Huge(m) => m.as_slice(),
        }
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        match self {
            Buf::Small(v) => v,
            Buf::Huge(m) => m.as_mut_slice(),
        }
    }
}

/// Blocks staged for one context: verified bytes in RAM, served once each to the prefix match.
#[derive(Debug, Default)]
pub struct Staged {
    buf: Buf,
    block_bytes: usize,
    found: Vec<(BlockHash, Found)>,
    last_miss: Option<SourceMiss>,
    last_hit: Option<LostTier>,
    /// The remote tier reported blocks missing on its server that this host may write again.
    pub remote_lost: bool,
}

impl Staged {
    /// An empty set for blocks of `block_bytes` bytes, with room for `n` staged blocks.
    pub fn with_capacity(block_bytes: usize, n: usize) -> Staged {
        Staged {
            buf: Buf::new(block_bytes.saturating_mul(n)),
            block_bytes,
            ..Staged::default()
        }
    }

    /// The buffer slots of the set (`with_capacity`'s `n` blocks), to fill in place.
    pub fn slots_mut(&mut self) -> std::slice::ChunksExactMut<'_, u8> {
        let b = self.block_bytes.max(1);
        self.buf.as_mut_slice().chunks_exact_mut(b)
    }

    /// Records that slot `slot` holds block `hash`, read from `tier`.
    pub fn push_hit(&mut self, hash: BlockHash, slot: usize, tier: LostTier) {
        let offset = slot * self.block_bytes;
        self.found.push((hash, Found::Hit { offset, tier }));
    }

    /// Records that `hash` could not be staged, and why.
    pub fn push_miss(&mut self, hash: BlockHash, why: SourceMiss) {
        self.found.push((hash, Found::Miss(why)));
    }

    /// Blocks staged (hits).
    pub fn hits(&self) -> usize {
        self.found
            .iter()
            .filter(|(_, f)| matches!(f, Found::Hit { .. }))
            .count()
    }
}

impl TierSource for Staged {
    fn fetch(&mut self, hash: &BlockHash, out: &mut [u8]) -> bool {
        let found = self.found.iter().find(|(h, _)| h == hash).map(|(_, f)| f);
        match found {
            Some(&Found::Hit { offset, tier }) if out.len() == self.block_bytes => {
                out.copy_from_slice(&self.buf.as_slice()[offset..offset + self.block_bytes]);
                self.last_hit = Some(tier);
                true
            }
            Some(Found::Miss(why)) => {
                self.last_miss = Some(*why);
                false
            }
            _ => {
                self.last_miss = Some(SourceMiss::Absent);
                false
            }
        }
    }

    fn last_miss(&self) -> SourceMiss {
        self.last_miss.unwrap_or(SourceMiss::Absent)
    }

    fn last_hit(&self) -> Option<LostTier> {
        self.last_hit
    }
}

/// Reads blocks from the tiers below the hot pool. Called off the engine thread; may block on
/// disk but never on the network (remote blocks are staged by the caller's prefetch first).
pub trait Stager: Send + Sync {
    /// The leading run of `req.wanted` the tiers hold, verified and decoded, plus the reason
    /// the first block that could not be staged was missed.
    fn stage(&self, req: &StageRequest) -> Staged;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_staged_set_serves_its_hits_and_reports_its_misses() {
        let h = |i: u8| BlockHash([i; 32]);
        let mut s = Staged::with_capacity(4, 2);
        for (i, slot) in s.slots_mut().enumerate() {
            slot.fill(i as u8 + 7);
        }
        s.push_hit(h(1), 1, LostTier::Disk);
        s.push_miss(h(2), SourceMiss::Corrupt(LostTier::Disk));
        assert_eq!(s.hits(), 1);
        let mut out = [0u8; 4];
        assert!(s.fetch(&h(1), &mut out));
        assert_eq!(out, [8; 4]);
        assert_eq!(s.last_hit(), Some(LostTier::Disk));
        assert!(!s.fetch(&h(2), &mut out));
        assert_eq!(s.last_miss(), SourceMiss::Corrupt(LostTier::Disk));
        assert!(!s.fetch(&h(3), &mut out));
        assert_eq!(s.last_miss(), SourceMiss::Absent);
        // A buffer of the wrong size is never written.
        assert!(!s.fetch(&h(1), &mut [0u8; 3]));
    }
}
