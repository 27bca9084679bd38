//! Host events for `memoria serve` with `[store.remote] events = true`: what this host holds,
//! tier by tier, as routing keys (the router's chain, `memoria_kv::route_key`, over a prompt's
//! tokens, as the router computes it from the same request with
//! `memoria_http::request_tokens`). After each chat or completion a `shared`-isolation
//! namespace answered, its prompt's whole blocks are announced `stored` in the hot tier; from
//! then on the store's residency journal (`memoria_store::Residency`: the pool evicting a
//! block, the cold RAM and disk tiers storing or removing it) moves them between `hot`, `cold`
//! and `disk` and announces them `removed` where they left (see `held`). The journal speaks the
//! pool's salted hashes; the request's handler hands over its prompt's tokens with the salted
//! chain its session's open hashed (`memoria_http::ServedPrompt`), so nothing is tokenized or
//! salted-hashed again here, and this task pairs the two chains and publishes routing keys
//! only. Other isolations announce nothing: a routing key is public, but which prompts a
//! private tenant sent is not. The request's task only queues (a full queue drops and counts);
//! the routing chain is hashed on the blocking pool, writing happens on the publisher's task,
//! never on the engine thread. After an outage lost entries, the held keys are announced again
//! behind a `cleared`; if the journal itself overflowed, what is held is no longer known, so
//! the host announces `cleared` and starts over. What is held on disk is saved in the store
//! and announced again after a restart (see `saved`).

mod held;
mod saved;

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, OnceLock};

use memoria_http::{AppState, PromptObserver, ServedPrompt};
use memoria_store::remote::events::{EventsConfig, Kind, Publisher, Tier};
use memoria_store::{Move, RemoteOptions, Residency, TierStack};
use memoria_tenant::{Isolation, Namespace};
use tokio::sync::mpsc;

use held::{Announce, Held};
pub use saved::KeysFor;
use saved::SAVE_EVERY;

/// Served prompts queued for hashing.
const QUEUE: usize = 256;
/// How often the task drains the residency journal and asks the publisher whether a resync
/// is due.
const POLL: std::time::Duration = std::time::Duration::from_millis(100);
/// Residency moves the journal holds between two drains.
const JOURNAL: usize = 16_384;
/// Most blocks of one prompt announced.
pub const MAX_BLOCKS: usize = 4096;
/// Most blocks tracked (least recently served forgotten past it).
const MAX_HELD: usize = 1 << 17;

struct Served {
    label: String,
    prompt: ServedPrompt,
}

/// The observer the HTTP server calls, and the task behind it.
pub struct Events {
    tx: mpsc::Sender<Served>,
    rx: Mutex<Option<mpsc::Receiver<Served>>>,
    /// Asks the task to save the routing keys now; answered once committed.
    save_tx: mpsc::Sender<tokio::sync::oneshot::Sender<()>>,
    save_rx: Mutex<Option<mpsc::Receiver<tokio::sync::oneshot::Sender<()>>>>,
    publisher: OnceLock<Publisher>,
    dropped: AtomicU64,
}

impl Events {
    pub fn new() -> Arc<Events> {
        let (tx, rx) = mpsc::channel(QUEUE);
        let (save_tx, save_rx) = mpsc::channel(1);
        Arc::new(Events {
            tx,
            rx: Mutex::new(Some(rx)),
            save_tx,
            save_rx: Mutex::new(Some(save_rx)),
            publisher: OnceLock::new(),
            dropped: AtomicU64::new(0),
        })
    }

    /// Starts publishing (on the current runtime) once the server listens; `store` is the
    /// tier stack whose residency is followed and where the routing keys of blocks on disk
    /// are saved (for the engine `keys_for` says).
    pub fn start(
        &self,
        remote: &RemoteOptions,
        cfg: EventsConfig,
        state: Arc<AppState>,
        keys_for: KeysFor,
        store: &Arc<TierStack>,
    ) -> anyhow::Result<()> {
        let taken = self
            .rx
            .lock()
            .ok()
            .and_then(|mut r| r.take())
            .zip(self.save_rx.lock().ok().and_then(|mut r| r.take()));
        let (rx, save_rx) = taken.ok_or_else(|| anyhow::anyhow!("host events already started"))?;
        let (id, addr) = (cfg.host_id.clone(), cfg.advertise.clone());
        let p = Publisher::start(remote, cfg, Arc::new(move || state.queue_depth()))
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let journal = Arc::new(Residency::new(JOURNAL));
        store.watch_residency(journal.clone());
        eprintln!(
            "memoria: host events as {id} ({addr}), epoch {}, up to {MAX_HELD} blocks tracked",
            p.epoch()
        );
        let _ = self.publisher.set(p.clone());
        let task = Task {
            p,
            block_tokens: keys_for.block_tokens,
            held: Held::new(MAX_HELD),
            journal,
            moves: Vec::with_capacity(JOURNAL),
            out: Announce::default(),
            store: store.clone(),
            keys_for,
            saved_at: 0,
        };
        tokio::spawn(task.run(rx, save_rx));
        Ok(())
    }

