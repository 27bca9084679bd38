//! Sequence operations: create, reserve room (with copy-on-write of a shared or sealed tail),
//! commit tokens (sealing and deduplicating blocks that become full), fork, truncate, drop.
//! Every failing operation leaves the sequence as it was.

use std::sync::atomic::Ordering;

use super::BlockPool;
use crate::draft::group_key;
use crate::error::PoolError;
use crate::hash::BlockHash;
use crate::ids::{BlockId, NIL, NamespaceId, SeqId, SlotRef};
use crate::layout::KvPart;
use crate::seq::Sequence;

impl BlockPool {
    /// A new empty sequence in `ns` whose hash chain starts at `root`
    /// (see [`BlockPool::root_hash`]).
    pub fn create_seq(&mut self, ns: NamespaceId, root: BlockHash) -> SeqId {
        let slot = self.ns_slot(ns);
        let id = SeqId(self.next_seq);
        self.next_seq += 1;
        let public = self.namespaces[slot].public.clone();
        self.seqs.insert(id, Sequence::new(ns, slot, root, public));
        self.count(slot, |c| &c.seqs_active, 1);
        id
    }

    /// Makes room for `n_new` tokens at positions `len..len + n_new` and returns where each goes.
    /// Write their K/V rows with [`BlockPool::row_mut`], then call [`BlockPool::commit`].
    /// A partially filled tail block that is shared or sealed is copied first (copy-on-write).
    /// On error (`OutOfBlocks`, `QuotaExceeded`) nothing is reserved; cached blocks may have
    /// been evicted on the way.
    pub fn reserve(&mut self, seq: SeqId, n_new: usize) -> Result<Vec<SlotRef>, PoolError> {
        let start = self.reserve_positions(seq, n_new)?;
        let b = self.layout.block_tokens;
        let table = self.block_table(seq)?;
        Ok((start..start + n_new)
            .map(|pos| SlotRef {
                block: table[pos / b],
                slot: pos % b,
                pos,
            })
            .collect())
    }

    /// [`BlockPool::reserve`] without listing the slots (the engine reads them from the block
    /// table): returns the first reserved position. Allocates nothing once the sequence's
    /// vectors have room (see [`BlockPool::reserve_capacity`]).
    pub fn reserve_positions(&mut self, seq: SeqId, n_new: usize) -> Result<usize, PoolError> {
        self.with_seq(seq, |pool, s| {
            if s.reserved > 0 {
                return Err(PoolError::ReservationPending {
                    seq,
                    reserved: s.reserved,
                });
            }
            let b = pool.layout.block_tokens;
            let len = s.tokens.len();
            let end = len.checked_add(n_new).ok_or(PoolError::OutOfBlocks {
                needed: usize::MAX,
                available: pool.free.len() + pool.n_cached,
            })?;
            let cow = n_new > 0 && !len.is_multiple_of(b) && {
                let m = &pool.metas[s.table[len / b].index()];
                m.refcount > 1 || m.frozen()
            };
            let new_blocks = end.div_ceil(b) - s.table.len();
            pool.make_room(s.ns_slot, new_blocks + usize::from(cow))?;
            if cow {
                pool.copy_tail(s, len / b, len % b)?;
            }
            for _ in 0..new_blocks {
                let id = pool.alloc(s.ns_slot)?;
                s.table.push(BlockId(id));
            }
            s.reserved = n_new;
            Ok(len)
        })
    }

    /// Grows `seq`'s token list, block table and hash list so that it can reach `tokens`
    /// positions without reallocating (a generation calls this once with its whole budget, so
    /// its decode steps allocate nothing). Capacity only; nothing is reserved in the pool.
    pub fn reserve_capacity(&mut self, seq: SeqId, tokens: usize) -> Result<(), PoolError> {
        let b = self.layout.block_tokens;
        let s = self.seqs.get_mut(&seq).ok_or(PoolError::UnknownSeq(seq))?;
        s.tokens.reserve(tokens.saturating_sub(s.tokens.len()));
        let blocks = tokens.div_ceil(b);
        s.table.reserve(blocks.saturating_sub(s.table.len()));
        s.hashes.reserve(blocks.saturating_sub(s.hashes.len()));
        Ok(())
    }

