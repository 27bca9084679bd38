//! The engine's side of the persistent store: prefix matches that promote blocks from the
//! tiers (and write matched blocks the remote server lost back to it), write-through of freshly sealed blocks (behind the engine thread), retained partial tails kept on disk (`tails`), and durable session
//! save/restore. Invariants: with no store configured every path here is a plain pool call; a
//! block is persisted with the salt of the session that sealed it, looked up by namespace id in
//! the registry (never kept here); a restored session holds
//! exactly the saved tokens, as pending, so its first compute matches them against the hot
//! pool and the tiers and recomputes the rest.

use std::sync::Arc;
use std::time::Instant;

use memoria_kv::backing::{Backing, BackingError, BlockBytes, HandOff, SavedSession};
use memoria_kv::staging::{StageRequest, Staged, Stager, WantedBlock};
use memoria_kv::{
    BlockHash, BlockPool, KvLayout, ModelFingerprint, NamespaceId, Namespaces, PoolError,
    PublicChain, RootShape, SeqId,
};

use super::staging::StageThread;
use super::{Engine, Reply};
use crate::EngineError;
use crate::session::{Session, SessionId};

/// A fresh context's chain, hashed once: its whole blocks' hashes (the leading `n_public`
/// public) and the tokens they were hashed from.
#[derive(Debug)]
pub(crate) struct PromptChain {
    tokens: Vec<u32>,
    hashes: Vec<BlockHash>,
    n_public: usize,
}

impl PromptChain {
    /// Whether this is the chain of a fresh context holding `tokens`: all of its whole blocks
    /// but the last token's, as hashed.
    pub fn fits(&self, tokens: &[u32], block_tokens: usize) -> bool {
        self.tokens.len() == whole(tokens.len(), block_tokens) && tokens.starts_with(&self.tokens)
    }

    /// The chain of a fresh context of `tokens` under `root` taken from `handed`, which a
    /// caller hashed from the same tokens, root and public prefixes (`public`: the pool's now);
    /// `None` when it was hashed under another root or other prefixes or covers too little.
    pub fn adopt(
        handed: HandedChain,
        root: BlockHash,
        public: Option<&Arc<PublicChain>>,
        tokens: &[u32],
        block_tokens: usize,
    ) -> Option<PromptChain> {
        let same_public = match (&handed.public, public) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        };
        let n = whole(tokens.len(), block_tokens);
        let blocks = n / block_tokens.max(1);
        if handed.root != root || !same_public || handed.hashes.len() < blocks {
            return None;
        }
        let mut hashes = handed.hashes;
        hashes.truncate(blocks);
        Some(PromptChain {
            tokens: tokens[..n].to_vec(),
            hashes,
            n_public: handed.n_public.min(blocks),
        })
    }

    /// The first whole block's hash, if the chain has one.
    pub fn first(&self) -> Option<BlockHash> {
        self.hashes.first().copied()
    }
}

/// A context's chain hashed by a caller (for a remote prefetch) from the registry's root and
/// the public prefixes it saw: the whole blocks of the tokens it was given.
#[derive(Debug)]
pub(crate) struct HandedChain {
    pub root: BlockHash,
    pub hashes: Vec<BlockHash>,
    pub n_public: usize,
    pub public: Option<Arc<PublicChain>>,
}

/// Tokens in the whole blocks of a fresh context of `len` tokens but the last token's.
fn whole(len: usize, block_tokens: usize) -> usize {
    let b = block_tokens.max(1);
    len.saturating_sub(1) / b * b
}

/// Longest name a saved session may have, in bytes.
pub const MAX_SAVE_NAME: usize = 256;

/// Store state held by the engine thread.
pub(crate) struct Persist {
    stack: Option<Arc<dyn Backing>>,
    model: ModelFingerprint,
    layout: KvLayout,
    /// The namespace registry: session blocks are stored under their namespace's salt, public
    /// blocks under its common salt (the shared namespaces' blocks).
    namespaces: Arc<Namespaces>,
    /// Reads the tiers for fresh sessions, off the engine thread.
    stage: Option<StageThread>,
    /// Takes sealed and evicted blocks and saves to the store, off the engine thread.
    intake: Option<Arc<dyn HandOff>>,
}

