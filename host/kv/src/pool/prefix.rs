//! Prefix matching: attach the longest chain of resident (or promotable) sealed blocks to an
//! empty sequence, then the retained partial tail that continues it furthest (see `tails`),
//! capped so the prompt's last token is always left to compute (its logits are needed). The
//! chain is walked from the root, so a match never has a hole.

use super::BlockPool;
use crate::error::PoolError;
use crate::hash::BlockHash;
use crate::ids::{BlockId, NIL, SeqId};
use crate::seq::Sequence;
use crate::tier::TierSource;

impl BlockPool {
    /// Attaches to the empty `seq` the longest run of cached blocks matching `tokens`, then
    /// the cached partial block continuing it furthest (token granularity), at most
    /// `tokens.len() - 1` tokens in all. Returns the tokens now present; the caller computes
    /// `tokens[returned..]`.
    pub fn match_prefix(&mut self, seq: SeqId, tokens: &[u32]) -> Result<usize, PoolError> {
        self.match_inner(seq, tokens, None)
    }

    /// As [`BlockPool::match_prefix`], but a block missing from RAM is asked of `source` (in
    /// prefix order) and promoted into a fresh sealed block before the walk gives up.
    pub fn match_prefix_from(
        &mut self,
        seq: SeqId,
        tokens: &[u32],
        source: &mut dyn TierSource,
    ) -> Result<usize, PoolError> {
        self.match_inner(seq, tokens, Some(source))
    }

    fn match_inner(
        &mut self,
        seq: SeqId,
        tokens: &[u32],
        mut source: Option<&mut dyn TierSource>,
    ) -> Result<usize, PoolError> {
        self.with_seq(seq, |pool, s| {
            if !s.table.is_empty() || !s.tokens.is_empty() {
                return Err(PoolError::SeqNotEmpty {
                    seq,
                    len: s.tokens.len() + s.reserved,
                });
            }
            let b = pool.layout.block_tokens;
            let max_blocks = tokens.len().saturating_sub(1) / b;
            for (i, chunk) in tokens.chunks_exact(b).take(max_blocks).enumerate() {
                let (hash, public) = s.block_hash(i, chunk);
                let id = match pool.index.get(&hash) {
                    Some(&id) => {
                        pool.incref(id);
                        pool.touch(id);
                        id
                    }
                    None => match source
                        .as_deref_mut()
                        .and_then(|src| pool.promote(s, hash, chunk, src))
                    {
                        Some(id) => {
                            if public {
                                pool.attribute_public(id);
                            }
                            id
                        }
                        None => break,
                    },
                };
                s.table.push(BlockId(id));
                s.push_hash(hash, public);
                s.tokens.extend_from_slice(chunk);
            }
            let hits = s.table.len();
            let full = hits * b;
            let limit = tokens.len().saturating_sub(1).saturating_sub(full);
            let tail = pool.match_tail(s, &tokens[full..], limit);
            let matched = full + tail;
            let ns = s.ns_slot;
            pool.count(ns, |c| &c.hit_blocks, hits as u64);
            pool.count(
                ns,
                |c| &c.miss_blocks,
                (tokens.len().div_ceil(b) - hits) as u64,
            );
            pool.count(ns, |c| &c.hit_tokens, matched as u64);
            pool.count(ns, |c| &c.miss_tokens, (tokens.len() - matched) as u64);
            Ok(matched)
        })
    }

    /// Brings block `hash` (the next block of `s`) in from `src`; `None` when there is no room
    /// or the source lacks it.
    fn promote(
        &mut self,
        s: &Sequence,
        hash: BlockHash,
        chunk: &[u32],
        src: &mut dyn TierSource,
    ) -> Option<u32> {
        self.make_room(s.ns_slot, 1).ok()?;
        let id = self.alloc(s.ns_slot).ok()?;
        if !src.fetch(&hash, self.arena.block_mut(id)) {
            self.decref(id);
            return None;
        }
        let b = self.layout.block_tokens;
        self.block_tokens[id as usize * b..(id as usize + 1) * b].copy_from_slice(chunk);
        self.set_filled(id, b);
        let parent = s.table.last().map_or(NIL, |p| p.0);
        self.link_sealed(id, hash, parent);
        self.count(s.ns_slot, |c| &c.promotions, 1);
        Some(id)
    }
}