    /// Saves the routing keys of what is held on disk now and waits (at most `within`) for
    /// the commit; for the shutdown signal. A no-op before `start`.
    pub async fn save(&self, within: std::time::Duration) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        if self.save_tx.send(tx).await.is_ok() {
            let _ = tokio::time::timeout(within, rx).await;
        }
    }
}

struct Task {
    p: Publisher,
    block_tokens: usize,
    held: Held,
    journal: Arc<Residency>,
    moves: Vec<Move>,
    out: Announce,
    store: Arc<TierStack>,
    keys_for: KeysFor,
    /// `held.changes()` at the last save.
    saved_at: u64,
}

impl Task {
    async fn run(
        mut self,
        mut rx: mpsc::Receiver<Served>,
        mut save_rx: mpsc::Receiver<tokio::sync::oneshot::Sender<()>>,
    ) {
        let n = saved::restore(&self.store, self.keys_for, &mut self.held, &mut self.out).await;
        if n > 0 {
            eprintln!("memoria: host events: {n} blocks on disk announced again");
        }
        self.saved_at = self.held.changes();
        self.out.send(&self.p);
        let mut poll = tokio::time::interval(POLL);
        let mut save = tokio::time::interval(SAVE_EVERY);
        save.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                Some(done) = save_rx.recv() => {
                    self.drain();
                    if self.store.disk().is_some() {
                        self.save().await;
                    }
                    let _ = done.send(());
                }
                _ = save.tick() => {
                    if self.store.disk().is_some() && self.held.changes() != self.saved_at {
                        // Not awaited here (a failure is logged); saved again at the next
                        // change.
                        tokio::spawn(self.save());
                    }
                }
                s = rx.recv() => match s {
                    // Moves recorded before this prompt was answered come first.
                    Some(s) => {
                        self.drain();
                        self.serve(s).await;
                    }
                    None => return,
                },
                _ = poll.tick() => {
                    self.drain();
                    if self.p.take_resync() {
                        self.p.send(Kind::Cleared, Tier::Hot, Vec::new());
                        for t in Tier::ALL {
                            self.p.send(Kind::Stored, t, self.held.keys(t));
                        }
                    }
                }
            }
            self.out.send(&self.p);
        }
    }

    /// Saves the routing keys of what is held on disk; the future resolves with the commit.
    fn save(&mut self) -> impl std::future::Future<Output = ()> + use<> {
        self.saved_at = self.held.changes();
        let rx = saved::save(&self.store, self.keys_for, &self.held);
        async move {
            if let Ok(Err(e)) = rx.await {
                eprintln!("memoria: host events: the routing keys were not saved: {e}");
            }
        }
    }

    /// Applies the journal's moves; after an overflow, starts over behind a `cleared`.
    fn drain(&mut self) {
        if self.journal.drain(&mut self.moves) {
            self.held.clear();
            self.out = Announce::default();
            self.p.send(Kind::Cleared, Tier::Hot, Vec::new());
            return;
        }
        for m in &self.moves {
            self.held.apply(m, &mut self.out);
        }
    }

    async fn serve(&mut self, s: Served) {
        let b = self.block_tokens;
        let routed = tokio::task::spawn_blocking(move || {
            let route =
                memoria_kv::route_key::route_chain(&s.label, b, &s.prompt.tokens, MAX_BLOCKS);
            (s.prompt.pool_chain, route)
        })
        .await;
        if let Ok((pool, route)) = routed {
            let pool = &pool[..pool.len().min(MAX_BLOCKS)];
            self.held.serve(pool, &route, &mut self.out);
        }
    }
}

impl PromptObserver for Events {
    fn served(&self, ns: &Namespace, label: &str, prompt: ServedPrompt) {
        if !matches!(ns.spec.isolation, Isolation::Shared) {
            return;
        }
        let s = Served {
            label: label.to_string(),
            prompt,
        };
        if self.tx.try_send(s).is_err() {
            self.dropped.fetch_add(1, Relaxed);
        }
    }

    fn counters(&self) -> Vec<(&'static str, &'static str, u64)> {
        let s = self.publisher.get().map(Publisher::stats);
        let get = |f: fn(&memoria_store::remote::events::EventStats) -> &AtomicU64| {
            s.map_or(0, |s| f(s).load(Relaxed))
        };
        vec![
            (
                "published",
                "Host event entries written to the stream.",
                get(|s| &s.published),
            ),
            (
                "dropped",
                "Served prompts or event batches dropped because a queue was full.",
                self.dropped.load(Relaxed) + get(|s| &s.dropped),
            ),
            (
                "errors",
                "Host event entries lost to a failed write.",
                get(|s| &s.errors),
            ),
            (
                "liveness",
                "Liveness key refreshes written.",
                get(|s| &s.liveness),
            ),
        ]
    }
}