impl Persist {
    pub fn new(
        stack: Option<Arc<dyn Backing>>,
        model: ModelFingerprint,
        layout: KvLayout,
        namespaces: Arc<Namespaces>,
    ) -> Self {
        let intake = stack.as_ref().map(|s| s.clone().hand_off(model, layout));
        let stage = stack
            .as_ref()
            .and_then(|s| StageThread::start(s.clone() as Arc<dyn Stager>, intake.clone()));
        Persist {
            stack,
            model,
            layout,
            namespaces,
            stage,
            intake,
        }
    }

    /// The chain of a fresh context of `tokens` under `root`, hashed here once for the
    /// shared-prefix wait, staging, the prefix match and the blocks' sealing: its whole blocks
    /// but the last token's.
    pub fn prompt_chain(
        &self,
        pool: &BlockPool,
        ns: NamespaceId,
        root: BlockHash,
        tokens: &[u32],
    ) -> PromptChain {
        let tokens = &tokens[..whole(tokens.len(), self.layout.block_tokens)];
        let (hashes, n_public) = pool.chain_hashes(ns, root, tokens);
        PromptChain {
            tokens: tokens.to_vec(),
            hashes,
            n_public,
        }
    }

    /// The staging request for a fresh context of `tokens` hashed as `chain` under `root`:
    /// every block the prefix match could take that the hot pool lacks now, and the partial
    /// tail after them that the disk may keep. `None` without a store's staging thread or
    /// when the pool holds every block.
    pub fn stage_request(
        &self,
        pool: &BlockPool,
        root: BlockHash,
        chain: &PromptChain,
        tokens: &[u32],
    ) -> Option<StageRequest> {
        self.stage.as_ref()?;
        let first = chain.hashes.iter().position(|h| !pool.holds(h))?;
        let wanted = chain
            .hashes
            .iter()
            .enumerate()
            .skip(first)
            .filter(|(_, h)| !pool.holds(h))
            .map(|(index, &hash)| WantedBlock { index, hash })
            .collect();
        let shape = RootShape::new(self.model, &self.layout);
        let public = match self.namespaces.common_root(&shape) {
            Some(public_root) if chain.n_public > 0 => (chain.n_public, public_root),
            _ => (0, root),
        };
        Some(StageRequest {
            model: self.model,
            layout: self.layout,
            root,
            public,
            tokens: chain.tokens.clone(),
            wanted,
            tail: self.wanted_tail(pool, root, chain, tokens),
            loan: None,
        })
    }

    /// Hands `req` to the staging thread for session `id`; false when it is gone.
    pub fn send_stage(&mut self, id: SessionId, req: StageRequest) -> bool {
        // The staging read waits for every block handed over before now (an eviction this
        // step made is found in the tiers, not missed).
        let point = self.intake.as_ref().map_or(0, |i| i.sent());
        self.stage.as_mut().is_some_and(|t| t.send(id, req, point))
    }

    /// Staging requests not answered yet.
    pub fn staging(&self) -> usize {
        self.stage.as_ref().map_or(0, StageThread::outstanding)
    }

    /// An answer of the staging thread, waiting up to `limit` for one (zero: if one is in).
    pub fn staged(&mut self, limit: std::time::Duration) -> Option<(SessionId, Staged)> {
        let t = self.stage.as_mut()?;
        if limit.is_zero() {
            t.try_recv()
        } else {
            t.recv_timeout(limit)
        }
    }

    /// Installs the hand-off as the pool's eviction sink.
    pub fn install(&self, pool: &mut BlockPool) {
        if let Some(i) = &self.intake {
            pool.set_sink(i.clone().sink());
        }
    }

