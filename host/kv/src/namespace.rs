//! Per-namespace pool state: eviction priority, block cap, blocks held (attributed to the
//! namespace that allocated them: in use or cached), its eviction heap and its stats.
//! Invariant: `held` equals the number of non-free blocks whose owner is this namespace.

use std::sync::Arc;

use crate::evict_heap::EvictHeap;
use crate::ids::NamespaceId;
use crate::public::PublicChain;
use crate::stats::Counters;

#[derive(Debug)]
pub(crate) struct NsState {
    pub id: NamespaceId,
    /// Higher is evicted later.
    pub priority: i32,
    pub cap: Option<usize>,
    pub held: usize,
    pub heap: EvictHeap,
    pub stats: Arc<Counters>,
    /// Public prefixes new sequences of this namespace chain through.
    pub public: Option<Arc<PublicChain>>,
}

impl NsState {
    pub fn new(id: NamespaceId, stats: Arc<Counters>) -> Self {
        Self {
            id,
            priority: 0,
            cap: None,
            held: 0,
            heap: EvictHeap::default(),
            stats,
            public: None,
        }
    }
}
