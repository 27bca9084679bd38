//! The engine's session commands: append tokens, start a generation, a prefill or a warm-up,
//! fork, truncate and close a session, and the sweep that closes idle ones.

use std::time::Instant;

use memoria_kv::{NamespaceId, SeqId};
use memoria_model::tokenizer::Utf8Buf;

use super::{Engine, GenerateParams, HandedChain, PromptChain, Reply, WarmMode};
use crate::EngineError;
use crate::sampling::Sampler;
use crate::session::{Event, Generation, Job, Session, SessionId, StopReason, Usage, Warm};
use crate::stop::{StopMatcher, TEXT_ROOM};

impl Engine {
    pub(super) fn context_len(&self, s: &Session) -> Result<usize, EngineError> {
        Ok(self.pool.seq_len(s.seq)? + s.pending.len())
    }

    pub(super) fn append(
        &mut self,
        ns: NamespaceId,
        id: SessionId,
        tokens: Vec<u32>,
    ) -> Result<usize, EngineError> {
        let n_vocab = self.model.hparams().n_vocab;
        if let Some(&bad) = tokens.iter().find(|&&t| t as usize >= n_vocab) {
            return Err(EngineError::InvalidArgument(format!(
                "token {bad} ≥ vocabulary size {n_vocab}"
            )));
        }
        let max = self.cfg.max_context;
        let s = self.idle_session(ns, id)?;
        let len = self.context_len(s)?;
        if len.saturating_add(tokens.len()) > max {
            return Err(EngineError::ContextOverflow {
                have: len,
                adding: tokens.len(),
                max,
            });
        }
        let added = tokens.len();
        let s = self.session(ns, id)?;
        s.pending.extend(tokens);
        s.last_used = Instant::now();
        Ok(len.saturating_add(added))
    }

    /// Gives fresh session `id` the chain a caller hashed for its pending tokens (`tokens`:
    /// what it hashed, when the session may have changed since), unless it no longer fits.
    pub(super) fn adopt_chain(
        &mut self,
        ns: NamespaceId,
        id: SessionId,
        tokens: Option<&[u32]>,
        chain: HandedChain,
    ) {
        let b = self.pool.layout().block_tokens;
        let public = self.pool.public_chain(ns).cloned();
        let Ok(s) = self.session(ns, id) else { return };
        if !s.fresh
            || s.job.is_some()
            || s.chain.is_some()
            || tokens.is_some_and(|t| t != s.pending)
        {
            return;
        }
        s.chain = PromptChain::adopt(chain, s.root, public.as_ref(), &s.pending, b).map(Box::new);
    }

    pub(super) fn start_generation(
        &mut self,
        ns: NamespaceId,
        id: SessionId,
        params: GenerateParams,
        events: tokio::sync::mpsc::UnboundedSender<Event>,
    ) -> Result<(), EngineError> {
        params
            .sampling
            .validate()
            .map_err(|e| EngineError::InvalidArgument(e.to_string()))?;
        let n_vocab = self.model.hparams().n_vocab;
        let s = self.idle_session(ns, id)?;
        let seq = s.seq;
        let mut context = self.pool.seq_tokens(seq)?.to_vec();
        context.extend_from_slice(&s.pending);
        if context.is_empty() {
            return Err(EngineError::InvalidArgument(
                "the session's context is empty".into(),
            ));
        }
        let mut sampler = Sampler::new(params.sampling.clone(), n_vocab);
        let longest_stop = params.stop.iter().map(String::len).max().unwrap_or(0);
        for &t in &context {
            sampler.accept(t);
        }
        // Room for the whole generation, so its decode steps never grow the pool's vectors.
        let reach = context
            .len()
            .saturating_add(params.max_tokens)
            .min(self.cfg.max_context);
        let spec = self.speculation(ns, id, &context, reach, params.speculation)?;
        let s = self.session(ns, id)?;
        let usage = Usage {
            prompt_tokens: s.pending.len(),
            ..Usage::default()
        };
        let now = Instant::now();
        s.job = Some(Job::Generate(Box::new(Generation {
            sampler,
            utf8: Utf8Buf::with_capacity(TEXT_ROOM),
            text: String::with_capacity(TEXT_ROOM),
            emit: String::with_capacity(longest_stop + TEXT_ROOM),
            stops: StopMatcher::new(params.stop),
            events,
            max_tokens: params.max_tokens,
            produced: 0,
            started: now,
            first_token: None,
            usage,
            ephemeral: params.close_when_done,
            ignore_eos: params.ignore_eos,
            matcher: params.constraint.map(memoria_constrain::Matcher::new),
            spec,
        })));
        s.queued_at = now;
        s.last_used = now;
        self.pool.reserve_capacity(seq, reach)?;
        if params.max_tokens == 0 {
            self.finish_generation(id, StopReason::Length);
            return Ok(());
        }
        let s = self.session(ns, id)?;
        if s.pending.is_empty() {
            if let Some(logits) = s.last_logits.take() {
                // The last token's logits are at hand: sample without a forward pass.
                self.on_logits(id, &logits);
                if let Some(s) = self.sessions.get_mut(&id) {
                    s.last_logits = Some(logits);
                }
            } else {
                self.requeue_last_token(id, seq)?;
            }
        }
        Ok(())
    }

