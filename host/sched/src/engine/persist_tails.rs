//! Retained partial tails on the disk tier, from the engine's side: a session that ends leaving
//! a retained tail hands it to the store (behind the engine thread, like a written-through
//! block), and a fresh context whose blocks are staged also asks for the tail kept after its
//! last whole block when the hot pool has none that covers the prompt. Tails are keyed under
//! the namespace's own chain (its salt, looked up by the store), never under a salt a request
//! names.

use memoria_kv::backing::PartialBlock;
use memoria_kv::staging::WantedTail;
use memoria_kv::{BlockHash, BlockId, BlockPool, NamespaceId};

use super::{Persist, PromptChain};

impl Persist {
    /// The tail a fresh context of `tokens`, hashed as `chain` under `root`, may take from
    /// disk: the one continuing its last whole block, for the tokens the tail match may reuse
    /// (all but the last). `None` without a disk tier, when no token is left for a tail, or
    /// when the hot pool holds a tail that covers them.
    pub(super) fn wanted_tail(
        &self,
        pool: &BlockPool,
        root: BlockHash,
        chain: &PromptChain,
        tokens: &[u32],
    ) -> Option<WantedTail> {
        if !self.stack.as_ref()?.has_disk() {
            return None;
        }
        let full = chain.tokens.len();
        let limit = tokens.len().saturating_sub(1).checked_sub(full)?;
        if limit == 0 || limit >= self.layout.block_tokens || !tokens.starts_with(&chain.tokens) {
            return None;
        }
        let rest = &tokens[full..full + limit];
        let n = chain.hashes.len();
        let parent = BlockHash::parent_at(&root, &chain.hashes, chain.n_public.min(n), n);
        if pool.holds_tail(&parent, rest) {
            return None;
        }
        Some(WantedTail {
            parent,
            tokens: rest.to_vec(),
        })
    }

    /// Hands the retained tail `id` a session of `ns` just left to the disk tier (a no-op
    /// without one).
    pub fn write_tail(&self, pool: &BlockPool, ns: NamespaceId, id: BlockId) {
        let (Some(stack), Some(intake)) = (&self.stack, &self.intake) else {
            return;
        };
        if !stack.has_disk() {
            return;
        }
        let Some((parent, tokens)) = pool.retained_tail(id) else {
            return;
        };
        intake.tail(
            ns,
            PartialBlock {
                parent,
                tokens: tokens.to_vec(),
                data: pool.block_data(id).to_vec(),
            },
        );
    }
}
