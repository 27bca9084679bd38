//! A sequence's block table. Invariants (with `len = tokens.len()`): `table.len() ==
//! ceil((len + reserved) / B)`; `hashes.len() == len / B` and `hashes[i]` is the chain hash of
//! full block `i`, which `table[i]` holds sealed under that hash; every table entry counts one
//! reference on its block.

use crate::hash::BlockHash;
use crate::ids::{BlockId, NamespaceId};

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
}

impl Sequence {
    pub fn new(ns: NamespaceId, ns_slot: usize, root: BlockHash) -> Self {
        Self {
            ns,
            ns_slot,
            root,
            tokens: Vec::new(),
            reserved: 0,
            table: Vec::new(),
            hashes: Vec::new(),
        }
    }

    /// Hash that block `i` chains from.
    pub fn parent_hash(&self, i: usize) -> BlockHash {
        if i == 0 {
            self.root
        } else {
            self.hashes[i - 1]
        }
    }
}
