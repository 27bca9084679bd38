//! The block pool: a fixed arena of K/V blocks, their flat metadata array, the free list, the
//! prefix index (`BlockHash -> block`) and the sequences' block tables. Invariants (checked by
//! [`BlockPool::check_invariants`]): each block's refcount equals the table entries naming it;
//! free + used + cached = total; every sealed block is indexed under its hash; a resident
//! sealed block's parent is resident; evictable blocks sit in exactly one eviction heap; every
//! retained partial tail is in the tail index under its parent's hash (see `tails`).

mod drafts;
mod hot;
mod hot_seed;
mod lifecycle;
mod loans;
mod policy;
mod prefix;
mod public;
mod seq_ops;
mod tails;
mod validate;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;
use std::time::Instant;

use crate::arena::Arena;
use crate::content::ContentIndex;
use crate::error::PoolError;
use crate::free_list::FreeList;
use crate::ghost::GhostTable;
use crate::hash::{BlockHash, ModelFingerprint, NamespaceSalt};
use crate::ids::{BlockId, NamespaceId, SeqId};
use crate::layout::{KvLayout, KvPart};
use crate::meta::{BlockMeta, BlockState, PinLevel};
use crate::namespace::NsState;
use crate::seq::Sequence;
use crate::stats::{PoolStats, StatsSnapshot};
use crate::tier::{NoopSink, TierSink};

pub use hot_seed::HotChain;

/// One model's K/V block pool. Owned by the engine thread; statistics are shared via
/// [`BlockPool::stats`].
pub struct BlockPool {
    layout: KvLayout,
    row_bytes: usize,
    block_bytes: usize,
    arena: Arena,
    /// `[n_blocks, B]`: the tokens each block's slots hold.
    block_tokens: Vec<u32>,
    metas: Vec<BlockMeta>,
    free: FreeList,
    index: HashMap<BlockHash, u32>,
    /// Retained partial tails by the chain hash they continue (a few per parent).
    tails: HashMap<BlockHash, Vec<u32>>,
    seqs: HashMap<SeqId, Sequence>,
    next_seq: u64,
    namespaces: Vec<NsState>,
    ns_slots: HashMap<NamespaceId, usize>,
    n_used: usize,
    n_cached: usize,
    /// Unfilled slots of non-free blocks.
    wasted: usize,
    /// Logical access clock for LRU-2.
    tick: u64,
    /// Injected wall clock; `None` reads `Instant::now()`.
    now: Option<Instant>,
    /// Timed pins by expiry: `(expiry, block, pin_epoch)`; stale entries are skipped.
    timed_pins: BinaryHeap<Reverse<(Instant, u32, u64)>>,
    sink: Box<dyn TierSink>,
    stats: Arc<PoolStats>,
    /// Recently evicted hashes, for miss reasons.
    ghost: GhostTable,
    /// Salt-free content keys of resident blocks, for `isolated` misses.
    content: ContentIndex,
    /// One prompt's block hashes for the advisor, reused (grows to the longest prompt).
    advisor_refs: Vec<BlockHash>,
    /// Hot-prefix warming (`auto_pin`).
    hot: hot::HotPrefixes,
    /// Blocks lent out (see `loans`): allocated, in no sequence, untouched until back.
    lent: Vec<u32>,
    /// Where dropped loans give their blocks back.
    returns: Arc<crate::loan::Returns>,
    /// Blocks taken from `returns`, reused.
    returned: Vec<u32>,
    /// Where resident sealed blocks' token runs were followed, for drafts (see `drafts`).
    drafts: drafts::BlockDrafts,
}

/// A read-only view of one block, for tests, debugging and metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockInfo {
    /// Lifecycle state.
    pub state: BlockState,
    /// Block-table references.
    pub refcount: u32,
    /// The chain hash, when sealed.
    pub hash: Option<BlockHash>,
    /// The pin, when pinned.
    pub pin: Option<PinLevel>,
    /// Namespace the block is attributed to (meaningless when free).
    pub owner: NamespaceId,
    /// Slots holding committed tokens.
    pub filled: usize,
}

/// Ghost-table records for a pool of `n_blocks`: twice the pool (a block evicted is
/// remembered while as many blocks again are evicted after it, on average), at least 1024 and
/// at most 2^17 (1 MiB).
fn ghost_entries(n_blocks: usize) -> usize {
    n_blocks.saturating_mul(2).clamp(1024, 1 << 17)
}

