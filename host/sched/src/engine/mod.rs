//! The engine thread: owns the model, the block pool and every session; callers talk to it only
//! through [`Command`]s. Between steps it takes requests; each step batches every running
//! session's next token plus chunks of pending prefills into one forward pass (see `step`).
//! Nothing here locks: other threads read [`EngineStats`] and the pool's atomics.

mod buffers;
mod command;
mod embed;
mod fault;
mod guard;
mod persist;
mod public;
mod reply;
mod score;
mod sizing;
mod step;
pub(crate) mod supervisor;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

pub(crate) use command::{Command, Reply};
pub use command::{GenerateParams, SessionInfo};
pub(crate) use persist::Persist;

use memoria_kv::{
    BlockPool, ModelFingerprint, NamespaceId, NamespaceSalt, NamespaceTable, Namespaces, SeqId,
};
use memoria_model::llama::{Model, Scratch};
use memoria_model::tokenizer::Tokenizer;

use crate::EngineError;
use crate::config::EngineConfig;
use crate::sampling::Sampler;
use crate::session::{Event, Generation, Job, Session, SessionId, StopReason, Usage, Warm};
use crate::stats::EngineStats;
use crate::stop::{StopMatcher, TEXT_ROOM};
use memoria_model::tokenizer::Utf8Buf;

pub(crate) struct Engine {
    pub model: Arc<Model>,
    pub tok: Arc<Tokenizer>,
    pub pool: BlockPool,
    pub fingerprint: ModelFingerprint,
    pub cfg: EngineConfig,
    pub sessions: BTreeMap<SessionId, Session>,
    pub next_id: u64,
    pub scratch: Scratch,
    /// The step's own vectors, reused (see `buffers`).
    pub(crate) buffers: buffers::StepBuffers,
    pub stats: Arc<EngineStats>,
    /// Rotates which decoding session goes first when they exceed the step budget.
    pub round_robin: usize,
    /// The persistent store's state (a no-op without one).
    pub(crate) persist: persist::Persist,
    /// The namespace registry: each namespace's salt, priority and block cap, by id.
    pub namespaces: Arc<Namespaces>,
    /// The cache-sizing warning's window (see `sizing`).
    pub(crate) sizing: sizing::Sizing,
    /// Each namespace's public prefixes (the chain compiled under the registry's common salt),
    /// applied again to a rebuilt pool.
    pub publics: BTreeMap<NamespaceId, PublicSetting>,
}

/// How a warm ends: its explicit pin and the pin's lifetime, and a re-warmed hot prefix's
/// reuse count.
type WarmMode = (Option<memoria_kv::PinLevel>, Option<Duration>, Option<f64>);

/// A namespace's public prefixes as the engine keeps them.
pub(crate) type PublicSetting = Arc<memoria_kv::PublicChain>;

/// Applies every registered namespace's eviction priority and block cap to `pool`.
pub(crate) fn apply_policies(pool: &mut BlockPool, table: &NamespaceTable) {
    for e in table.iter() {
        pool.set_namespace_priority(e.id, e.priority);
        pool.set_namespace_cap(e.id, e.max_blocks);
    }
}

impl Engine {
    /// Runs until `Shutdown` or every sender is gone. A panic inside one command or one step is
    /// caught here (see `guard`); one that escapes ends this call and the supervisor restarts
    /// the engine.
    pub fn run(&mut self, rx: &Receiver<Command>) {
        loop {
            let busy = self.has_work();
            let first = if busy {
                rx.try_recv().ok()
            } else {
                match rx.recv_timeout(Duration::from_millis(200)) {
                    Ok(c) => Some(c),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => break,
                }
            };
            let mut shutdown = false;
            for cmd in first
                .into_iter()
                .chain(std::iter::from_fn(|| rx.try_recv().ok()))
            {
                if matches!(cmd, Command::Shutdown) {
                    shutdown = true;
                    break;
                }
                fault::die(cmd.name());
                self.handle_guarded(cmd);
            }
            self.sweep_idle();
            self.check_sizing();
            if self.has_work() {
                self.step_guarded();
            }
            if !self.has_work() {
                // Nothing waits: an idle engine reports an empty queue, not its last step's.
                self.stats
                    .queue_depth
                    .store(0, std::sync::atomic::Ordering::Relaxed);
            }
            if shutdown {
                self.drain_on_shutdown();
                break;
            }
        }
        let ids: Vec<SessionId> = self.sessions.keys().copied().collect();
        for id in ids {
            self.close_session(id);
        }
    }

