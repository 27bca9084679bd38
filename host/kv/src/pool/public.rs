//! Public prefixes in the pool: which namespaces chain through a [`PublicChain`], the public
//! account ([`PublicChain::OWNER`]) that public blocks are attributed to, and the chain a
//! namespace's sequence would give a token list (for callers that hash ahead of the pool: the
//! engine's in-flight check, tier look-ups, pins).

use std::sync::Arc;

use super::BlockPool;
use crate::error::PoolError;
use crate::hash::BlockHash;
use crate::ids::{NIL, NamespaceId, SeqId};
use crate::meta::{BlockState, PinLevel};
use crate::public::PublicChain;
use crate::seq::Sequence;

impl BlockPool {
    /// Sets (or with `None` clears) the public prefixes of `ns`. Sequences created afterwards
    /// chain through them; live sequences keep the chain they started with.
    pub fn set_public_prefixes(&mut self, ns: NamespaceId, public: Option<Arc<PublicChain>>) {
        let slot = self.ns_slot(ns);
        self.namespaces[slot].public = public.filter(|p| !p.is_empty());
        // The public account exists as soon as one namespace declares something.
        if self.namespaces[slot].public.is_some() {
            self.ns_slot(PublicChain::OWNER);
        }
    }

    /// Whether `ns` declared public prefixes.
    pub fn has_public_prefixes(&self, ns: NamespaceId) -> bool {
        self.ns_slots
            .get(&ns)
            .is_some_and(|&i| self.namespaces[i].public.is_some())
    }

    /// Moves a freshly sealed public block (in use, not in any heap) to the public account, so
    /// no tenant's cap counts it and no tenant's eviction heap holds it.
    pub(crate) fn attribute_public(&mut self, id: u32) {
        let to = self.ns_slot(PublicChain::OWNER);
        let m = &self.metas[id as usize];
        let from = m.owner as usize;
        if from == to {
            return;
        }
        debug_assert!(m.state == BlockState::Used && m.heap_pos == NIL);
        self.uncount(from, |c| &c.blocks_used, 1);
        self.namespaces[from].held -= 1;
        self.metas[id as usize].owner = to as u32;
        self.namespaces[to].held += 1;
        self.count(to, |c| &c.blocks_used, 1);
    }

    /// Blocks attributed to the public account (in use or cached).
    pub fn public_held(&self) -> usize {
        self.namespace_held(PublicChain::OWNER)
    }

    /// The chain hashes of `tokens`' whole blocks as a sequence of `ns` rooted at `root` would
    /// seal them, and how many of the leading ones are public.
    pub fn chain_hashes(
        &self,
        ns: NamespaceId,
        root: BlockHash,
        tokens: &[u32],
    ) -> (Vec<BlockHash>, usize) {
        let public = self
            .ns_slots
            .get(&ns)
            .and_then(|&i| self.namespaces[i].public.clone());
        let mut s = Sequence::new(ns, 0, root, public);
        let b = self.layout.block_tokens;
        for (i, chunk) in tokens.chunks_exact(b).enumerate() {
            let (h, public) = s.block_hash(i, chunk);
            s.push_hash(h, public);
        }
        (s.hashes, s.n_public)
    }

    /// The public prefixes the pool chains `ns`'s contexts with, if it has any.
    pub fn public_chain(&self, ns: NamespaceId) -> Option<&Arc<PublicChain>> {
        let &i = self.ns_slots.get(&ns)?;
        self.namespaces[i].public.as_ref()
    }

    /// Leading public blocks of `seq`.
    pub fn seq_public_blocks(&self, seq: SeqId) -> Result<usize, PoolError> {
        Ok(self.seq(seq)?.n_public)
    }

    /// [`BlockPool::pin_prefix`] for the full blocks `seq` holds now (its own chain, public
    /// part included). Returns the blocks pinned.
    pub fn pin_seq_blocks(
        &mut self,
        seq: SeqId,
        level: PinLevel,
        ttl: Option<std::time::Duration>,
    ) -> Result<usize, PoolError> {
        let hashes = self.seq(seq)?.hashes.clone();
        Ok(self.pin_hashes(&hashes, level, ttl))
    }
}

#[cfg(test)]
#[path = "public_tests.rs"]
mod tests;