impl BlockPool {
    /// A pool of as many blocks of `layout` as fit in `budget_bytes`, all free.
    pub fn new(layout: KvLayout, budget_bytes: usize) -> Result<Self, PoolError> {
        let row_bytes = layout.row_bytes()?;
        let block_bytes = layout.block_bytes()?;
        let n_blocks = (budget_bytes / block_bytes).min(u32::MAX as usize - 1);
        if n_blocks == 0 {
            return Err(PoolError::BudgetTooSmall {
                budget: budget_bytes,
                block_bytes,
            });
        }
        let mut arena = Arena::new(n_blocks, block_bytes)?;
        let n_tok = n_blocks * layout.block_tokens;
        let mut block_tokens = Vec::new();
        block_tokens
            .try_reserve_exact(n_tok)
            .map_err(|_| PoolError::ArenaAlloc { bytes: n_tok * 4 })?;
        block_tokens.resize(n_tok, 0);
        let mut metas = vec![BlockMeta::new(); n_blocks];
        let mut free = FreeList::new();
        for id in 0..n_blocks as u32 {
            free.push_back(&mut metas, id);
        }
        let stats = Arc::new(PoolStats::new(
            n_blocks as u64,
            block_bytes as u64,
            layout.block_tokens as u64,
        ));
        arena.start_prefault(stats.clone());
        let drafts = drafts::BlockDrafts::new(n_blocks, layout.block_tokens);
        stats
            .draft_index_bytes
            .store(drafts.bytes() as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(Self {
            layout,
            row_bytes,
            block_bytes,
            arena,
            block_tokens,
            metas,
            free,
            // Sized for every block at once: sealing blocks never rehashes it mid-step.
            index: HashMap::with_capacity(n_blocks),
            tails: HashMap::new(),
            seqs: HashMap::new(),
            next_seq: 0,
            namespaces: Vec::new(),
            ns_slots: HashMap::new(),
            n_used: 0,
            n_cached: 0,
            wasted: 0,
            tick: 0,
            now: None,
            timed_pins: BinaryHeap::new(),
            sink: Box::new(NoopSink),
            stats,
            ghost: GhostTable::new(ghost_entries(n_blocks)),
            content: ContentIndex::new(n_blocks),
            advisor_refs: Vec::new(),
            hot: hot::HotPrefixes::new(n_blocks),
            lent: Vec::new(),
            returns: Arc::default(),
            returned: Vec::new(),
            drafts,
        })
    }

    /// Replaces the tier that receives evicted blocks.
    pub fn set_sink(&mut self, sink: Box<dyn TierSink>) {
        self.sink = sink;
    }

    /// The layout the pool was built for.
    pub fn layout(&self) -> &KvLayout {
        &self.layout
    }

    /// Whether a sealed block keyed by `hash` is in the pool now.
    pub fn holds(&self, hash: &BlockHash) -> bool {
        self.index.contains_key(hash)
    }

    /// The chain root for `model` and `salt` under this pool's element type and block size.
    pub fn root_hash(&self, model: &ModelFingerprint, salt: &NamespaceSalt) -> BlockHash {
        BlockHash::root(model, self.layout.elem, self.layout.block_tokens, salt)
    }

    /// Blocks in the pool.
    pub fn n_blocks(&self) -> usize {
        self.metas.len()
    }

    /// Bytes per block.
    pub fn block_bytes(&self) -> usize {
        self.block_bytes
    }

    /// Bytes per K or V row.
    pub fn row_bytes(&self) -> usize {
        self.row_bytes
    }

    /// Blocks on the free list.
    pub fn free_blocks(&self) -> usize {
        self.free.len()
    }

    /// Blocks referenced by a block table.
    pub fn used_blocks(&self) -> usize {
        self.n_used
    }

    /// Unreferenced sealed blocks (prefix cache).
    pub fn cached_blocks(&self) -> usize {
        self.n_cached
    }

    /// Bytes of the ghost table (fixed at creation; see `ghost`).
    pub fn ghost_bytes(&self) -> usize {
        self.ghost.memory_bytes()
    }

    /// Shared statistics, readable from any thread.
    pub fn stats(&self) -> Arc<PoolStats> {
        self.stats.clone()
    }

    /// A plain copy of the statistics.
    pub fn snapshot(&self) -> StatsSnapshot {
        self.stats.snapshot()
    }

    /// The block cached under `hash`, if resident.
    pub fn lookup(&self, hash: &BlockHash) -> Option<BlockId> {
        self.index.get(hash).map(|&id| BlockId(id))
    }

    /// State of one block; `None` for an id outside the pool.
    pub fn block_info(&self, id: BlockId) -> Option<BlockInfo> {
        let m = self.metas.get(id.index())?;
        Some(BlockInfo {
            state: m.state,
            refcount: m.refcount,
            hash: m.hash,
            pin: m.pin,
            owner: self
                .namespaces
                .get(m.owner as usize)
                .map_or(NamespaceId(0), |n| n.id),
            filled: m.filled as usize,
        })
    }

    /// One block's bytes, `[layer][K|V][slot][row_bytes]`.
    ///
    /// # Panics
    /// If `id` is not a block of this pool (ids come from this pool's own tables).
    pub fn block_data(&self, id: BlockId) -> &[u8] {
        assert!(
            id.index() < self.metas.len(),
            "block {id:?} outside the pool"
        );
        self.arena.block(id.0)
    }

    /// The K or V row of `slot` in `layer` of block `id`.
    ///
    /// # Panics
    /// If the block, layer or slot is out of range.
    pub fn row(&self, id: BlockId, layer: usize, part: KvPart, slot: usize) -> &[u8] {
        let off = self.checked_row_offset(id, layer, part, slot);
        &self.arena.block(id.0)[off..off + self.row_bytes]
    }

    /// The `n` K or V rows of slots `slot..slot + n` in `layer` of block `id`, contiguous
    /// (`[n][row_bytes]`).
    ///
    /// # Panics
    /// If the block, layer or slot range is out of range.
    pub fn rows(&self, id: BlockId, layer: usize, part: KvPart, slot: usize, n: usize) -> &[u8] {
        assert!(
            n >= 1 && slot + n <= self.layout.block_tokens,
            "rows {slot}+{n} outside the block"
        );
        let off = self.checked_row_offset(id, layer, part, slot);
        &self.arena.block(id.0)[off..off + n * self.row_bytes]
    }

    /// The writable K or V row of `slot` in `layer` of block `id`. Only for slots handed out by
    /// [`BlockPool::reserve`]: the block is then owned by one table and not sealed.
    ///
    /// # Panics
    /// If the block, layer or slot is out of range.
    pub fn row_mut(&mut self, id: BlockId, layer: usize, part: KvPart, slot: usize) -> &mut [u8] {
        let off = self.checked_row_offset(id, layer, part, slot);
        let m = &self.metas[id.index()];
        debug_assert!(
            m.refcount == 1 && m.hash.is_none(),
            "writing block {id:?} that is shared or sealed"
        );
        let row_bytes = self.row_bytes;
        &mut self.arena.block_mut(id.0)[off..off + row_bytes]
    }

    fn checked_row_offset(&self, id: BlockId, layer: usize, part: KvPart, slot: usize) -> usize {
        assert!(
            id.index() < self.metas.len(),
            "block {id:?} outside the pool"
        );
        assert!(
            layer < self.layout.n_layer,
            "layer {layer} >= n_layer {}",
            self.layout.n_layer
        );
        assert!(
            slot < self.layout.block_tokens,
            "slot {slot} >= block_tokens {}",
            self.layout.block_tokens
        );
        self.layout.row_offset(self.row_bytes, layer, part, slot)
    }

    /// The block table of `seq`: block `i` holds positions `i*B .. (i+1)*B`.
    pub fn block_table(&self, seq: SeqId) -> Result<&[BlockId], PoolError> {
        Ok(&self.seq(seq)?.table)
    }

    /// Tokens whose K/V are present in `seq`.
    pub fn seq_len(&self, seq: SeqId) -> Result<usize, PoolError> {
        Ok(self.seq(seq)?.tokens.len())
    }

    /// The tokens whose K/V are present in `seq`.
    pub fn seq_tokens(&self, seq: SeqId) -> Result<&[u32], PoolError> {
        Ok(&self.seq(seq)?.tokens)
    }

    /// The namespace `seq` was created in.
    pub fn seq_namespace(&self, seq: SeqId) -> Result<NamespaceId, PoolError> {
        Ok(self.seq(seq)?.ns)
    }

    /// Live sequences.
    pub fn seq_count(&self) -> usize {
        self.seqs.len()
    }

    /// Blocks attributed to `ns` (in use or cached).
    pub fn namespace_held(&self, ns: NamespaceId) -> usize {
        self.ns_slots
            .get(&ns)
            .map_or(0, |&i| self.namespaces[i].held)
    }

    fn seq(&self, seq: SeqId) -> Result<&Sequence, PoolError> {
        self.seqs.get(&seq).ok_or(PoolError::UnknownSeq(seq))
    }

    /// Runs `f` on `seq` taken out of the map, putting it back whatever `f` returns.
    fn with_seq<R>(
        &mut self,
        seq: SeqId,
        f: impl FnOnce(&mut Self, &mut Sequence) -> Result<R, PoolError>,
    ) -> Result<R, PoolError> {
        let mut s = self.seqs.remove(&seq).ok_or(PoolError::UnknownSeq(seq))?;
        let r = f(self, &mut s);
        self.seqs.insert(seq, s);
        r
    }
}
