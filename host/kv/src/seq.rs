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
    /// The chain hashes of the context's whole blocks as its prompt was matched (hashed once
    /// there): a block sealed later at one of these indices takes its hash from here instead
    /// of hashing its tokens again. Cleared whenever tokens are cut (the prompt no longer
    /// holds) and never copied to a fork.
    pub planned: Vec<BlockHash>,
    /// Leading blocks of `planned` that are public.
    pub planned_public: usize,
    /// The tokens `planned` was hashed from: a plan is used for a block only when the block
    /// holds these tokens and continues the planned chain.
    pub planned_tokens: Vec<u32>,
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
            planned: Vec::new(),
            planned_public: 0,
            planned_tokens: Vec::new(),
        }
    }

    /// Hash that private block `i` (or the partial tail at `i`) chains from: the root, the
    /// private fork right after the public run, else the previous block.
    pub fn parent_hash(&self, i: usize) -> BlockHash {
        BlockHash::parent_at(&self.root, &self.hashes, self.n_public, i)
    }

    /// The chain hash of full block `i` holding `chunk` (blocks `..i` hashed already), and
    /// whether it is public: it continues the public run and is a declared public block.
    pub fn block_hash(&self, i: usize, chunk: &[u32]) -> (BlockHash, bool) {
        let prev = i.checked_sub(1).map(|j| self.hashes[j]);
        if let Some(h) = self.planned_hash(i, prev, chunk) {
            return (h, i < self.planned_public);
        }
        self.chain_hash(i, prev, self.n_public, chunk)
    }

    /// Block `i`'s planned hash, when the block holds the planned tokens and its parent `prev`
    /// is the planned one (so the plan is exactly what hashing would give).
    fn planned_hash(&self, i: usize, prev: Option<BlockHash>, chunk: &[u32]) -> Option<BlockHash> {
        let &h = self.planned.get(i)?;
        let b = chunk.len();
        let same_tokens = self.planned_tokens.get(i * b..(i + 1) * b) == Some(chunk);
        let same_parent = prev == i.checked_sub(1).map(|j| self.planned[j]);
        (same_tokens && same_parent).then_some(h)
    }

    /// Plans the context's chain: `hashes` (the first `n_public` public) of the whole blocks of
    /// `tokens`.
    pub fn plan(&mut self, hashes: &[BlockHash], n_public: usize, tokens: &[u32], b: usize) {
        let n = hashes.len().min(tokens.len() / b.max(1));
        self.planned.clear();
        self.planned.extend_from_slice(&hashes[..n]);
        self.planned_public = n_public.min(n);
        self.planned_tokens.clear();
        self.planned_tokens.extend_from_slice(&tokens[..n * b]);
    }

    /// Forgets the planned chain (the context's tokens changed).
    pub fn clear_planned(&mut self) {
        self.planned.clear();
        self.planned_public = 0;
        self.planned_tokens.clear();
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
        self.clear_planned();
    }
}
