//! Identifier newtypes: blocks (indices into the pool's flat arrays), sequences (never reused,
//! so a stale id is always reported as unknown) and namespaces (assigned by the host).

use std::fmt;

/// Sentinel for "no block" in the intrusive links.
pub(crate) const NIL: u32 = u32::MAX;

/// A block of the pool: an index into its metadata array and its byte arena.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BlockId(pub(crate) u32);

impl BlockId {
    /// The block's index in `0..pool.n_blocks()`.
    pub fn index(self) -> usize {
        self.0 as usize
    }

    /// The id of block `index` (for iterating a pool's blocks); `None` if it cannot be one.
    pub fn from_index(index: usize) -> Option<Self> {
        u32::try_from(index).ok().filter(|&i| i != NIL).map(Self)
    }
}

/// A sequence (block table) of the pool. Ids are never reused within one pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SeqId(pub(crate) u64);

impl SeqId {
    /// The raw id, for logs and metrics.
    pub fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for SeqId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "seq#{}", self.0)
    }
}

/// A tenant namespace, as numbered by the host. Quotas, priorities and stats are kept per
/// namespace; cache sharing is decided by the hash salt, not by this id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NamespaceId(pub u32);

impl fmt::Display for NamespaceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ns#{}", self.0)
    }
}

/// Where one reserved token position lives: `block`'s slot `slot` holds position `pos`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotRef {
    /// The block holding the position.
    pub block: BlockId,
    /// The slot inside the block, `pos % block_tokens`.
    pub slot: usize,
    /// The token position in the sequence.
    pub pos: usize,
}