    /// Attaches the longest cached prefix of `tokens` to `seq`, taking the blocks the hot pool
    /// lacks from `staged` (read off the engine thread), and counts the matched whole blocks as
    /// stored (`stored`: the session's count of leading blocks known to be in the store).
    /// Without a staged set only hot blocks are matched: the engine thread never reads a tier.
    pub fn match_prefix(
        &mut self,
        pool: &mut BlockPool,
        stored: &mut usize,
        seq: SeqId,
        tokens: &[u32],
        staged: Option<Box<Staged>>,
        chain: Option<Box<PromptChain>>,
    ) -> Result<usize, PoolError> {
        // The chain hashed for staging, while the context still starts with what it hashed.
        let chain = chain.filter(|c| c.fits(tokens, self.layout.block_tokens));
        let planned = chain.as_ref().map(|c| (&c.hashes[..], c.n_public));
        if self.stack.is_none() {
            return match planned {
                Some(p) => pool.match_prefix_chained(seq, tokens, p, None),
                None => pool.match_prefix(seq, tokens),
            };
        }
        let (hit, lost) = match (staged, planned) {
            (Some(mut st), Some(p)) => (
                pool.match_prefix_chained(seq, tokens, p, Some(&mut *st))?,
                st.remote_lost,
            ),
            (Some(mut st), None) => (
                pool.match_prefix_from(seq, tokens, &mut *st)?,
                st.remote_lost,
            ),
            // Every block hot, or no staging thread: nothing is read here.
            (None, Some(p)) => (pool.match_prefix_chained(seq, tokens, p, None)?, false),
            (None, None) => (pool.match_prefix(seq, tokens)?, false),
        };
        *stored = hit / self.layout.block_tokens;
        if lost {
            self.rewrite_lost(pool, seq, hit / self.layout.block_tokens);
        }
        Ok(hit)
    }

    /// Writes again the matched blocks (the leading `n`) that a prefetch found missing on the
    /// remote server: this host holds them, so the server gets them back (after a restart or a
    /// flush no host would otherwise write a block every host already holds).
    fn rewrite_lost(&self, pool: &BlockPool, seq: SeqId, n: usize) {
        let Some(intake) = &self.intake else { return };
        let (Ok(ns), Ok(table), Ok(tokens)) = (
            pool.seq_namespace(seq),
            pool.block_table(seq),
            pool.seq_tokens(seq),
        ) else {
            return;
        };
        let n_public = pool.seq_public_blocks(seq).unwrap_or(0);
        let b = self.layout.block_tokens;
        for (i, block) in table.iter().enumerate().take(n.min(tokens.len() / b)) {
            let Some(hash) = pool.block_info(*block).and_then(|info| info.hash) else {
                continue;
            };
            let bytes = BlockBytes {
                hash,
                tokens: tokens[i * b..(i + 1) * b].to_vec(),
                data: pool.block_data(*block).to_vec(),
            };
            intake.rewrite(ns, i < n_public, bytes);
        }
    }

    /// Queues the newly sealed blocks of `seq` (a session of `ns` whose leading `stored` blocks
    /// are already handed over) for disk and the remote tier (never blocks; `force` hands over
    /// every block, past the disk queue's bound).
    pub fn write_through(
        &self,
        pool: &BlockPool,
        ns: NamespaceId,
        seq: SeqId,
        stored: &mut usize,
        force: bool,
    ) {
        let (Some(stack), Some(intake)) = (&self.stack, &self.intake) else {
            return;
        };
        if !stack.durable() {
            return;
        }
        let (Ok(table), Ok(tokens)) = (pool.block_table(seq), pool.seq_tokens(seq)) else {
            return;
        };
        let n_public = pool.seq_public_blocks(seq).unwrap_or(0);
        let b = self.layout.block_tokens;
        let full = tokens.len() / b;
        let from = if force { 0 } else { (*stored).min(full) };
        for (i, block) in table.iter().enumerate().take(full).skip(from) {
            let Some(hash) = pool.block_info(*block).and_then(|info| info.hash) else {
                continue;
            };
            let bytes = BlockBytes {
                hash,
                tokens: tokens[i * b..(i + 1) * b].to_vec(),
                data: pool.block_data(*block).to_vec(),
            };
            intake.sealed(ns, i < n_public, force, bytes);
        }
        *stored = full;
    }
}

#[path = "persist_tails.rs"]
mod tails;

impl Drop for Persist {
    fn drop(&mut self) {
        if let Some(s) = &self.stack {
            let _ = s.flush();
        }
    }
}

impl Engine {
    /// The store that keeps named saves: one with a disk or a remote tier.
    fn store_for_saves(&self) -> Result<Arc<dyn Backing>, EngineError> {
        match &self.persist.stack {
            Some(s) if s.durable() => Ok(s.clone()),
            _ => Err(EngineError::InvalidArgument(
                "the engine has no persistent store (start it with --store DIR or --remote URL)"
                    .into(),
            )),
        }
    }