    /// Replaces table entry `idx` by a private copy of its first `n_slots` slots.
    fn copy_tail(&mut self, s: &mut Sequence, idx: usize, n_slots: usize) -> Result<(), PoolError> {
        let old = s.table[idx].0;
        let new = self.alloc(s.ns_slot)?;
        let (b, row) = (self.layout.block_tokens, self.row_bytes);
        for layer in 0..self.layout.n_layer {
            for part in [KvPart::K, KvPart::V] {
                let off = self.layout.row_offset(row, layer, part, 0);
                self.arena.copy_range(old, new, off, n_slots * row);
            }
        }
        let (src, dst) = (old as usize * b, new as usize * b);
        self.block_tokens.copy_within(src..src + n_slots, dst);
        self.set_filled(new, n_slots);
        s.table[idx] = BlockId(new);
        self.decref(old);
        self.count(s.ns_slot, |c| &c.cow_copies, 1);
        Ok(())
    }

    /// Records the tokens of the positions reserved by the last [`BlockPool::reserve`] (exactly
    /// as many). Blocks that become full are sealed; one whose hash is already cached is replaced
    /// by the cached block and freed (dedup).
    pub fn commit(&mut self, seq: SeqId, tokens: &[u32]) -> Result<(), PoolError> {
        let reserved = self.seq(seq)?.reserved;
        if tokens.len() != reserved {
            return Err(PoolError::CommitMismatch {
                seq,
                reserved,
                got: tokens.len(),
            });
        }
        self.commit_part(seq, tokens)
    }

    /// Records the tokens of the first `tokens.len()` reserved positions (at most as many as are
    /// reserved); the rest stay reserved, to be committed later or dropped by a truncate (a
    /// speculative draft commits each token as it is verified).
    pub fn commit_part(&mut self, seq: SeqId, tokens: &[u32]) -> Result<(), PoolError> {
        self.with_seq(seq, |pool, s| {
            if tokens.len() > s.reserved {
                return Err(PoolError::CommitMismatch {
                    seq,
                    reserved: s.reserved,
                    got: tokens.len(),
                });
            }
            let b = pool.layout.block_tokens;
            let len = s.tokens.len();
            for (k, &t) in tokens.iter().enumerate() {
                let pos = len + k;
                pool.block_tokens[s.table[pos / b].index() * b + pos % b] = t;
            }
            s.tokens.extend_from_slice(tokens);
            s.reserved -= tokens.len();
            let new_len = s.tokens.len();
            for i in len / b..new_len.div_ceil(b) {
                pool.set_filled(s.table[i].0, (new_len - i * b).min(b));
            }
            for i in len / b..new_len / b {
                pool.seal(s, i);
            }
            Ok(())
        })
    }

    /// Seals full block `i` of `s` under its chain hash, or swaps in the cached block with that hash.
    fn seal(&mut self, s: &mut Sequence, i: usize) {
        let b = self.layout.block_tokens;
        debug_assert_eq!(s.hashes.len(), i);
        let (hash, public) = s.block_hash(i, &s.tokens[i * b..(i + 1) * b]);
        let id = s.table[i].0;
        if let Some(&existing) = self.index.get(&hash) {
            self.incref(existing);
            self.touch(existing);
            s.table[i] = BlockId(existing);
            self.decref(id);
            self.count(s.ns_slot, |c| &c.dedups, 1);
        } else {
            let parent = if i == 0 { NIL } else { s.table[i - 1].0 };
            self.link_sealed(id, hash, parent, group_key(&s.root));
            if public {
                self.attribute_public(id);
            }
        }
        self.stats.advisor().insert(s.ns, &hash);
        s.push_hash(hash, public);
    }

