//! A namespace's public prefixes as the pool sees them: the common chain root and the set of
//! chain hashes of every whole block of every declared prefix under it. A sequence's leading
//! block is public exactly when its hash (chained from the common root through the previous
//! public blocks) is in the set; hash equality stands for token equality, so a block is public
//! only when it and everything before it equal the start of one declared prefix (see the
//! [`crate::hash`] module doc for the chain format). Public blocks are attributed to a
//! dedicated pool namespace, [`PublicChain::OWNER`], never to the tenant that computed them.

use std::collections::HashSet;

use crate::hash::BlockHash;
use crate::ids::NamespaceId;

/// Public prefixes of one namespace, compiled to block hashes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicChain {
    root: BlockHash,
    blocks: HashSet<BlockHash>,
}

impl PublicChain {
    /// The pool namespace public blocks are attributed to (in use or cached): no tenant's cap
    /// counts them and no tenant's eviction heap holds them.
    pub const OWNER: NamespaceId = NamespaceId(u32::MAX);

    /// Compiles `prefixes` (token sequences, each from position 0 of a prompt) into the hashes
    /// of their whole blocks of `block_tokens` tokens under `common_root` (the pool's root of
    /// the common salt). A prefix shorter than one block contributes nothing.
    pub fn new(common_root: BlockHash, block_tokens: usize, prefixes: &[Vec<u32>]) -> Self {
        let mut blocks = HashSet::new();
        if block_tokens > 0 {
            for p in prefixes {
                let mut prev = common_root;
                for chunk in p.chunks_exact(block_tokens) {
                    prev = BlockHash::chain(&prev, chunk);
                    blocks.insert(prev);
                }
            }
        }
        Self {
            root: common_root,
            blocks,
        }
    }

    /// The common root public chains start from.
    pub fn root(&self) -> &BlockHash {
        &self.root
    }

    /// Whether `hash` is a declared public block.
    pub fn contains(&self, hash: &BlockHash) -> bool {
        self.blocks.contains(hash)
    }

    /// Distinct public blocks declared.
    pub fn len(&self) -> usize {
        self.blocks.len()
    }

    /// Whether no whole block is declared.
    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_blocks_of_every_prefix_are_public() {
        let root = BlockHash([3; 32]);
        let p = PublicChain::new(root, 4, &[(0..10).collect(), vec![7, 7, 7]]);
        assert_eq!(p.len(), 2, "10 tokens make 2 whole blocks, 3 tokens none");
        let h0 = BlockHash::chain(&root, &[0, 1, 2, 3]);
        assert!(p.contains(&h0));
        assert!(p.contains(&BlockHash::chain(&h0, &[4, 5, 6, 7])));
        assert!(!p.contains(&BlockHash::chain(&root, &[4, 5, 6, 7])));
        assert!(PublicChain::new(root, 0, &[vec![1]]).is_empty());
    }
}
