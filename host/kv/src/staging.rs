//! Staging: how a prompt's blocks get from the lower tiers into RAM before the engine links
//! them. The engine hashes a fresh context's chain once, keeps the blocks the hot pool already
//! holds, and asks a [`Stager`] (the store, on a thread of its own) for the rest; the stager
//! reads, verifies and decodes them into a [`Staged`] set, which the engine's prefix match then
//! uses as its [`TierSource`]: the step only links blocks that are already in memory. Where the
//! pool has the room, it lends the request free blocks ([`Loan`]) and the stager writes into
//! them, so the match links each staged block in place, nothing copied. A request may also
//! want the partial tail kept on disk after its last whole block ([`WantedTail`]): staged into
//! one more lent block, it joins the pool's retained tails before the tail match.

use memoria_kernels::pages::{HUGE_PAGE, HugeMap};

use crate::hash::BlockHash;
use crate::hash::ModelFingerprint;
use crate::layout::KvLayout;
use crate::loan::Loan;
use crate::misses::LostTier;
use crate::tier::{SourceMiss, SourceTail, TailBytes, TierSource};

/// One block a stager is asked for: its place in the chain and its hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WantedBlock {
    /// The block's index in the context (block `i` holds tokens `i*B..(i+1)*B`).
    pub index: usize,
    pub hash: BlockHash,
}

/// The partial tail a request wants after its whole blocks: the one kept under `parent`
/// (the hash the tail continues, see [`BlockHash::parent_at`]), useful when it begins with
/// `tokens`' first token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WantedTail {
    pub parent: BlockHash,
    /// The prompt's tokens after its whole blocks that a tail may hold (1 to B - 1).
    pub tokens: Vec<u32>,
}

/// Why a wanted tail was not staged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TailMiss {
    /// No tier keeps one under the parent, or not every whole block before it was staged.
    Absent,
    /// The stored value failed verification (checksum, length, format, padding): removed.
    Corrupt(LostTier),
    /// The stored value is another model's, layout's or namespace's: removed.
    Foreign,
    /// The stored tail continues the parent with other tokens than the prompt's.
    Differs,
}

/// A staging request: the blocks of one context the hot pool lacks, in chain order.
#[derive(Debug)]
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
    /// The partial tail wanted after the last whole block, if any.
    pub tail: Option<WantedTail>,
    /// Pool blocks lent to stage into (one per wanted block, and one for the tail), or
    /// `None`: a buffer of the stager's own, copied from by the match.
    pub loan: Option<Loan>,
}

/// A staged partial tail: its parent, its filled slots' tokens and its slot.
#[derive(Debug)]
struct StagedTail {
    parent: BlockHash,
    tokens: Vec<u32>,
    slot: usize,
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

/// The staged bytes: the pool's own lent blocks, else a huge-page mapping when they span one
/// (a restored context's megabytes fault in 2 MiB at a time), a plain vector otherwise.
#[derive(Debug)]
enum Buf {
    Small(Vec<u8>),
    Huge(HugeMap),
    Lent(Loan),
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

    /// Slot `k`'s bytes, `b` each.
    fn slot(&self, k: usize, b: usize) -> Option<&[u8]> {
        match self {
            Buf::Small(v) => v.get(k * b..(k + 1) * b),
            Buf::Huge(m) => m.as_slice().get(k * b..(k + 1) * b),
            Buf::Lent(l) => l.slot(k),
        }
    }

    /// The first `n` slots, `b` bytes each, to fill in place.
    fn slots_mut(&mut self, n: usize, b: usize) -> Slots<'_> {
        match self {
            Buf::Small(v) => Slots::Flat(v.chunks_exact_mut(b).take(n)),
            Buf::Huge(m) => Slots::Flat(m.as_mut_slice().chunks_exact_mut(b).take(n)),
            Buf::Lent(l) => Slots::Lent(Box::new(l.slots_mut(n))),
        }
    }
}

/// The slots of a staged set, in order.
pub enum Slots<'a> {
    Flat(std::iter::Take<std::slice::ChunksExactMut<'a, u8>>),
    Lent(Box<dyn Iterator<Item = &'a mut [u8]> + 'a>),
}

impl<'a> Iterator for Slots<'a> {
    type Item = &'a mut [u8];

    fn next(&mut self) -> Option<&'a mut [u8]> {
        match self {
            Slots::Flat(c) => c.next(),
            Slots::Lent(l) => l.next(),
        }
    }
}

