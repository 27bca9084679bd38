//! memoria's shared session-state memory, hot tier: one pool of fixed-size K/V blocks per loaded
//! model, shared by content across sequences and namespaces.
//!
//! - **Blocks.** The pool allocates one arena of `n_blocks` blocks of `B` tokens (default 16)
//!   within a byte budget; a block holds K and V for every layer, laid out
//!   `[layer][K|V][slot][row_bytes]`. Block metadata is a flat array; free blocks are threaded on
//!   an intrusive doubly-linked list; nothing is allocated per block.
//! - **States.** Free (no content), used (refcount > 0), cached (refcount 0, sealed, indexed,
//!   evictable unless pinned). A block becomes sealed (immutable, keyed by its chain hash in
//!   the prefix index, see [`hash`]) when it fills up. Sealing a block whose hash is already
//!   indexed dedups: the sequence switches to the indexed block and the duplicate is freed.
//! - **Sequences.** Block tables with `match_prefix` (longest cached chain, capped at
//!   `len - 1` tokens), `reserve`/`commit` (copy-on-write of a shared or sealed partial tail),
//!   `fork` (O(blocks), nothing copied), `truncate` and `drop_seq`.
//! - **Eviction.** Pinned blocks never. Candidates are cached *leaf* blocks only (no resident
//!   child in the chain): evicting a parent would strand its children, unreachable by prefix
//!   match yet holding memory, so eviction proceeds from the leaves up and every resident block's
//!   ancestors stay resident. Among candidates: lowest priority first (blocks whose timed pin
//!   lapsed, then per-pin priority or the namespace's), then **LRU-2**: the block whose
//!   second-to-last access is oldest goes first, and blocks touched only once go before any
//!   touched twice. LRU-2 is chosen over SLRU because it needs no segment-size tuning and
//!   resists scans by construction: a one-off long prompt's blocks (touched once) never push out
//!   a system prompt that many sessions hit, even if that prompt's last hit is older. The cost is
//!   an O(log n) indexed heap per namespace instead of O(1) list moves, paid only on the
//!   cached/used transitions. Per-namespace caps evict the namespace's own cached blocks first.
//! - **Tiers.** Evicted sealed blocks go to a [`TierSink`] before their memory is reused; a
//!   [`TierSource`] can fill prefix misses, in prefix order. What an engine needs from the
//!   tiers as a whole (staging reads, the write hand-off, named saves, remote prefetches) is
//!   the [`backing`] interface, which the store implements.
//! - **Stats.** [`PoolStats`] atomics, readable from any thread without touching the pool.
//!   Every prompt block miss is counted under one reason (see `misses`: a bounded ghost table
//!   of evicted hashes and a salt-free content index tell `evicted`, `expired` and `isolated`
//!   from `cold`), and the [`advisor`] estimates the miss-ratio curve from the same look-ups.

pub mod advisor;
pub mod background;
pub mod backing;
pub mod draft;
pub mod hash;
pub mod loan;
pub mod registry;
pub mod route_key;
pub mod staging;
pub mod step_guard;

mod arena;
mod content;
mod error;
mod evict_heap;
mod free_list;
mod ghost;
mod ids;
mod layout;
mod meta;
mod misses;
mod namespace;
mod pool;
mod prefault;
mod public;
mod seq;
mod stats;
mod tier;

pub use error::PoolError;
pub use hash::{BlockHash, ModelFingerprint, NamespaceSalt, SaltSecret};
pub use ids::{BlockId, NamespaceId, SeqId, SlotRef};
pub use layout::{KvElem, KvLayout, KvPart, MAX_BLOCK_TOKENS};
pub use meta::{BlockState, PinLevel};
pub use misses::{LostTier, MissReason, MissSnapshot};
pub use pool::{BlockInfo, BlockPool, HotChain};
pub use public::{PublicChain, chain_step, context_chain};
pub use registry::{NamespaceEntry, NamespaceTable, Namespaces, RootShape};
pub use stats::{Counters, CountersSnapshot, EvictReason, PoolStats, StatsSnapshot};
pub use tier::{NoopSink, SourceMiss, SourceTail, TailBytes, TierSink, TierSource};

#[cfg(test)]
mod pool_model_tests;

#[cfg(test)]
mod tests {
    /// The engine thread owns the pool; other threads read its stats.
    #[test]
    fn pool_is_send_and_stats_are_shareable() {
        fn send<T: Send>() {}
        fn share<T: Send + Sync>() {}
        send::<crate::BlockPool>();
        share::<crate::PoolStats>();
    }
}
