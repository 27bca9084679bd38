//! Token-granular reuse: when a sequence ends inside a block, that partial last block is kept
//! as a *retained tail* (cached, evictable like any cached block, immutable) under the chain
//! hash it continues. A later prompt whose full blocks lead to that hash and whose next tokens
//! begin with the tail's tokens attaches it and reuses those tokens' K/V; its first write then
//! copies the shared part into a private block (copy-on-write), so the tail serves others too.
//! The hash it is filed under chains from the namespace's root, so isolation is the same as for
//! sealed blocks. A tail kept on disk (under its parent's tail key, see [`crate::hash`]) comes
//! back through staging: before the tail match, the one a [`TierSource`] staged under the
//! matched chain's last hash joins the index as if its sequence had just ended here.

use super::BlockPool;
use crate::hash::BlockHash;
use crate::ids::{BlockId, NIL};
use crate::meta::BlockState;
use crate::seq::Sequence;
use crate::tier::{TailBytes, TierSource};

/// At most this many tails continue one parent hash (different continuations of one prefix).
const TAILS_PER_PARENT: usize = 16;

impl BlockPool {
    /// The tokens a block's filled slots hold.
    fn filled_tokens(&self, id: u32) -> &[u32] {
        let b = self.layout.block_tokens;
        let at = id as usize * b;
        &self.block_tokens[at..at + self.metas[id as usize].filled as usize]
    }

    /// Called as `s` ends (before its references are dropped): keeps its partial last block as
    /// a retained tail when only `s` holds it and no tail already covers its tokens. Returns
    /// the block kept.
    pub(crate) fn retain_tail(&mut self, s: &Sequence) -> Option<u32> {
        let b = self.layout.block_tokens;
        let len = s.tokens.len();
        if s.reserved > 0 || len.is_multiple_of(b) {
            return None;
        }
        let idx = len / b;
        let &BlockId(id) = s.table.get(idx)?;
        let m = &self.metas[id as usize];
        if m.refcount != 1 || m.frozen() || m.filled as usize != len % b {
            return None;
        }
        let parent_hash = s.parent_hash(idx);
        if !self.admit_tail(&parent_hash, &s.tokens[idx * b..]) {
            return None;
        }
        let parent = if idx == 0 { NIL } else { s.table[idx - 1].0 };
        self.link_tail(id, parent_hash, parent);
        Some(id)
    }

    /// Whether a tail of `ours` may join those continuing `parent_hash`: there is room and no
    /// tail covers it. Shorter unreferenced tails that `ours` extends are then freed.
    fn admit_tail(&mut self, parent_hash: &BlockHash, ours: &[u32]) -> bool {
        let siblings = self.tails.get(parent_hash).map_or(&[][..], Vec::as_slice);
        if siblings.len() >= TAILS_PER_PARENT
            || siblings
                .iter()
                .any(|&t| self.filled_tokens(t).starts_with(ours))
        {
            return false;
        }
        // A shorter unreferenced tail that ours extends is superseded.
        let superseded: Vec<u32> = siblings
            .iter()
            .copied()
            .filter(|&t| {
                self.metas[t as usize].state == BlockState::Cached
                    && ours.starts_with(self.filled_tokens(t))
            })
            .collect();
        for t in superseded {
            self.drop_cached_tail(t);
        }
        true
    }

    /// Files block `id` as a retained tail continuing `parent_hash`, child of block `parent`.
    fn link_tail(&mut self, id: u32, parent_hash: BlockHash, parent: u32) {
        let m = &mut self.metas[id as usize];
        m.tail_of = Some(parent_hash);
        m.parent = parent;
        if parent != NIL {
            self.metas[parent as usize].children += 1;
        }
        self.tails.entry(parent_hash).or_default().push(id);
    }

    /// A retained tail's parent hash and tokens; `None` when `id` is not one.
    pub fn retained_tail(&self, id: BlockId) -> Option<(BlockHash, &[u32])> {
        let parent = self.metas.get(id.index())?.tail_of?;
        Some((parent, self.filled_tokens(id.0)))
    }

    /// Whether a retained tail continuing `parent` begins with all of `tokens`: the tail match
    /// would reuse them all, nothing to stage.
    pub fn holds_tail(&self, parent: &BlockHash, tokens: &[u32]) -> bool {
        self.tails.get(parent).is_some_and(|list| {
            list.iter()
                .any(|&t| self.filled_tokens(t).starts_with(tokens))
        })
    }