    /// Finishes running generations before the thread exits (graceful drain).
    fn drain_on_shutdown(&mut self) {
        while self.has_work() {
            self.step_guarded();
        }
    }

    pub fn has_work(&self) -> bool {
        self.sessions.values().any(|s| s.job.is_some())
    }

    /// A session of `ns` with no job running.
    fn idle_session(&self, ns: NamespaceId, id: SessionId) -> Result<&Session, EngineError> {
        match self.sessions.get(&id) {
            Some(s) if s.ns == ns && s.job.is_some() => Err(EngineError::Busy(id)),
            Some(s) if s.ns == ns => Ok(s),
            _ => Err(EngineError::NotFound(id)),
        }
    }

    fn session(&mut self, ns: NamespaceId, id: SessionId) -> Result<&mut Session, EngineError> {
        match self.sessions.get_mut(&id) {
            Some(s) if s.ns == ns => Ok(s),
            _ => Err(EngineError::NotFound(id)),
        }
    }

    fn handle(&mut self, cmd: Command) {
        fault::command(cmd.name());
        let now = Instant::now();
        match cmd {
            Command::Open { ns, reply } => {
                let r = if self.sessions.len() >= self.cfg.max_sessions {
                    Err(EngineError::TooManySessions(self.cfg.max_sessions))
                } else {
                    self.salt(ns).map(|salt| {
                        let root = self.pool.root_hash(&self.fingerprint, &salt);
                        let seq = self.pool.create_seq(ns, root);
                        let id = self.new_session_id();
                        self.sessions.insert(id, Session::new(ns, root, seq, now));
                        self.persist.on_open(id, ns);
                        id
                    })
                };
                let _ = reply.send(r);
            }
            Command::Append {
                ns,
                session,
                tokens,
                reply,
            } => {
                let _ = reply.send(self.append(ns, session, tokens));
            }
            Command::Generate {
                ns,
                session,
                params,
                events,
            } => {
                if let Err(e) = self.start_generation(ns, session, params, events.clone()) {
                    let _ = events.send(Event::Error(e.to_string()));
                }
            }
            Command::Prefill { ns, session, reply } => self.start_prefill(ns, session, reply),
            Command::Score {
                ns,
                session,
                top,
                reply,
            } => self.start_score(ns, session, top, reply),
            Command::Fork { ns, session, reply } => {
                let _ = reply.send(self.fork(ns, session));
            }
            Command::Truncate {
                ns,
                session,
                len,
                reply,
            } => {
                let _ = reply.send(self.truncate(ns, session, len));
            }
            Command::Close { ns, session, reply } => {
                let r = self.session(ns, session).map(|_| ());
                if r.is_ok() {
                    self.close_session(session);
                }
                let _ = reply.send(r);
            }
            Command::Info { ns, session, reply } => {
                let r = self
                    .session(ns, session)
                    .map(|s| (s.seq, s.pending.len(), s.job.is_some(), s.cached_tokens));
                let r = r.and_then(|(seq, pending, busy, cached_tokens)| {
                    let len = self.pool.seq_len(seq)? + pending;
                    Ok(SessionInfo {
                        len,
                        pending,
                        busy,
                        cached_tokens,
                    })
                });
                let _ = reply.send(r);
            }
            Command::Logits { ns, session, reply } => {
                let _ = reply.send(self.session(ns, session).map(|s| s.last_logits.clone()));
            }
            Command::Tokens { ns, session, reply } => {
                let r = self
                    .session(ns, session)
                    .map(|s| (s.seq, s.pending.clone()));
                let r = r.and_then(|(seq, pending)| {
                    let mut t = self.pool.seq_tokens(seq)?.to_vec();
                    t.extend(pending);
                    Ok(t)
                });
                let _ = reply.send(r);
            }
            Command::Warm {
                ns,
                tokens,
                pin,
                ttl,
                reply,
            } => self.start_warm(ns, tokens, (Some(pin), ttl, None), reply),
            Command::Rewarm {
                ns,
                tokens,
                count,
                reply,
            } => self.start_rewarm(ns, tokens, count, reply),
            Command::HotPrefixes { max_tokens, reply } => {
                let _ = reply.send(Ok(self.pool.hot_chains(max_tokens)));
            }
            Command::Registered => apply_policies(&mut self.pool, &self.namespaces.snapshot()),
            Command::SetPublicPrefixes { ns, prefixes } => self.set_public_prefixes(ns, &prefixes),
            Command::Embed { ns, tokens, reply } => self.start_embed(ns, tokens, reply),
            Command::Save {
                ns,
                session,
                name,
                reply,
            } => self.save_session(ns, session, name, reply),
            Command::Restore {
                ns,
                name,
                record,
                reply,
            } => {
                let _ = reply.send(self.restore_session(ns, &name, record.map(|r| *r)));
            }
            Command::Shutdown => {}
        }
        self.stats.set_sessions(self.sessions.len());
    }

