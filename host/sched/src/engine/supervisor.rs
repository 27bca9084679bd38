//! The engine's supervisor: the engine thread runs the engine loop inside `catch_unwind`; if a
//! panic escapes the per-command and per-step guards, the loop is dead. The supervisor then
//! marks the engine down (`/health` answers 503), fails every session with a clear error,
//! answers commands with `EngineError::Restarting` for a back-off (1 s, doubling to 10 s while
//! it keeps dying within a minute), and starts a new engine: on the old pool when its
//! invariants still hold after releasing every session, else on a fresh one. Session ids are
//! never reused, so a caller holding an old id gets `NotFound`, never someone else's session.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use memoria_kv::{BlockPool, KvLayout, ModelFingerprint, PoolStats};
use memoria_model::llama::{Model, Scratch};
use memoria_model::tokenizer::Tokenizer;

use super::guard::panic_message;
use super::{Command, Engine, Persist};
use crate::EngineError;
use crate::config::EngineConfig;
use crate::session::SessionId;
use crate::stats::EngineStats;

const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// An engine that ran this long before dying starts the back-off over.
const STABLE: Duration = Duration::from_secs(60);

/// What callers can see of the engine's state across restarts.
#[derive(Debug)]
pub(crate) struct Health {
    up: AtomicBool,
    pool_stats: RwLock<Arc<PoolStats>>,
}

impl Health {
    pub fn new(pool_stats: Arc<PoolStats>) -> Health {
        Health {
            up: AtomicBool::new(true),
            pool_stats: RwLock::new(pool_stats),
        }
    }

    /// Whether the engine loop is running (false while it restarts).
    pub fn is_up(&self) -> bool {
        self.up.load(Relaxed)
    }

    /// The current pool's figures.
    pub fn pool_stats(&self) -> Arc<PoolStats> {
        self.pool_stats
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn set_pool_stats(&self, s: Arc<PoolStats>) {
        *self.pool_stats.write().unwrap_or_else(|e| e.into_inner()) = s;
    }
}

/// Everything needed to build an engine again.
pub(crate) struct Blueprint {
    pub model: Arc<Model>,
    pub tok: Arc<Tokenizer>,
    pub cfg: EngineConfig,
    pub fingerprint: ModelFingerprint,
    pub layout: KvLayout,
    pub stats: Arc<EngineStats>,
    /// The namespace registry (shared with the handle and the tier stack).
    pub namespaces: Arc<memoria_kv::Namespaces>,
    /// Every isolation group's draft memory (kept across restarts: it holds no engine state).
    pub drafts: Arc<memoria_kv::draft::DraftMemory>,
    /// Every namespace's compiled public prefixes (given to each pool built).
    pub publics: Arc<super::Publics>,
}

impl Blueprint {
    /// A fresh pool of the configured size.
    pub fn pool(&self) -> Result<BlockPool, EngineError> {
        Ok(BlockPool::new(self.layout, self.cfg.kv_budget_bytes)?)
    }

    /// An engine over `pool`, handing out session ids from `next_id`.
    pub fn engine(&self, mut pool: BlockPool, next_id: u64) -> Engine {
        let persist = Persist::new(
            self.cfg.store.clone(),
            self.fingerprint,
            self.layout,
            self.namespaces.clone(),
        );
        persist.install(&mut pool);
        pool.set_target_hit_rate(self.cfg.target_hit_rate);
        pool.set_auto_pin(self.cfg.auto_pin);
        super::apply_policies(&mut pool, &self.namespaces.snapshot());
        for (ns, chain) in self.publics.all() {
            pool.set_public_prefixes(ns, Some(chain));
        }
        let row_cost = memoria_kv::draft::RowCost::new(self.cfg.draft_row_cost);
        self.stats.speculation.set_row_cost(row_cost.get());
        Engine {
            model: self.model.clone(),
            tok: self.tok.clone(),
            pool,
            fingerprint: self.fingerprint,
            cfg: self.cfg.clone(),
            sessions: Default::default(),
            next_id,
            scratch: Scratch::for_rows(&self.model, self.cfg.step_tokens.max(1)),
            buffers: Default::default(),
            stats: self.stats.clone(),
            round_robin: 0,
            persist,
            namespaces: self.namespaces.clone(),
            sizing: Default::default(),
            drafts: self.drafts.clone(),
            row_cost,
        }
    }
}

/// The engine thread's body: runs `engine` until shutdown, restarting it whenever it dies.
pub(crate) fn supervise(
    bp: Blueprint,
    mut engine: Engine,
    rx: Receiver<Command>,
    health: Arc<Health>,
) {
    let mut backoff = super::fault::first_backoff(FIRST_BACKOFF);
    loop {
        let started = Instant::now();
        let Err(p) = catch_unwind(AssertUnwindSafe(|| engine.run(&rx))) else {
            health.up.store(false, Relaxed);
            return;
        };
        health.up.store(false, Relaxed);
        bp.stats.restarts.fetch_add(1, Relaxed);
        if started.elapsed() >= STABLE {
            backoff = super::fault::first_backoff(FIRST_BACKOFF);
        }
        eprintln!(
            "memoria: the engine loop died ({}); failing its sessions, restarting in {} ms",
            panic_message(p.as_ref()),
            backoff.as_millis()
        );
        let next_id = engine.next_id;
        let pool = salvage(engine);
        if !refuse_for(&rx, backoff) {
            return;
        }
        backoff = backoff.saturating_mul(2).min(MAX_BACKOFF);
        let pool = match pool {
            Some(p) => p,
            None => loop {
                match bp.pool() {
                    Ok(p) => {
                        health.set_pool_stats(p.stats());
                        break p;
                    }
                    Err(e) => {
                        eprintln!("memoria: a new block pool could not be built ({e}); retrying");
                        if !refuse_for(&rx, MAX_BACKOFF) {
                            return;
                        }
                    }
                }
            },
        };
        engine = bp.engine(pool, next_id);
        bp.stats.set_sessions(0);
        health.up.store(true, Relaxed);
        eprintln!("memoria: the engine is running again");
    }
}

/// Fails every session of a dead engine and returns its pool if it is still consistent.
fn salvage(mut engine: Engine) -> Option<BlockPool> {
    catch_unwind(AssertUnwindSafe(move || {
        let ids: Vec<SessionId> = engine.sessions.keys().copied().collect();
        for id in ids {
            engine.fail_job(id, EngineError::Restarting);
            engine.close_session(id);
        }
        match engine.pool.check_invariants() {
            Ok(()) => Some(engine.pool),
            Err(why) => {
                eprintln!("memoria: the block pool is inconsistent ({why}); starting a fresh one");
                None
            }
        }
    }))
    .ok()
    .flatten()
}

/// Answers every command with `Restarting` for `d`; false when the engine should stop instead.
fn refuse_for(rx: &Receiver<Command>, d: Duration) -> bool {
    let until = Instant::now().checked_add(d).unwrap_or_else(Instant::now);
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return true;
        }
        match rx.recv_timeout(left) {
            Ok(Command::Shutdown) | Err(RecvTimeoutError::Disconnected) => return false,
            Ok(cmd) => cmd.refuse(EngineError::Restarting),
            Err(RecvTimeoutError::Timeout) => return true,
        }
    }
}
