//! Per-block metadata, one flat array entry per block (no per-block heap allocation).
//! Invariants: `Free` ⇔ on the free list, refcount 0, unsealed, not a tail; `Used` ⇔
//! refcount > 0; `Cached` ⇔ refcount 0 and (sealed or a retained tail); a sealed block is in
//! the prefix index under `hash`, a retained tail in the tail index under `tail_of`.

use std::time::Instant;

use crate::hash::BlockHash;
use crate::ids::NIL;

/// Lifecycle state of a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockState {
    /// No content; on the free list.
    Free,
    /// Referenced by at least one block table.
    Used,
    /// Unreferenced but sealed and indexed (or a retained partial tail): a prefix-cache
    /// entry, evictable unless pinned.
    Cached,
}

/// How a pinned prefix's blocks are protected from eviction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PinLevel {
    /// Never evicted while the pin lasts.
    Pinned,
    /// Evicted in priority order (higher = later) instead of the namespace's priority.
    Priority(i32),
}

/// Metadata of one block.
#[derive(Clone, Debug)]
pub(crate) struct BlockMeta {
    pub state: BlockState,
    pub refcount: u32,
    /// Namespace slot of the namespace that allocated the block (quota attribution).
    pub owner: u32,
    /// Slots holding committed tokens.
    pub filled: u32,
    /// `Some` iff sealed (full, immutable, indexed).
    pub hash: Option<BlockHash>,
    /// `Some(parent chain hash)` iff a retained partial tail: a finished sequence's last,
    /// unfilled block kept (immutable, copied on write) for prompts that continue it.
    pub tail_of: Option<BlockHash>,
    /// The sealed block whose hash this block chains from (`NIL` for a first block).
    pub parent: u32,
    /// Resident sealed blocks whose `parent` is this block.
    pub children: u32,
    /// Free-list links.
    pub prev: u32,
    pub next: u32,
    /// Position in the owner namespace's eviction heap, `NIL` when not in it.
    pub heap_pos: u32,
    /// Logical time of the last and second-to-last access (0 = never): the LRU-2 history.
    pub last: u64,
    pub penult: u64,
    /// Pin on this block, if any, its expiry, and an epoch that invalidates stale expiry entries.
    pub pin: Option<PinLevel>,
    pub pin_until: Option<Instant>,
    pub pin_epoch: u64,
    /// The block's timed pin ran out and it has not been hit since: it goes first.
    pub lapsed: bool,
    /// Priority used as the eviction key while in a heap.
    pub eff_prio: i32,
}

impl BlockMeta {
    pub fn new() -> Self {
        Self {
            state: BlockState::Free,
            refcount: 0,
            owner: 0,
            filled: 0,
            hash: None,
            tail_of: None,
            parent: NIL,
            children: 0,
            prev: NIL,
            next: NIL,
            heap_pos: NIL,
            last: 0,
            penult: 0,
            pin: None,
            pin_until: None,
            pin_epoch: 0,
            lapsed: false,
            eff_prio: 0,
        }
    }

    /// Eviction order key, smallest first: priority, then LRU-2 (second-to-last access, with
    /// blocks touched once at 0), then last access.
    pub fn evict_key(&self) -> (i32, u64, u64) {
        (self.eff_prio, self.penult, self.last)
    }

    /// Whether the block's content is immutable: sealed or a retained tail (writes copy it).
    pub fn frozen(&self) -> bool {
        self.hash.is_some() || self.tail_of.is_some()
    }

    /// Whether the block may sit in an eviction heap.
    pub fn evictable(&self) -> bool {
        self.state == BlockState::Cached && self.children == 0 && self.pin != Some(PinLevel::Pinned)
    }

    /// The priority to evict by, given the owner namespace's priority.
    pub fn priority_under(&self, ns_priority: i32) -> i32 {
        if self.lapsed {
            return i32::MIN;
        }
        match self.pin {
            Some(PinLevel::Priority(p)) => p,
            _ => ns_priority,
        }
    }
}