    /// Moves the last computed token back to pending so the next step recomputes it and yields
    /// its logits (they are not kept after a truncate or a prefix hit).
    pub(super) fn requeue_last_token(
        &mut self,
        id: SessionId,
        seq: SeqId,
    ) -> Result<(), EngineError> {
        let len = self.pool.seq_len(seq)?;
        let Some(&last) = self.pool.seq_tokens(seq)?.last() else {
            return Err(EngineError::InvalidArgument(
                "the session's context is empty".into(),
            ));
        };
        self.pool.truncate(seq, len - 1)?;
        self.sessions
            .get_mut(&id)
            .ok_or(EngineError::NotFound(id))?
            .pending
            .push(last);
        Ok(())
    }

    /// Computes a session's pending tokens and replies with the last token's logits.
    pub(super) fn start_prefill(&mut self, ns: NamespaceId, id: SessionId, reply: Reply<Vec<f32>>) {
        let seq = match self.session(ns, id) {
            Ok(s) if s.job.is_some() => {
                let _ = reply.send(Err(EngineError::Busy(id)));
                return;
            }
            Ok(s) => s.seq,
            Err(e) => {
                let _ = reply.send(Err(e));
                return;
            }
        };
        let s = &self.sessions[&id];
        if s.pending.is_empty() {
            if let Some(l) = &s.last_logits {
                let _ = reply.send(Ok(l.clone()));
                return;
            }
            if let Err(e) = self.requeue_last_token(id, seq) {
                let _ = reply.send(Err(e));
                return;
            }
        }
        if let Some(s) = self.sessions.get_mut(&id) {
            s.job = Some(Job::Prefill(reply));
            s.queued_at = Instant::now();
        }
    }

    pub(super) fn fork(
        &mut self,
        ns: NamespaceId,
        id: SessionId,
    ) -> Result<SessionId, EngineError> {
        if self.sessions.len() >= self.cfg.max_sessions {
            return Err(EngineError::TooManySessions(self.cfg.max_sessions));
        }
        let src = self.idle_session(ns, id)?;
        let (src_seq, root) = (src.seq, src.root);
        let seq: SeqId = self.pool.fork(src_seq)?;
        let src = &self.sessions[&id];
        let now = Instant::now();
        let mut copy = Session::new(ns, root, seq, now);
        copy.pending = src.pending.clone();
        copy.fresh = src.fresh;
        copy.last_logits = src.last_logits.clone();
        copy.cached_tokens = src.cached_tokens;
        copy.stored_blocks = src.stored_blocks;
        let new_id = self.new_session_id();
        self.sessions.insert(new_id, copy);
        self.stats
            .forks
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(new_id)
    }

