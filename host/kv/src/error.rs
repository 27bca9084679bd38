//! The pool's error type. Every caller mistake that can originate outside the engine (unknown
//! ids, bad lengths, exhausted budgets) is reported here instead of panicking.

use crate::ids::{NamespaceId, SeqId};

/// Errors from building or operating a [`crate::BlockPool`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PoolError {
    /// The K/V layout is unusable.
    #[error("bad K/V layout: {why}")]
    BadLayout {
        /// What is wrong with it.
        why: String,
    },
    /// The byte budget does not hold a single block.
    #[error("K/V budget of {budget} bytes is too small for one block of {block_bytes} bytes")]
    BudgetTooSmall {
        /// The budget asked for.
        budget: usize,
        /// The size of one block under the layout.
        block_bytes: usize,
    },
    /// The arena could not be allocated.
    #[error("could not allocate the K/V arena of {bytes} bytes")]
    ArenaAlloc {
        /// The size asked of the allocator.
        bytes: usize,
    },
    /// Not enough free or evictable blocks for the request; nothing was allocated.
    #[error("out of K/V blocks: need {needed}, at most {available} free or evictable")]
    OutOfBlocks {
        /// Blocks the operation needed.
        needed: usize,
        /// Blocks that were free or evictable when it was tried.
        available: usize,
    },
    /// The namespace would hold more blocks than its cap, even after evicting its own cached blocks.
    #[error("namespace {ns} is over its quota of {cap} blocks (holds {held}, needs {needed} more)")]
    QuotaExceeded {
        /// The namespace.
        ns: NamespaceId,
        /// Its cap.
        cap: usize,
        /// Blocks it holds (in use and cached).
        held: usize,
        /// Blocks the operation needed.
        needed: usize,
    },
    /// No such sequence (never created, or dropped).
    #[error("unknown sequence {0}")]
    UnknownSeq(SeqId),
    /// `match_prefix` needs an empty sequence.
    #[error("{seq} already holds {len} tokens; match_prefix needs an empty sequence")]
    SeqNotEmpty {
        /// The sequence.
        seq: SeqId,
        /// Tokens (committed and reserved) it holds.
        len: usize,
    },
    /// The operation needs the previous reservation to be committed or cancelled first.
    #[error("{seq} has {reserved} reserved positions not yet committed")]
    ReservationPending {
        /// The sequence.
        seq: SeqId,
        /// Positions reserved.
        reserved: usize,
    },
    /// `commit` got a different number of tokens than `reserve` made room for.
    #[error("{seq}: commit of {got} tokens does not match the {reserved} reserved")]
    CommitMismatch {
        /// The sequence.
        seq: SeqId,
        /// Positions reserved.
        reserved: usize,
        /// Tokens given to commit.
        got: usize,
    },
    /// `truncate` asked for a length past the sequence's end.
    #[error("{seq}: cannot truncate to {len}, it holds only {seq_len} tokens")]
    TruncatePastEnd {
        /// The sequence.
        seq: SeqId,
        /// The length asked for.
        len: usize,
        /// The sequence's length.
        seq_len: usize,
    },
}
