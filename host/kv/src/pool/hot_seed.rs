//! The pinned hot prefixes as whole chains, for saving across a restart: each chain's
//! namespace (the owner of its deepest block), its tokens (every block from the root down,
//! read from the pool) and its decayed count. Invariant: only chains resident from the end up
//! to the root are reported, and never one owned by the public prefixes (those come back from
//! configuration, not from use).

use super::BlockPool;
use crate::ids::{NIL, NamespaceId};
use crate::public::PublicChain;

/// One pinned hot prefix.
#[derive(Clone, Debug, PartialEq)]
pub struct HotChain {
    /// The namespace whose request sealed the chain's deepest block.
    pub ns: NamespaceId,
    /// Every token of the chain's blocks, root first (a whole number of blocks).
    pub tokens: Vec<u32>,
    /// The decayed reuse count.
    pub count: f64,
}

impl BlockPool {
    /// The chains hot-prefix warming pins now, highest count first, at most `max_tokens`
    /// tokens each (a longer chain is left out).
    pub fn hot_chains(&self, max_tokens: usize) -> Vec<HotChain> {
        let b = self.layout.block_tokens;
        let mut out = Vec::new();
        for (end, count) in self.hot_pinned() {
            let Some(&last) = self.index.get(&end) else {
                continue;
            };
            let owner = self.metas[last as usize].owner as usize;
            let Some(ns) = self.namespaces.get(owner).map(|n| n.id) else {
                continue;
            };
            if ns == PublicChain::OWNER {
                continue;
            }
            let mut ids = Vec::new();
            let mut id = last;
            while id != NIL && ids.len().saturating_mul(b) <= max_tokens {
                ids.push(id);
                id = self.metas[id as usize].parent;
            }
            if id != NIL || ids.len().saturating_mul(b) > max_tokens {
                continue;
            }
            let mut tokens = Vec::with_capacity(ids.len() * b);
            for &id in ids.iter().rev() {
                let at = id as usize * b;
                tokens.extend_from_slice(&self.block_tokens[at..at + b]);
            }
            out.push(HotChain { ns, tokens, count });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use crate::hash::{BlockHash, ModelFingerprint, NamespaceSalt};
    use crate::ids::NamespaceId;
    use crate::layout::{KvElem, KvLayout};
    use crate::pool::BlockPool;

    const B: usize = 4;
    const NS: NamespaceId = NamespaceId(7);

    fn pool() -> BlockPool {
        let layout = KvLayout::new(1, 32, KvElem::F16).with_block_tokens(B);
        BlockPool::new(layout, 64 * layout.block_bytes().unwrap()).unwrap()
    }

    fn request(p: &mut BlockPool, root: BlockHash, prompt: &[u32]) {
        let s = p.create_seq(NS, root);
        let hit = p.match_prefix(s, prompt).unwrap();
        let rest = &prompt[hit..];
        p.reserve(s, rest.len()).unwrap();
        p.commit(s, rest).unwrap();
        p.drop_seq(s).unwrap();
    }

    #[test]
    fn pinned_chains_come_back_whole_and_seed_a_new_pool() {
        let mut p = pool();
        let root = p.root_hash(&ModelFingerprint([1; 32]), &NamespaceSalt::derive("n"));
        p.set_auto_pin(2);
        let prompt: Vec<u32> = (10..10 + 3 * B as u32 + 1).collect();
        for _ in 0..5 {
            request(&mut p, root, &prompt);
        }
        let chains = p.hot_chains(1 << 20);
        assert_eq!(chains.len(), 1);
        assert_eq!(chains[0].ns, NS);
        assert_eq!(chains[0].tokens, prompt[..3 * B]);
        assert!(chains[0].count > 3.0, "{}", chains[0].count);
        assert!(p.hot_chains(2 * B).is_empty(), "longer than the cap");

        // A fresh pool holding the chain (as a re-warm leaves it), seeded: pinned again.
        let mut q = pool();
        q.set_auto_pin(2);
        request(&mut q, root, &chains[0].tokens);
        assert_eq!(q.auto_pinned_blocks(), 0);
        let end = q.chain_hashes(NS, root, &chains[0].tokens).0[2];
        q.seed_hot(end, chains[0].count);
        assert_eq!(q.auto_pinned_blocks(), 3);
        q.evict_cached(usize::MAX);
        assert!(q.lookup(&end).is_some(), "pinned through an eviction");
        assert_eq!(q.hot_chains(1 << 20)[0].tokens, chains[0].tokens);
        // Garbage counts are taken as one reuse, never a panic.
        for c in [f64::NAN, f64::INFINITY, -5.0] {
            q.seed_hot(end, c);
        }
        q.check_invariants().unwrap();
    }
}