    pub(super) fn truncate(
        &mut self,
        ns: NamespaceId,
        id: SessionId,
        len: usize,
    ) -> Result<(), EngineError> {
        let s = self.idle_session(ns, id)?;
        let seq = s.seq;
        let computed = self.pool.seq_len(seq)?;
        let total = computed + s.pending.len();
        if len > total {
            return Err(EngineError::InvalidArgument(format!(
                "truncate to {len} past the end ({total})"
            )));
        }
        if len == total {
            return Ok(());
        }
        if len >= computed {
            let s = self.session(ns, id)?;
            s.pending.truncate(len - computed);
        } else {
            self.pool.truncate(seq, len)?;
            let s = self.session(ns, id)?;
            s.pending.clear();
            s.last_logits = None;
        }
        Ok(())
    }

    pub(super) fn start_warm(
        &mut self,
        ns: NamespaceId,
        tokens: Vec<u32>,
        chain: Option<HandedChain>,
        (pin, ttl, hot): WarmMode,
        reply: Reply<crate::session::WarmInfo>,
    ) {
        if tokens.is_empty() || tokens.len() > self.cfg.max_context {
            let _ = reply.send(Err(EngineError::InvalidArgument(format!(
                "a warm prefix needs 1..={} tokens, got {}",
                self.cfg.max_context,
                tokens.len()
            ))));
            return;
        }
        let root = match self.root(ns) {
            Ok(root) => root,
            Err(e) => {
                let _ = reply.send(Err(e));
                return;
            }
        };
        let seq = self.pool.create_seq(ns, root);
        let now = Instant::now();
        let mut s = Session::new(ns, root, seq, now);
        s.pending = tokens;
        let id = self.new_session_id();
        self.sessions.insert(id, s);
        // The chain is taken before the job starts (a running session's is never replaced).
        if let Some(chain) = chain {
            self.adopt_chain(ns, id, None, chain);
        }
        if let Some(s) = self.sessions.get_mut(&id) {
            s.job = Some(Job::Warm(Warm {
                pin,
                hot,
                ttl,
                reply,
                cached_tokens: 0,
            }));
        }
    }

    /// Warms a saved hot prefix (refused when a token is outside the vocabulary: the record
    /// may come from another model's tokenizer).
    pub(super) fn start_rewarm(
        &mut self,
        ns: NamespaceId,
        tokens: Vec<u32>,
        chain: Option<HandedChain>,
        count: f64,
        reply: Reply<crate::session::WarmInfo>,
    ) {
        let n_vocab = self.model.hparams().n_vocab;
        if let Some(&bad) = tokens.iter().find(|&&t| t as usize >= n_vocab) {
            let _ = reply.send(Err(EngineError::InvalidArgument(format!(
                "token {bad} ≥ vocabulary size {n_vocab}"
            ))));
            return;
        }
        self.start_warm(ns, tokens, chain, (None, None, Some(count)), reply);
    }

    /// Releases a session's blocks (full blocks, and a partial last block as a retained tail,
    /// stay cached for others) and ends its job.
    pub fn close_session(&mut self, id: SessionId) {
        if let Some(s) = self.sessions.remove(&id) {
            match s.job {
                Some(Job::Generate(g)) => {
                    let _ = g.events.send(Event::Error("session closed".into()));
                }
                Some(Job::Warm(w)) => {
                    let _ = w.reply.send(Err(EngineError::Cancelled));
                }
                Some(Job::Prefill(reply)) => {
                    let _ = reply.send(Err(EngineError::Cancelled));
                }
                Some(Job::Embed(e)) => {
                    let _ = e.reply.send(Err(EngineError::Cancelled));
                }
                Some(Job::Score(sc)) => sc.fail(EngineError::Cancelled),
                None => {}
            }
            // Its partial last block, kept as a retained tail, is kept on disk too.
            if let Ok(Some(tail)) = self.pool.end_seq(s.seq) {
                self.persist.write_tail(&self.pool, s.ns, tail);
            }
        }
        self.stats.set_sessions(self.sessions.len());
    }

    /// Closes sessions idle longer than the configured TTL.
    pub(super) fn sweep_idle(&mut self) {
        let Some(ttl) = self.cfg.idle_ttl else { return };
        let now = Instant::now();
        self.pool.set_now(now);
        let idle: Vec<SessionId> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.job.is_none() && now.duration_since(s.last_used) > ttl)
            .map(|(id, _)| *id)
            .collect();
        for id in idle {
            self.close_session(id);
            self.stats
                .ttl_closed
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
}
