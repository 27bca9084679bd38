//! Token-granular reuse: when a sequence ends inside a block, that partial last block is kept
//! as a *retained tail* (cached, evictable like any cached block, immutable) under the chain
//! hash it continues. A later prompt whose full blocks lead to that hash and whose next tokens
//! begin with the tail's tokens attaches it and reuses those tokens' K/V; its first write then
//! copies the shared part into a private block (copy-on-write), so the tail serves others too.
//! The hash it is filed under chains from the namespace's root, so isolation is the same as for
//! sealed blocks. Tails are never written to lower tiers (they have no content hash).

use super::BlockPool;
use crate::hash::BlockHash;
use crate::ids::{BlockId, NIL};
use crate::meta::BlockState;
use crate::seq::Sequence;

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
    /// a retained tail when only `s` holds it and no tail already covers its tokens.
    pub(crate) fn retain_tail(&mut self, s: &Sequence) {
        let b = self.layout.block_tokens;
        let len = s.tokens.len();
        if s.reserved > 0 || len.is_multiple_of(b) {
            return;
        }
        let idx = len / b;
        let Some(&BlockId(id)) = s.table.get(idx) else {
            return;
        };
        let m = &self.metas[id as usize];
        if m.refcount != 1 || m.frozen() || m.filled as usize != len % b {
            return;
        }
        let parent_hash = s.parent_hash(idx);
        let ours = &s.tokens[idx * b..];
        let siblings = self.tails.get(&parent_hash).map_or(&[][..], Vec::as_slice);
        if siblings.len() >= TAILS_PER_PARENT
            || siblings
                .iter()
                .any(|&t| self.filled_tokens(t).starts_with(ours))
        {
            return;
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
        let parent = if idx == 0 { NIL } else { s.table[idx - 1].0 };
        let m = &mut self.metas[id as usize];
        m.tail_of = Some(parent_hash);
        m.parent = parent;
        if parent != NIL {
            self.metas[parent as usize].children += 1;
        }
        self.tails.entry(parent_hash).or_default().push(id);
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