/// Blocks staged for one context: verified bytes in RAM, served once each to the prefix match.
#[derive(Debug, Default)]
pub struct Staged {
    buf: Buf,
    block_bytes: usize,
    /// Slots in `buf`.
    slots: usize,
    found: Vec<(BlockHash, Found)>,
    last_miss: Option<SourceMiss>,
    last_hit: Option<LostTier>,
    tail: Option<StagedTail>,
    tail_miss: Option<TailMiss>,
    /// The remote tier reported blocks missing on its server that this host may write again.
    pub remote_lost: bool,
}

impl Staged {
    /// An empty set for blocks of `block_bytes` bytes, with room for `n` staged blocks.
    pub fn with_capacity(block_bytes: usize, n: usize) -> Staged {
        Staged {
            buf: Buf::new(block_bytes.saturating_mul(n)),
            block_bytes,
            slots: n,
            ..Staged::default()
        }
    }

    /// As [`Self::with_capacity`], in `loan`'s blocks when it has `n` of `block_bytes` each
    /// (otherwise the loan is given back and a buffer of its own holds them).
    pub fn with_loan(loan: Option<Loan>, block_bytes: usize, n: usize) -> Staged {
        match loan {
            Some(l) if n > 0 && l.block_bytes() == block_bytes && l.len() >= n => Staged {
                buf: Buf::Lent(l),
                block_bytes,
                slots: n,
                ..Staged::default()
            },
            _ => Staged::with_capacity(block_bytes, n),
        }
    }

    /// Whether the set lies in lent pool blocks.
    pub fn is_lent(&self) -> bool {
        matches!(self.buf, Buf::Lent(_))
    }

    /// The buffer slots of the set (`with_capacity`'s `n` blocks), to fill in place.
    pub fn slots_mut(&mut self) -> Slots<'_> {
        let b = self.block_bytes.max(1);
        self.buf.slots_mut(self.slots, b)
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

    /// Slot `k`'s bytes, to fill in place.
    pub fn slot_mut(&mut self, k: usize) -> Option<&mut [u8]> {
        self.slots_mut().nth(k)
    }

    /// Records that slot `slot` holds the partial tail continuing `parent`, whose filled
    /// slots hold `tokens`.
    pub fn push_tail(&mut self, parent: BlockHash, tokens: Vec<u32>, slot: usize) {
        self.tail = Some(StagedTail {
            parent,
            tokens,
            slot,
        });
    }

    /// Records why the wanted tail was not staged.
    pub fn push_tail_miss(&mut self, why: TailMiss) {
        self.tail_miss = Some(why);
    }

    /// The staged tail's tokens, if one was staged.
    pub fn tail_tokens(&self) -> Option<&[u32]> {
        self.tail.as_ref().map(|t| &t.tokens[..])
    }

    /// Why the wanted tail was not staged (`None`: staged, or none was wanted).
    pub fn tail_miss(&self) -> Option<TailMiss> {
        self.tail_miss
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
                let b = self.block_bytes.max(1);
                let Some(bytes) = self.buf.slot(offset / b, b) else {
                    self.last_miss = Some(SourceMiss::Absent);
                    return false;
                };
                out.copy_from_slice(bytes);
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

    fn lent(&mut self, hash: &BlockHash) -> Option<(&mut Loan, usize)> {
        let Buf::Lent(loan) = &mut self.buf else {
            return None;
        };
        let &Found::Hit { offset, tier } =
            self.found.iter().find(|(h, _)| h == hash).map(|(_, f)| f)?
        else {
            return None;
        };
        self.last_hit = Some(tier);
        Some((loan, offset / self.block_bytes.max(1)))
    }

    fn tail(&mut self, parent: &BlockHash) -> Option<SourceTail<'_>> {
        let Staged {
            tail,
            buf,
            block_bytes,
            ..
        } = self;
        let t = tail.as_ref().filter(|t| t.parent == *parent)?;
        let bytes = match buf {
            Buf::Lent(loan) => TailBytes::Lent(loan, t.slot),
            other => TailBytes::Copy(other.slot(t.slot, (*block_bytes).max(1))?),
        };
        Some(SourceTail {
            tokens: &t.tokens,
            bytes,
        })
    }
}

/// Reads blocks from the tiers below the hot pool. Called off the engine thread; may block on
/// disk but never on the network (remote blocks are staged by the caller's prefetch first).
pub trait Stager: Send + Sync {
    /// The leading run of `req.wanted` the tiers hold, verified and decoded (into
    /// `req.loan`'s blocks when it has room for them), plus the reason the first block that
    /// could not be staged was missed.
    fn stage(&self, req: StageRequest) -> Staged;
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