    /// The salt of namespace `ns`, from the registry (the only place it is kept).
    pub(crate) fn salt(&self, ns: NamespaceId) -> Result<NamespaceSalt, EngineError> {
        self.namespaces
            .salt(ns)
            .ok_or_else(|| EngineError::Internal(format!("namespace {ns} is not registered")))
    }

    /// A session id never used before (ids are not reused, even across restarts).
    pub(crate) fn new_session_id(&mut self) -> SessionId {
        let id = SessionId(self.next_id);
        self.next_id = self.next_id.saturating_add(1);
        id
    }

    fn context_len(&self, s: &Session) -> Result<usize, EngineError> {
        Ok(self.pool.seq_len(s.seq)? + s.pending.len())
    }

    fn append(
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

    fn start_generation(
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
        let s = self.session(ns, id)?;
        let usage = Usage {
            prompt_tokens: s.pending.len(),
            cached_tokens: 0,
            completion_tokens: 0,
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
        })));
        s.queued_at = now;
        s.last_used = now;
        // Room for the whole generation now, so its decode steps never grow these vectors.
        let reach = context
            .len()
            .saturating_add(params.max_tokens)
            .min(self.cfg.max_context);
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
    fn requeue_last_token(&mut self, id: SessionId, seq: SeqId) -> Result<(), EngineError> {
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
    fn start_prefill(&mut self, ns: NamespaceId, id: SessionId, reply: Reply<Vec<f32>>) {
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

    fn fork(&mut self, ns: NamespaceId, id: SessionId) -> Result<SessionId, EngineError> {
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
        let new_id = self.new_session_id();
        self.sessions.insert(new_id, copy);
        self.persist.on_fork(id, new_id);
        self.stats
            .forks
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(new_id)
    }

    fn truncate(&mut self, ns: NamespaceId, id: SessionId, len: usize) -> Result<(), EngineError> {
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

    fn start_warm(
        &mut self,
        ns: NamespaceId,
        tokens: Vec<u32>,
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
        let salt = match self.salt(ns) {
            Ok(salt) => salt,
            Err(e) => {
                let _ = reply.send(Err(e));
                return;
            }
        };
        let root = self.pool.root_hash(&self.fingerprint, &salt);
        let seq = self.pool.create_seq(ns, root);
        let now = Instant::now();
        let mut s = Session::new(ns, root, seq, now);
        s.pending = tokens;
        s.job = Some(Job::Warm(Warm {
            pin,
            hot,
            ttl,
            reply,
            cached_tokens: 0,
        }));
        let id = self.new_session_id();
        self.sessions.insert(id, s);
        self.persist.on_open(id, ns);
    }

    /// Warms a saved hot prefix (refused when a token is outside the vocabulary: the record
    /// may come from another model's tokenizer).
    fn start_rewarm(
        &mut self,
        ns: NamespaceId,
        tokens: Vec<u32>,
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
        self.start_warm(ns, tokens, (None, None, Some(count)), reply);
    }

    /// Releases a session's blocks (full blocks stay cached for others) and ends its job.
    pub fn close_session(&mut self, id: SessionId) {
        self.persist.on_close(id);
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
                Some(Job::Score(sc)) => {
                    let _ = sc.reply.send(Err(EngineError::Cancelled));
                }
                None => {}
            }
            let _ = self.pool.drop_seq(s.seq);
        }
        self.stats.set_sessions(self.sessions.len());
    }

    /// Closes sessions idle longer than the configured TTL.
    fn sweep_idle(&mut self) {
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