    /// Before the tail match of `s` (whose whole blocks are matched): keeps the tail `src`
    /// staged under `s`'s last hash as a cached retained tail, linked in place when it lies in
    /// a block this pool lent, unless one already covers its tokens or there is no room.
    pub(crate) fn restore_tail(&mut self, s: &Sequence, src: &mut dyn TierSource) {
        let b = self.layout.block_tokens;
        if s.table.len() * b != s.tokens.len() {
            return;
        }
        let parent_hash = s.parent_hash(s.table.len());
        let Some(tail) = src.tail(&parent_hash) else {
            return;
        };
        let n = tail.tokens.len();
        let covered = self.holds_tail(&parent_hash, tail.tokens);
        let full = self.tails.get(&parent_hash).map_or(0, Vec::len) >= TAILS_PER_PARENT;
        if n == 0 || n >= b || covered || full {
            return;
        }
        let id = match tail.bytes {
            TailBytes::Lent(loan, k) if loan.lent_by(&self.returns) => {
                let Some(id) = loan.adopt(k) else { return };
                if let Some(at) = self.lent.iter().position(|&l| l == id) {
                    self.lent.swap_remove(at);
                }
                id
            }
            TailBytes::Lent(loan, k) => match loan.slot(k) {
                Some(bytes) => match self.copy_in(s.ns_slot, bytes) {
                    Some(id) => id,
                    None => return,
                },
                None => return,
            },
            TailBytes::Copy(bytes) => match self.copy_in(s.ns_slot, bytes) {
                Some(id) => id,
                None => return,
            },
        };
        let at = id as usize * b;
        self.block_tokens[at..at + n].copy_from_slice(tail.tokens);
        self.set_filled(id, n);
        if self.admit_tail(&parent_hash, tail.tokens) {
            let parent = s.table.last().map_or(NIL, |p| p.0);
            self.link_tail(id, parent_hash, parent);
        }
        // Cached (a retained tail) when linked, freed otherwise.
        self.decref(id);
    }

    /// A fresh block of namespace slot `ns` holding `bytes` (one block's), with one reference;
    /// `None` when there is no room.
    fn copy_in(&mut self, ns: usize, bytes: &[u8]) -> Option<u32> {
        if bytes.len() != self.block_bytes {
            return None;
        }
        self.make_room(ns, 1).ok()?;
        let id = self.alloc(ns).ok()?;
        self.arena.block_mut(id).copy_from_slice(bytes);
        Some(id)
    }

    /// Frees an unreferenced retained tail (superseded by a longer one).
    fn drop_cached_tail(&mut self, id: u32) {
        self.dequeue(id);
        self.release(id);
    }

    /// Removes `id` from the tail index (the block is being freed).
    pub(crate) fn forget_tail(&mut self, parent_hash: BlockHash, id: u32) {
        if let Some(list) = self.tails.get_mut(&parent_hash) {
            list.retain(|&t| t != id);
            if list.is_empty() {
                self.tails.remove(&parent_hash);
            }
        }
    }

    /// After `s`'s full blocks were matched: attaches the retained tail under its last hash
    /// that shares the longest run with `rest` (at most `limit` tokens). Returns the tokens
    /// reused (0 when none).
    pub(crate) fn match_tail(&mut self, s: &mut Sequence, rest: &[u32], limit: usize) -> usize {
        let b = self.layout.block_tokens;
        if limit == 0 || !s.tokens.len().is_multiple_of(b) {
            return 0;
        }
        let parent_hash = s.parent_hash(s.table.len());
        let Some(candidates) = self.tails.get(&parent_hash) else {
            return 0;
        };
        let best = candidates
            .iter()
            .map(|&t| {
                let common = self
                    .filled_tokens(t)
                    .iter()
                    .zip(rest)
                    .take_while(|(a, b)| a == b)
                    .count();
                (common.min(limit), t)
            })
            .max();
        let Some((k, id)) = best.filter(|&(k, _)| k > 0) else {
            return 0;
        };
        self.incref(id);
        self.touch(id);
        s.table.push(BlockId(id));
        s.tokens.extend_from_slice(&rest[..k]);
        self.count(s.ns_slot, |c| &c.tail_hits, 1);
        k
    }
}
