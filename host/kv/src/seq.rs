//! A sequence's block table. Invariants (with `len = tokens.len()`): `table.len() ==
//! ceil((len + reserved) / B)`; `hashes.len() == len / B` and `hashes[i]` is the chain hash of
//! full block `i`, which `table[i]` holds sealed under that hash; every table entry counts one
//! reference on its block. With public prefixes, `hashes[..n_public]` chain from the common
//! root and the rest from the namespace's private fork (see [`crate::hash`]).

use std::sync::Arc;

use crate::hash::BlockHash;
use crate::ids::{BlockId, NamespaceId};
use crate::public::PublicChain;

#[derive(Debug, Clone)]
pub(crate) struct Sequence {
    pub ns: NamespaceId,
    /// Namespace slot of `ns` in the pool.
    pub ns_slot: usize,
    /// The chain's root `h_{-1}`.
    pub root: BlockHash,
    /// Tokens whose K/V are present, positions `0..len`.
    pub tokens: Vec<u32>,
    /// Positions `len..len + reserved` have blocks but no committed tokens yet.
    pub reserved: usize,
    /// Block table: block `i` holds positions `i*B .. (i+1)*B`.
    pub table: Vec<BlockId>,
    /// Chain hashes of the full blocks.
    pub hashes: Vec<BlockHash>,
    /// The namespace's public prefixes, when it declared some.
    pub public: Option<Arc<PublicChain>>,
    /// Leading blocks of `hashes` that are public (`<= hashes.len()`).
    pub n_public: usize,
}

impl Sequence {
    pub fn new(
        ns: NamespaceId,
        ns_slot: usize,
        root: BlockHash,
        public: Option<Arc<PublicChain>>,
    ) -> Self {
        Self {
            ns,
            ns_slot,
            root,
            tokens: Vec::new(),
            reserved: 0,
            table: Vec::new(),
            hashes: Vec::new(),
            public,
            n_public: 0,
        }
    }

    /// Hash that private block `i` (or the partial tail at `i`) chains from: the root, the
    /// private fork right after the public run, else the previous block.
    pub fn parent_hash(&self, i: usize) -> BlockHash {
        if i == 0 {
            self.root
        } else if i == self.n_public {
            BlockHash::private_fork(&self.root, &self.hashes[i - 1])
        } else {
            self.hashes[i - 1]
        }
    }

    /// The chain hash of full block `i` holding `chunk` (blocks `..i` hashed already), and
    /// whether it is public: it continues the public run and is a declared public block.
    pub fn block_hash(&self, i: usize, chunk: &[u32]) -> (BlockHash, bool) {
        let prev = i.checked_sub(1).map(|j| self.hashes[j]);
        self.chain_hash(i, prev, self.n_public, chunk)
    }

    /// [`Sequence::block_hash`] for a block past the recorded ones: `prev` is block `i - 1`'s
    /// hash (`None` for block 0) and `n_public` how many of blocks `..i` are public.
    pub fn chain_hash(
        &self,
        i: usize,
        prev: Option<BlockHash>,
        n_public: usize,
        chunk: &[u32],
    ) -> (BlockHash, bool) {
        crate::public::chain_step(&self.root, self.public.as_deref(), i, prev, n_public, chunk)
    }

    /// Appends block `hashes.len()`'s hash, as [`Sequence::block_hash`] classified it.
    pub fn push_hash(&mut self, hash: BlockHash, public: bool) {
        if public {
            debug_assert_eq!(self.n_public, self.hashes.len());
            self.n_public += 1;
        }
        self.hashes.push(hash);
    }

    /// Keeps the first `n` block hashes.
    pub fn truncate_hashes(&mut self, n: usize) {
        self.hashes.truncate(n);
        self.n_public = self.n_public.min(n);
    }
}
