//! Host events for `memoria serve` with `[store.remote] events = true`: after each chat or
//! completion a `shared`-isolation namespace answered, its prompt's routing keys (the router's
//! chain, `memoria_kv::route_key`, over the tokens `memoria_http::request_tokens` gives, so
//! host and router agree by construction) are announced as `stored` in the hot tier, and keys
//! past the hot pool's size as `removed` (see `advertised`). Other isolations announce nothing:
//! a routing key is public, but which prompts a private tenant sent is not. The request's task
//! only queues (a full queue drops and counts); tokenizing runs on the blocking pool, writing
//! on the publisher's task, never on the engine thread. After an outage lost entries, the held
//! keys are announced again behind a `cleared` (checked every [`RESYNC_POLL`]).

mod advertised;

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use memoria_http::{AppState, PromptObserver};
use memoria_store::RemoteOptions;
use memoria_store::remote::events::{EventsConfig, Kind, Publisher, Tier};
use memoria_tenant::{Isolation, Namespace};
use tokio::sync::mpsc;

use advertised::Advertised;

/// Served prompts queued for hashing.
const QUEUE: usize = 256;
/// How often the task asks the publisher whether a resync is due.
const RESYNC_POLL: std::time::Duration = std::time::Duration::from_millis(500);
/// Most blocks of one prompt announced.
pub const MAX_BLOCKS: usize = 4096;

struct Served {
    label: String,
    path: String,
    body: Bytes,
}

/// The observer the HTTP server calls, and the task behind it.
pub struct Events {
    tx: mpsc::Sender<Served>,
    rx: Mutex<Option<mpsc::Receiver<Served>>>,
    publisher: OnceLock<Publisher>,
    dropped: AtomicU64,
}

impl Events {
    pub fn new() -> Arc<Events> {
        let (tx, rx) = mpsc::channel(QUEUE);
        Arc::new(Events {
            tx,
            rx: Mutex::new(Some(rx)),
            publisher: OnceLock::new(),
            dropped: AtomicU64::new(0),
        })
    }

    /// Starts publishing (on the current runtime) once the server listens.
    pub fn start(
        &self,
        remote: &RemoteOptions,
        cfg: EventsConfig,
        state: Arc<AppState>,
        block_tokens: usize,
    ) -> anyhow::Result<()> {
        let rx = self
            .rx
            .lock()
            .ok()
            .and_then(|mut r| r.take())
            .ok_or_else(|| anyhow::anyhow!("host events already started"))?;
        let load_state = state.clone();
        let (id, addr) = (cfg.host_id.clone(), cfg.advertise.clone());
        let p = Publisher::start(remote, cfg, Arc::new(move || load_state.queue_depth()))
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let pool = state.engine.pool_stats().snapshot();
        let cap = pool
            .blocks_used
            .saturating_add(pool.blocks_cached)
            .saturating_add(pool.blocks_free);
        let cap = usize::try_from(cap).unwrap_or(usize::MAX);
        eprintln!(
            "memoria: host events as {id} ({addr}), epoch {}, up to {cap} routing keys",
            p.epoch()
        );
        let _ = self.publisher.set(p.clone());
        tokio::spawn(run(rx, p, state, block_tokens, Advertised::new(cap)));
        Ok(())
    }
}

async fn run(
    mut rx: mpsc::Receiver<Served>,
    p: Publisher,
    state: Arc<AppState>,
    block_tokens: usize,
    mut held: Advertised,
) {
    let mut poll = tokio::time::interval(RESYNC_POLL);
    loop {
        let s = tokio::select! {
            s = rx.recv() => match s {
                Some(s) => s,
                None => return,
            },
            _ = poll.tick() => {
                if p.take_resync() {
                    p.send(Kind::Cleared, Tier::Hot, Vec::new());
                    p.send(Kind::Stored, Tier::Hot, held.keys());
                }
                continue;
            }
        };
        let st = state.clone();
        let keys = tokio::task::spawn_blocking(move || {
            let tokens =
                memoria_http::request_tokens(&st.chat, st.engine.tokenizer(), &s.path, &s.body)?;
            Some(memoria_kv::route_key::route_chain(
                &s.label,
                block_tokens,
                &tokens,
                MAX_BLOCKS,
            ))
        })
        .await
        .ok()
        .flatten()
        .unwrap_or_default();
        if keys.is_empty() {
            continue;
        }
        let (added, removed) = held.serve(&keys);
        if !removed.is_empty() {
            p.send(Kind::Removed, Tier::Hot, removed);
        }
        if !added.is_empty() {
            p.send(Kind::Stored, Tier::Hot, added);
        }
    }
}

impl PromptObserver for Events {
    fn served(&self, ns: &Namespace, label: &str, path: &str, body: &Bytes) {
        if !matches!(ns.spec.isolation, Isolation::Shared) {
            return;
        }
        let s = Served {
            label: label.to_string(),
            path: path.to_string(),
            body: body.clone(),
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
