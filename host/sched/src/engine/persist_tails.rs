//! Retained partial tails on the disk tier, from the engine's side: a session that ends leaving
//! a retained tail hands it to the store (behind the engine thread, like a written-through
//! block), and a fresh context whose blocks are staged also asks for the tail kept after its
//! last whole block when the hot pool has none that covers the prompt. A named save hands its
//! session's partial last block over the same way, so a restore after a restart reuses it as
//! a fresh context would. Tails are keyed under
//! the namespace's own chain (its salt, looked up by the store), never under a salt a request
//! names.

use memoria_kv::backing::{HandOff, PartialBlock};
use memoria_kv::staging::WantedTail;
use memoria_kv::{BlockHash, BlockId, BlockPool, NamespaceId, SeqId};

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

    /// The hand-off to the store, when the store has a disk tier (tails are kept on disk only).
    fn disk_intake(&self) -> Option<&dyn HandOff> {
        let (stack, intake) = (self.stack.as_ref()?, self.intake.as_ref()?);
        stack.has_disk().then_some(&**intake)
    }

    /// Hands the retained tail `id` a session of `ns` just left to the disk tier (a no-op
    /// without one).
    pub fn write_tail(&self, pool: &BlockPool, ns: NamespaceId, id: BlockId) {
        let Some(intake) = self.disk_intake() else {
            return;
        };
        if let Some((parent, tokens)) = pool.retained_tail(id) {
            send_tail(intake, pool, ns, id, parent, tokens);
        }
    }

    /// Hands the partial last block of `seq` (the computed tokens after its last whole block,
    /// whose chain under `root` is `hashes`, the first `n_public` public) to the disk tier as
    /// the tail continuing that block, as [`Persist::write_tail`] does when a session ends: a
    /// named save's restore then finds it where a fresh context of the saved tokens looks.
    /// A no-op without a disk tier, when the sequence ends on a block boundary, or when
    /// `hashes` does not cover its whole blocks exactly (tokens still pending).
    pub fn write_partial(
        &self,
        pool: &BlockPool,
        ns: NamespaceId,
        seq: SeqId,
        root: BlockHash,
        hashes: &[BlockHash],
        n_public: usize,
    ) {
        let Some(intake) = self.disk_intake() else {
            return;
        };
        let (Ok(tokens), Ok(table)) = (pool.seq_tokens(seq), pool.block_table(seq)) else {
            return;
        };
        let b = self.layout.block_tokens;
        let full = tokens.len() / b;
        if tokens.len() % b == 0 || hashes.len() != full {
            return;
        }
        if let Some(&id) = table.get(full) {
            let parent = BlockHash::parent_at(&root, hashes, n_public.min(full), full);
            send_tail(intake, pool, ns, id, parent, &tokens[full * b..]);
        }
    }
}

/// Hands block `id`'s first `tokens.len()` slots, continuing `parent`, to the store as a tail
/// of `ns` (its slots past them are zeroed there).
fn send_tail(
    intake: &dyn HandOff,
    pool: &BlockPool,
    ns: NamespaceId,
    id: BlockId,
    parent: BlockHash,
    tokens: &[u32],
) {
    intake.tail(
        ns,
        PartialBlock {
            parent,
            tokens: tokens.to_vec(),
            data: pool.block_data(id).to_vec(),
        },
    );
}