    /// Marks `id` sealed under `hash`, indexes it (for drafts of `group` too) and links it
    /// under `parent`.
    pub(crate) fn link_sealed(&mut self, id: u32, hash: BlockHash, parent: u32, group: u64) {
        let m = &mut self.metas[id as usize];
        m.hash = Some(hash);
        m.parent = parent;
        self.index.insert(hash, id);
        let b = self.layout.block_tokens;
        let parent_key = if parent == NIL {
            0
        } else {
            self.content.of(parent)
        };
        let at = id as usize * b;
        let key = self.content.key(parent_key, &self.block_tokens[at..at + b]);
        self.content.insert(id, key);
        if parent != NIL {
            self.metas[parent as usize].children += 1;
        }
        self.index_drafts(id, parent, group);
    }

    /// A new sequence sharing every block of `seq` (O(blocks), no K/V copied). The shared partial
    /// tail is copied by whichever side writes to it first.
    pub fn fork(&mut self, seq: SeqId) -> Result<SeqId, PoolError> {
        let s = self.seq(seq)?;
        if s.reserved > 0 {
            return Err(PoolError::ReservationPending {
                seq,
                reserved: s.reserved,
            });
        }
        let mut copy = s.clone();
        copy.clear_planned();
        for id in &copy.table {
            self.incref(id.0);
        }
        let slot = copy.ns_slot;
        let id = SeqId(self.next_seq);
        self.next_seq += 1;
        self.seqs.insert(id, copy);
        self.count(slot, |c| &c.forks, 1);
        self.count(slot, |c| &c.seqs_active, 1);
        Ok(id)
    }

    /// Drops positions `len..` (and any uncommitted reservation). Blocks no longer needed are
    /// released; a sealed block cut in the middle stays shared and unmodified until the next
    /// write copies it.
    pub fn truncate(&mut self, seq: SeqId, len: usize) -> Result<(), PoolError> {
        self.with_seq(seq, |pool, s| {
            if len > s.tokens.len() {
                return Err(PoolError::TruncatePastEnd {
                    seq,
                    len,
                    seq_len: s.tokens.len(),
                });
            }
            let b = pool.layout.block_tokens;
            let keep = len.div_ceil(b);
            while s.table.len() > keep {
                if let Some(id) = s.table.pop() {
                    pool.decref(id.0);
                }
            }
            s.reserved = 0;
            s.tokens.truncate(len);
            s.truncate_hashes(len / b);
            if !len.is_multiple_of(b) {
                let tail = s.table[keep - 1].0;
                let m = &pool.metas[tail as usize];
                if !m.frozen() && m.refcount == 1 {
                    pool.set_filled(tail, len % b);
                }
            }
            Ok(())
        })
    }

    /// Ends `seq`: every block loses a reference; sealed blocks left unreferenced stay cached,
    /// and so does its partial last block (a retained tail, see `tails`).
    pub fn drop_seq(&mut self, seq: SeqId) -> Result<(), PoolError> {
        self.end_seq(seq).map(drop)
    }

    /// [`BlockPool::drop_seq`], returning the retained tail it left (see
    /// [`BlockPool::retained_tail`]), if it left one.
    pub fn end_seq(&mut self, seq: SeqId) -> Result<Option<BlockId>, PoolError> {
        // An uncommitted reservation is let go first, so the committed tail can be retained.
        let len = self.seq(seq)?.tokens.len();
        self.truncate(seq, len)?;
        let s = self.seqs.remove(&seq).ok_or(PoolError::UnknownSeq(seq))?;
        let kept = self.retain_tail(&s).map(BlockId);
        for id in s.table.iter().rev() {
            self.decref(id.0);
        }
        let slot = s.ns_slot;
        self.stats.total.seqs_active.fetch_sub(1, Ordering::Relaxed);
        self.namespaces[slot]
            .stats
            .seqs_active
            .fetch_sub(1, Ordering::Relaxed);
        Ok(kept)
    }
}
