//! The hooks between the hot pool and lower tiers (cold RAM, redb, remote). The pool calls
//! [`TierSink::demote`] for every sealed block it evicts, before the memory is reused, and
//! [`TierSource::fetch`] on a prefix miss, in prefix order, before giving up on a block.

use crate::hash::BlockHash;
use crate::ids::NamespaceId;
use crate::loan::Loan;
use crate::misses::LostTier;

/// Why a [`TierSource::fetch`] returned false.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceMiss {
    /// No tier had the block.
    Absent,
    /// The tier held a value that failed verification (it was removed).
    Corrupt(LostTier),
}

/// Where a source holds a partial tail's bytes (one block's image; its filled slots count).
pub enum TailBytes<'a> {
    /// In block `k` of a loan: the pool that lent it links the block in place.
    Lent(&'a mut Loan, usize),
    /// In a buffer of the source's own, copied from.
    Copy(&'a [u8]),
}

/// A partial tail a source holds for the pool's tail match (see `pool::tails`): the tokens of
/// its filled slots (fewer than a block's) and its bytes.
pub struct SourceTail<'a> {
    pub tokens: &'a [u32],
    pub bytes: TailBytes<'a>,
}

/// Receives blocks evicted from the pool.
pub trait TierSink: Send + Sync {
    /// `data` is the block's full byte image (`[layer][K|V][slot][row]`), `tokens` its B tokens,
    /// `ns` the namespace it is attributed to. Called before the block's memory is reused.
    fn demote(&mut self, hash: &BlockHash, ns: NamespaceId, tokens: &[u32], data: &[u8]);

    /// The tier evicted blocks go to, for miss reasons (a later miss on one means it was lost
    /// there or below); `None` when they are dropped.
    fn keeps(&self) -> Option<LostTier> {
        None
    }
}

/// Supplies blocks missing from the pool.
pub trait TierSource {
    /// Fills `out` (one block's bytes) with the block keyed by `hash` and returns true, or
    /// returns false (leaving `out` unspecified) when it does not have it.
    fn fetch(&mut self, hash: &BlockHash, out: &mut [u8]) -> bool;

    /// Why the last `fetch` returned false (for miss reasons).
    fn last_miss(&self) -> SourceMiss {
        SourceMiss::Absent
    }

    /// The tier that served the last `fetch` that returned true (per-tier promotion counts);
    /// `None` when the source does not say.
    fn last_hit(&self) -> Option<LostTier> {
        None
    }

    /// Where the bytes of `hash` already lie in a pool's lent block: the [`Loan`] and the
    /// block's place in it, for the pool that lent it to link the block instead of copying
    /// (a hit, as `fetch`'s, for `last_hit`). `None` (the default): ask `fetch`.
    fn lent(&mut self, hash: &BlockHash) -> Option<(&mut Loan, usize)> {
        let _ = hash;
        None
    }

    /// The partial tail continuing `parent` that the source holds, verified, for the pool to
    /// keep as a retained tail; `None` (the default) when it has none.
    fn tail(&mut self, parent: &BlockHash) -> Option<SourceTail<'_>> {
        let _ = parent;
        None
    }
}

/// The default sink: evicted blocks are dropped.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoopSink;

impl TierSink for NoopSink {
    fn demote(&mut self, _: &BlockHash, _: NamespaceId, _: &[u32], _: &[u8]) {}
}
