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

/// The chain hash of full block `i` (holding `chunk`) of a context rooted at `root` in a
/// namespace declaring `public`, given block `i - 1`'s hash `prev` (`None` for block 0) and how
/// many of blocks `..i` are public; and whether block `i` is public: it continues the public
/// run and is a declared public block. The first private block after a public run forks from
/// it under `root` (see [`crate::hash`]).
pub fn chain_step(
    root: &BlockHash,
    public: Option<&PublicChain>,
    i: usize,
    prev: Option<BlockHash>,
    n_public: usize,
    chunk: &[u32],
) -> (BlockHash, bool) {
    if let Some(p) = public
        && i == n_public
    {
        let h = BlockHash::chain(&prev.unwrap_or(*p.root()), chunk);
        if p.contains(&h) {
            return (h, true);
        }
    }
    let parent = match prev {
        None => *root,
        Some(h) if i == n_public => BlockHash::private_fork(root, &h),
        Some(h) => h,
    };
    (BlockHash::chain(&parent, chunk), false)
}

/// The hashes of every full block of a context `tokens` (from its start) rooted at `root` in a
/// namespace declaring `public`, and how many leading blocks are public.
pub fn context_chain(
    root: &BlockHash,
    public: Option<&PublicChain>,
    tokens: &[u32],
    block_tokens: usize,
) -> (Vec<BlockHash>, usize) {
    let mut chain = Vec::with_capacity(tokens.len() / block_tokens.max(1));
    let mut n_public = 0;
    if block_tokens == 0 {
        return (chain, 0);
    }
    for (i, chunk) in tokens.chunks_exact(block_tokens).enumerate() {
        let (h, is_public) = chain_step(root, public, i, chain.last().copied(), n_public, chunk);
        if is_public {
            n_public += 1;
        }
        chain.push(h);
    }
    (chain, n_public)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_context_chain_runs_public_then_forks_private() {
        let (common, own) = (BlockHash([3; 32]), BlockHash([9; 32]));
        let p = PublicChain::new(common, 4, &[(0..8).collect()]);
        let tokens: Vec<u32> = (0..8).chain([50, 51, 52, 53]).collect();
        let (chain, n_public) = context_chain(&own, Some(&p), &tokens, 4);
        assert_eq!((chain.len(), n_public), (3, 2));
        let h0 = BlockHash::chain(&common, &[0, 1, 2, 3]);
        let h1 = BlockHash::chain(&h0, &[4, 5, 6, 7]);
        assert_eq!(&chain[..2], &[h0, h1]);
        let fork = BlockHash::private_fork(&own, &h1);
        assert_eq!(chain[2], BlockHash::chain(&fork, &[50, 51, 52, 53]));
        // Without the declaration: a plain chain from the namespace's root.
        let (plain, none) = context_chain(&own, None, &tokens, 4);
        assert_eq!(none, 0);
        assert_eq!(plain[0], BlockHash::chain(&own, &[0, 1, 2, 3]));
        assert_eq!(context_chain(&own, Some(&p), &tokens, 0), (Vec::new(), 0));
    }

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
