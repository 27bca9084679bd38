//! The engine thread: owns the model, the block pool and every session; callers talk to it only
//! through [`Command`]s. Between steps it takes requests; each step batches every running
//! session's next token plus chunks of pending prefills into one forward pass (see `step`; the
//! session commands are in `sessions`).
//! Nothing here locks: other threads read [`EngineStats`] and the pool's atomics.

mod buffers;
mod command;
mod embed;
mod fault;
mod guard;
mod jobs;
mod persist;
mod public;
mod reply;
mod score;
mod sessions;
mod sizing;
mod speculate;
mod staging;
mod step;
pub(crate) mod supervisor;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

pub(crate) use command::{Command, Reply};
pub use command::{GenerateParams, SessionInfo};
pub(crate) use persist::{HandedChain, MAX_SAVE_NAME, Persist, PromptChain};
pub(crate) use public::Publics;
pub(crate) use staging::Stage;

use memoria_kv::{
    BlockHash, BlockPool, ModelFingerprint, NamespaceId, NamespaceTable, Namespaces, RootShape,
};
use memoria_model::llama::{Model, Scratch};
use memoria_model::tokenizer::Tokenizer;

use crate::EngineError;
use crate::config::EngineConfig;
use crate::session::{Event, Session, SessionId};
use crate::stats::EngineStats;

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
    /// Every isolation group's memory of token sequences, drafted from (see `speculate`).
    pub drafts: Arc<memoria_kv::draft::DraftMemory>,
    /// What a row past the first costs in this engine's passes (weighed against a draft's
    /// expected tokens).
    pub(crate) row_cost: memoria_kv::draft::RowCost,
}

/// How a warm ends: its explicit pin and the pin's lifetime, and a re-warmed hot prefix's
/// reuse count.
type WarmMode = (Option<memoria_kv::PinLevel>, Option<Duration>, Option<f64>);

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
            self.take_staged(Duration::ZERO);
            let busy = self.has_runnable();
            let first = if busy {
                rx.try_recv().ok()
            } else {
                // While blocks are being staged, look back soon for them.
                let wait = if self.persist.staging() > 0 {
                    Duration::from_micros(200)
                } else {
                    Duration::from_millis(200)
                };
                match rx.recv_timeout(wait) {
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
            self.take_staged(Duration::ZERO);
            if self.has_runnable() {
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
            if !self.has_runnable() {
                if self.persist.staging() == 0 {
                    // Waiting for an answer that cannot come: compute without it.
                    for s in self.sessions.values_mut() {
                        if matches!(s.stage, Stage::Waiting) {
                            s.stage = Stage::Ready(Box::default());
                        }
                    }
                }
                self.take_staged(Duration::from_millis(50));
            }
            self.step_guarded();
        }
    }

    pub fn has_work(&self) -> bool {
        self.sessions.values().any(|s| s.job.is_some())
    }

    /// Whether a step has something to compute: a job not waiting for its blocks to be staged.
    fn has_runnable(&self) -> bool {
        self.sessions
            .values()
            .any(|s| s.job.is_some() && !matches!(s.stage, Stage::Waiting))
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
        self.stats
            .commands
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let now = Instant::now();
        match cmd {
            Command::Open { ns, reply } => {
                let _ = reply.send(self.open(ns, now));
            }
            Command::OpenWith {
                ns,
                tokens,
                chain,
                reply,
            } => {
                let r = self.open(ns, now).and_then(|id| {
                    self.append(ns, id, tokens).map(|_| id).inspect_err(|_| {
                        self.close_session(id);
                    })
                });
                if let (Ok(id), Some(chain)) = (&r, chain) {
                    self.adopt_chain(ns, *id, None, chain);
                }
                let _ = reply.send(r);
            }
            Command::Chain {
                ns,
                session,
                tokens,
                chain,
            } => self.adopt_chain(ns, session, Some(&tokens), chain),
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
            Command::ScoreRows {
                ns,
                session,
                from,
                reply,
            } => self.start_rows(ns, session, from, reply),
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
                chain,
                reply,
            } => self.start_warm(ns, tokens, chain, (Some(pin), ttl, None), reply),
            Command::Rewarm {
                ns,
                tokens,
                count,
                chain,
                reply,
            } => self.start_rewarm(ns, tokens, chain, count, reply),
            Command::HotPrefixes { max_tokens, reply } => {
                let _ = reply.send(Ok(self.pool.hot_chains(max_tokens)));
            }
            Command::Registered => apply_policies(&mut self.pool, &self.namespaces.snapshot()),
            Command::SetPublicPrefixes { ns, chain } => self.pool.set_public_prefixes(ns, chain),
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
                chain,
                reply,
            } => {
                let record = record.map(|r| r.map(|r| *r));
                let r = self.restore_session(ns, &name, record);
                if let (Ok(id), Some(chain)) = (&r, chain) {
                    self.adopt_chain(ns, *id, None, chain);
                }
                let _ = reply.send(r);
            }
            Command::Shutdown => {}
        }
        self.stats.set_sessions(self.sessions.len());
    }

    /// Opens an empty session of `ns`.
    fn open(&mut self, ns: NamespaceId, now: Instant) -> Result<SessionId, EngineError> {
        if self.sessions.len() >= self.cfg.max_sessions {
            return Err(EngineError::TooManySessions(self.cfg.max_sessions));
        }
        let root = self.root(ns)?;
        let seq = self.pool.create_seq(ns, root);
        let id = self.new_session_id();
        self.sessions.insert(id, Session::new(ns, root, seq, now));
        Ok(id)
    }

    /// The chain root of namespace `ns` for this engine's model, as the registry computed it.
    pub(crate) fn root(&self, ns: NamespaceId) -> Result<BlockHash, EngineError> {
        self.namespaces
            .root(ns, &self.root_shape())
            .ok_or_else(|| EngineError::Internal(format!("namespace {ns} is not registered")))
    }

    /// This engine's model and block shape, which chain roots are computed for.
    pub(crate) fn root_shape(&self) -> RootShape {
        RootShape::new(self.fingerprint, self.pool.layout())
    }

    /// A session id never used before (ids are not reused, even across restarts).
    pub(crate) fn new_session_id(&mut self) -> SessionId {
        let id = SessionId(self.next_id);
        self.next_id = self.next_id.saturating_add(1);
        id
    }
}