    /// Saves a session under `name` in its namespace; replies after the record is durable.
    pub(crate) fn save_session(
        &mut self,
        ns: NamespaceId,
        id: SessionId,
        name: String,
        reply: Reply<()>,
    ) {
        let r = (|| {
            check_name(&name)?;
            self.store_for_saves()?;
            let s = self
                .sessions
                .get_mut(&id)
                .filter(|s| s.ns == ns)
                .ok_or(EngineError::NotFound(id))?;
            if s.job.is_some() {
                return Err(EngineError::Busy(id));
            }
            let (seq, root) = (s.seq, s.root);
            let mut tokens = self.pool.seq_tokens(seq)?.to_vec();
            tokens.extend_from_slice(&s.pending);
            if tokens.is_empty() {
                return Err(EngineError::InvalidArgument(
                    "the session's context is empty".into(),
                ));
            }
            self.persist
                .write_through(&self.pool, ns, seq, &mut s.stored_blocks, true);
            let (hashes, n_public) = self.pool.chain_hashes(ns, root, &tokens);
            // Handed over before the record, so the record's commit covers it (unless the
            // write queue declined it: the tokens are then recomputed on restore).
            self.persist
                .write_partial(&self.pool, ns, seq, root, &hashes, n_public);
            Ok((hashes, tokens))
        })();
        match (r, &self.persist.intake) {
            (Ok((hashes, tokens)), Some(intake)) => intake.save(
                ns,
                name,
                hashes,
                tokens,
                Box::new(move |r| {
                    let _ = reply.send(r.map_err(EngineError::Store));
                }),
            ),
            (Ok(_), None) => {
                let _ = reply.send(Err(EngineError::Internal("no store hand-off".into())));
            }
            (Err(e), _) => {
                let _ = reply.send(Err(e));
            }
        }
    }

    /// Opens a session holding a saved session's tokens (pending: the next compute reuses
    /// every block the tiers still hold and recomputes the rest). `fetched` is the save as the
    /// caller read it (from disk, or from the remote tier, verified for the namespace's salt);
    /// the engine thread never reads the store itself.
    pub(crate) fn restore_session(
        &mut self,
        ns: NamespaceId,
        name: &str,
        fetched: Result<Option<SavedSession>, BackingError>,
    ) -> Result<SessionId, EngineError> {
        check_name(name)?;
        self.root(ns)?;
        self.store_for_saves()?;
        let missing = || EngineError::NoSavedSession(name.to_string());
        let rec = fetched.map_err(EngineError::Store)?.ok_or_else(missing)?;
        let layout = *self.pool.layout();
        if rec.model != self.fingerprint
            || rec.elem != layout.elem
            || rec.block_tokens != layout.block_tokens
        {
            return Err(EngineError::InvalidArgument(format!(
                "saved session {name:?} was made with another model or K/V layout"
            )));
        }
        if self.sessions.len() >= self.cfg.max_sessions {
            return Err(EngineError::TooManySessions(self.cfg.max_sessions));
        }
        if rec.tokens.len() > self.cfg.max_context {
            return Err(EngineError::ContextOverflow {
                have: 0,
                adding: rec.tokens.len(),
                max: self.cfg.max_context,
            });
        }
        let n_vocab = self.model.hparams().n_vocab;
        if rec.tokens.iter().any(|&t| t as usize >= n_vocab) {
            return Err(EngineError::InvalidArgument(format!(
                "saved session {name:?} holds tokens outside this model's vocabulary"
            )));
        }
        let root = self.root(ns)?;
        let seq = self.pool.create_seq(ns, root);
        let mut s = Session::new(ns, root, seq, Instant::now());
        s.pending = rec.tokens;
        let id = self.new_session_id();
        self.sessions.insert(id, s);
        self.stats.set_sessions(self.sessions.len());
        Ok(id)
    }
}

fn check_name(name: &str) -> Result<(), EngineError> {
    if name.is_empty() || name.len() > MAX_SAVE_NAME {
        return Err(EngineError::InvalidArgument(format!(
            "a saved session name needs 1..={MAX_SAVE_NAME} bytes"
        )));
    }
    Ok(())
}
