//! Prefix matching: attach the longest chain of resident (or promotable) sealed blocks to an
//! empty sequence, then the retained partial tail that continues it furthest (see `tails`),
//! capped so the prompt's last token is always left to compute (its logits are needed); a
//! prompt that ends on a block boundary takes its cached last block for all but that token.
//! The chain is walked from the root, so a match never has a hole.

use super::BlockPool;
use crate::draft::group_key;
use crate::error::PoolError;
use crate::hash::BlockHash;
use crate::ids::{BlockId, NIL, SeqId};
use crate::misses::{LostTier, MissReason};
use crate::seq::Sequence;
use crate::tier::{SourceMiss, TierSource};

/// One look-up's misses by reason, counted at once.
#[derive(Debug, Default)]
pub(crate) struct MissTally {
    pub blocks: [u64; 6],
    pub tokens: [u64; 6],
    pub lost_at: [u64; 4],
}

impl MissTally {
    fn add(&mut self, reason: MissReason, tier: Option<LostTier>, tokens: u64) {
        if tokens == 0 {
            return;
        }
        self.blocks[reason as usize] += 1;
        self.tokens[reason as usize] += tokens;
        if let (Some(t), MissReason::Evicted | MissReason::Expired) = (tier, reason) {
            self.lost_at[t as usize] += 1;
        }
    }
}

impl BlockPool {
    /// Attaches to the empty `seq` the longest run of cached blocks matching `tokens`, then
    /// the cached partial block continuing it furthest (token granularity), at most
    /// `tokens.len() - 1` tokens in all. Returns the tokens now present; the caller computes
    /// `tokens[returned..]`.
    pub fn match_prefix(&mut self, seq: SeqId, tokens: &[u32]) -> Result<usize, PoolError> {
        self.match_inner(seq, tokens, None, None)
    }

    /// As [`BlockPool::match_prefix`], but a block missing from RAM is asked of `source` (in
    /// prefix order) and promoted into a fresh sealed block before the walk gives up.
    pub fn match_prefix_from(
        &mut self,
        seq: SeqId,
        tokens: &[u32],
        source: &mut dyn TierSource,
    ) -> Result<usize, PoolError> {
        self.match_inner(seq, tokens, None, Some(source))
    }

    /// As [`BlockPool::match_prefix_from`] (`source` optional) for a prompt whose leading
    /// whole blocks are already hashed: `chain` is [`BlockPool::chain_hashes`] of a prefix of
    /// `tokens` in `seq`'s namespace and root, with its count of public blocks. Those blocks
    /// are not hashed again, here or when they are sealed after their compute.
    pub fn match_prefix_chained(
        &mut self,
        seq: SeqId,
        tokens: &[u32],
        chain: (&[BlockHash], usize),
        source: Option<&mut dyn TierSource>,
    ) -> Result<usize, PoolError> {
        self.match_inner(seq, tokens, Some(chain), source)
    }

