//! Embeddings as engine jobs: each input becomes a session of its own whose tokens are planned
//! like any prefill (after the decoders, in arrival order, within the step's token budget), so
//! embeddings batch with every other session in one forward pass per step instead of competing
//! with the engine for the cores. Every token is computed (no cached prefix: each one's final
//! hidden state is pooled); the full blocks it seals are cached like any other, so a later
//! prompt with the same text reuses them. The vector is the model's [`MeanPool`], identical to
//! `Model::embed` with an f32 K/V cache (a row's result never depends on its batch).

use std::time::Instant;

use memoria_kv::NamespaceId;
use memoria_model::llama::{MeanPool, Scratch};

use super::{Engine, Reply};
use crate::EngineError;
use crate::session::{Embedding, Job, Session, SessionId};

impl Engine {
    /// Queues the embedding of `tokens` (checked against the vocabulary and the context limit).
    pub(super) fn start_embed(
        &mut self,
        ns: NamespaceId,
        tokens: Vec<u32>,
        reply: Reply<Vec<f32>>,
    ) {
        let root = match self.check_embed_input(&tokens).and_then(|()| self.root(ns)) {
            Ok(root) => root,
            Err(e) => {
                let _ = reply.send(Err(e));
                return;
            }
        };
        let seq = self.pool.create_seq(ns, root);
        let mut s = Session::new(ns, root, seq, Instant::now());
        // Not fresh: the first compute takes nothing from the cache.
        s.fresh = false;
        s.pending = tokens;
        s.job = Some(Job::Embed(Box::new(Embedding {
            pool: MeanPool::new(&self.model),
            reply,
        })));
        let id = self.new_session_id();
        self.sessions.insert(id, s);
    }

    fn check_embed_input(&self, tokens: &[u32]) -> Result<(), EngineError> {
        if self.sessions.len() >= self.cfg.max_sessions {
            return Err(EngineError::TooManySessions(self.cfg.max_sessions));
        }
        let max = self.cfg.max_context;
        if tokens.is_empty() {
            return Err(EngineError::InvalidArgument("nothing to embed".into()));
        }
        if tokens.len() > max {
            return Err(EngineError::ContextOverflow {
                have: 0,
                adding: tokens.len(),
                max,
            });
        }
        let n_vocab = self.model.hparams().n_vocab;
        match tokens.iter().find(|&&t| t as usize >= n_vocab) {
            Some(bad) => Err(EngineError::InvalidArgument(format!(
                "token {bad} ≥ vocabulary size {n_vocab}"
            ))),
            None => Ok(()),
        }
    }

    /// Pools the final hidden states of an embedding session's computed chunk (batch `rows` of
    /// the forward pass that ran with `scratch`); once
    /// nothing is pending, replies with the vector and closes the session (its full blocks
    /// stay cached). Other jobs are left alone.
    pub(super) fn absorb_hidden(
        &mut self,
        id: SessionId,
        scratch: &Scratch,
        rows: std::ops::Range<usize>,
    ) {
        let Some(s) = self.sessions.get_mut(&id) else {
            return;
        };
        let Some(Job::Embed(e)) = &mut s.job else {
            return;
        };
        e.pool
            .add(&self.model, self.model.hidden_states(scratch, rows));
        if !s.pending.is_empty() {
            return;
        }
        if let Some(Job::Embed(e)) = s.job.take() {
            self.stats
                .embeddings
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let _ = e.reply.send(Ok(e.pool.finish()));
        }
        self.close_session(id);
    }
}