    fn match_inner(
        &mut self,
        seq: SeqId,
        tokens: &[u32],
        chain: Option<(&[BlockHash], usize)>,
        mut source: Option<&mut dyn TierSource>,
    ) -> Result<usize, PoolError> {
        let (chain, chain_public) = chain.unwrap_or((&[], 0));
        self.with_seq(seq, |pool, s| {
            if !s.table.is_empty() || !s.tokens.is_empty() {
                return Err(PoolError::SeqNotEmpty {
                    seq,
                    len: s.tokens.len() + s.reserved,
                });
            }
            let b = pool.layout.block_tokens;
            let max_blocks = tokens.len().saturating_sub(1) / b;
            let mut refs = std::mem::take(&mut pool.advisor_refs);
            refs.clear();
            let mut tally = MissTally::default();
            // The chain as the sequence would record it (public run, then private), continued
            // past the first miss so every missed block gets its reason.
            let (mut prev, mut n_public, mut content) = (None, 0usize, 0u64);
            let mut missed = false;
            let mut first_reason = None;
            for (i, chunk) in tokens.chunks_exact(b).take(max_blocks).enumerate() {
                let (hash, public) = match chain.get(i) {
                    Some(&h) => (h, i < chain_public),
                    None => s.chain_hash(i, prev, n_public, chunk),
                };
                prev = Some(hash);
                n_public += usize::from(public);
                content = pool.content.key(content, chunk);
                refs.push(hash);
                let mut source_miss = SourceMiss::Absent;
                if !missed {
                    let found = match pool.index.get(&hash) {
                        Some(&id) => {
                            pool.incref(id);
                            pool.touch(id);
                            Some(id)
                        }
                        None => match source.as_deref_mut() {
                            Some(src) => {
                                let got = pool.promote(s, hash, chunk, src);
                                match got {
                                    Some(id) if public => pool.attribute_public(id),
                                    Some(_) => {}
                                    None => source_miss = src.last_miss(),
                                }
                                got
                            }
                            None => None,
                        },
                    };
                    if let Some(id) = found {
                        s.table.push(BlockId(id));
                        s.push_hash(hash, public);
                        s.tokens.extend_from_slice(chunk);
                        continue;
                    }
                    missed = true;
                }
                let (reason, tier) = pool.miss_reason(&hash, content, source_miss);
                first_reason.get_or_insert(reason);
                tally.add(reason, tier, b as u64);
            }
            pool.stats.advisor().access_prompt(s.ns, &refs);
            // The blocks left to compute seal under these hashes, not hashed again.
            s.plan(&refs, n_public, tokens, b);
            pool.advisor_refs = refs;
            let hits = s.table.len();
            if let Some(&end) = s.hashes.last() {
                pool.note_hot(end);
            }
            let full = hits * b;
            let limit = tokens.len().saturating_sub(1).saturating_sub(full);
            let boundary = if hits == max_blocks && tokens.len() == full + b {
                let last = &tokens[full..];
                let (hash, public) = match chain.get(max_blocks) {
                    Some(&h) => (h, max_blocks < chain_public),
                    None => s.chain_hash(max_blocks, prev, n_public, last),
                };
                // The last whole block is planned too: computing its last token seals it.
                s.planned.push(hash);
                s.planned_tokens.extend_from_slice(last);
                s.planned_public += usize::from(public);
                pool.match_last_block(s, last, hash)
            } else {
                None
            };
            if let (None, true, Some(src)) = (boundary, limit > 0, source) {
                // A tail staged from disk joins the retained tails the match picks from.
                pool.restore_tail(s, src);
            }
            let tail = match boundary {
                Some(k) => k,
                None => pool.match_tail(s, &tokens[full..], limit),
            };
            let matched = full + tail;
            let ns = s.ns_slot;
            // A retained tail may continue the chain inside the first missed full block: its
            // tokens were found, so that block's reason counts fewer tokens.
            if let Some(r) = first_reason {
                let t = &mut tally.tokens[r as usize];
                *t = t.saturating_sub(tail as u64);
            }
            let partial_blocks = tokens.len().div_ceil(b) - max_blocks;
            let counted: u64 = tally.tokens.iter().sum();
            let partial_tokens = ((tokens.len() - matched) as u64).saturating_sub(counted);
            tally.blocks[MissReason::Partial as usize] += partial_blocks as u64;
            tally.tokens[MissReason::Partial as usize] += partial_tokens;
            pool.count_misses(ns, &tally);
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

    /// A prompt that ends on a block boundary, every earlier block matched: when its last whole
    /// block (`last`, chain hash `hash`) is cached, attaches it for all but its last token,
    /// which is left to compute (the first write copies the rest into a private block, as for a
    /// retained tail). Returns the tokens reused; `None` when the block is not cached.
    fn match_last_block(
        &mut self,
        s: &mut Sequence,
        last: &[u32],
        hash: BlockHash,
    ) -> Option<usize> {
        let &id = self.index.get(&hash)?;
        self.incref(id);
        self.touch(id);
        s.table.push(BlockId(id));
        let k = last.len() - 1;
        s.tokens.extend_from_slice(&last[..k]);
        self.count(s.ns_slot, |c| &c.tail_hits, 1);
        Some(k)
    }

    /// Why full block `hash` (content key `content`) missed, and for evicted or corrupt
    /// blocks the tier where it was lost. See `misses` for the order.
    fn miss_reason(
        &self,
        hash: &BlockHash,
        content: u64,
        source: SourceMiss,
    ) -> (MissReason, Option<LostTier>) {
        if let SourceMiss::Corrupt(t) = source {
            return (MissReason::Corrupt, Some(t));
        }
        if let Some(g) = self.ghost.get(hash) {
            let r = if g.expired {
                MissReason::Expired
            } else {
                MissReason::Evicted
            };
            return (r, Some(g.tier));
        }
        if self.content.holds(content) {
            return (MissReason::Isolated, None);
        }
        (MissReason::Cold, None)
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
        // Staged in a block this pool lent: linked as it is, nothing copied.
        let id = match self.adopt_lent(&hash, src) {
            Some(id) => id,
            None => {
                self.make_room(s.ns_slot, 1).ok()?;
                let id = self.alloc(s.ns_slot).ok()?;
                if !src.fetch(&hash, self.arena.block_mut(id)) {
                    self.decref(id);
                    return None;
                }
                id
            }
        };
        let b = self.layout.block_tokens;
        self.block_tokens[id as usize * b..(id as usize + 1) * b].copy_from_slice(chunk);
        self.set_filled(id, b);
        let parent = s.table.last().map_or(NIL, |p| p.0);
        self.link_sealed(id, hash, parent, group_key(&s.root));
        self.count(s.ns_slot, |c| &c.promotions, 1);
        if let Some(t) = src.last_hit() {
            self.count(s.ns_slot, |c| &c.promoted_from[t.bits() as usize], 1);
        }
        Some(id)
    }
}
