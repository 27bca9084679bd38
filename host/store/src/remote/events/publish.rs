//! The host side of events: [`Publisher::send`] queues a batch of hashes (never blocking, a
//! full queue drops the batch and counts it); a tokio task on the server's runtime drains the
//! queue into `XADD .. MAXLEN ~ N` entries (one pipeline per wake-up) and refreshes the
//! liveness key every third of its TTL. The first entry of a run is `cleared` under a new
//! epoch. A failed write loses its entries (counted): events are a routing hint, not a ledger;
//! but once a write succeeds again after one failed, the publisher asks its owner to resync
//! ([`Publisher::take_resync`]): re-announce what it holds after a `cleared`, so a router's view
//! of this host is whole again after an outage.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use memoria_kv::BlockHash;
use tokio::sync::mpsc;

use super::super::RemoteOptions;
use super::super::keys::check_label;
use super::super::link::{Connector, Link};
use super::format::{Event, Kind, MAX_ENTRY_HASHES, Tier};
use super::liveness::Liveness;
use super::{hosts_key, liveness_key, stream_key};

/// Batches the queue holds before [`Publisher::send`] drops.
const QUEUE: usize = 1024;

/// What the publisher is told besides the remote tier's options.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventsConfig {
    /// `[A-Za-z0-9._-]`, 1..=64 bytes: the stream and liveness keys' last part.
    pub host_id: String,
    /// The base URL routers know this host by.
    pub advertise: String,
    /// `MAXLEN ~` of the stream.
    pub maxlen: u64,
    /// Expiry of the liveness key, seconds (refreshed every third of it).
    pub liveness_ttl_s: u64,
}

impl EventsConfig {
    /// Checks every field; the message names the configuration key.
    pub fn validate(&self) -> Result<(), String> {
        check_label(&self.host_id).map_err(|e| format!("store.remote.host_id: {e}"))?;
        if !self.advertise.starts_with("http://") || self.advertise.len() > 256 {
            return Err(format!(
                "store.remote.advertise {:?}: give http://HOST:PORT",
                self.advertise
            ));
        }
        if !(16..=10_000_000).contains(&self.maxlen) {
            return Err("store.remote.events_maxlen must be 16..=10000000".into());
        }
        if !(1..=3600).contains(&self.liveness_ttl_s) {
            return Err("store.remote.liveness_ttl_s must be 1..=3600".into());
        }
        Ok(())
    }
}

/// The publisher's counters (`/stats` and `/metrics`).
#[derive(Debug, Default)]
pub struct EventStats {
    /// Stream entries written (acknowledged).
    pub published: AtomicU64,
    /// Batches dropped because the queue was full.
    pub dropped: AtomicU64,
    /// Entries lost to a failed write.
    pub errors: AtomicU64,
    /// Liveness refreshes written.
    pub liveness: AtomicU64,
}

struct Batch {
    kind: Kind,
    tier: Tier,
    hashes: Vec<BlockHash>,
}

/// A handle on the publishing task; dropping every handle ends it.
#[derive(Clone)]
pub struct Publisher {
    tx: mpsc::Sender<Batch>,
    stats: Arc<EventStats>,
    epoch: u64,
    resync: Arc<AtomicBool>,
}

impl std::fmt::Debug for Publisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Publisher")
            .field("epoch", &self.epoch)
            .finish_non_exhaustive()
    }
}

/// Reads the host's load for the liveness key.
pub type LoadFn = Arc<dyn Fn() -> u64 + Send + Sync>;

impl Publisher {
    /// Checks the settings and starts the task on the current tokio runtime (so call it from
    /// inside one). The server need not be up: writes fail and are counted until it is.
    pub fn start(remote: &RemoteOptions, cfg: EventsConfig, load: LoadFn) -> Result<Self, String> {
        cfg.validate()?;
        let connector = Connector::new(&remote.endpoint, remote.timeout())?;
        let epoch = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let (tx, rx) = mpsc::channel(QUEUE);
        let stats = Arc::new(EventStats::default());
        let resync = Arc::new(AtomicBool::new(false));
        let task = Task {
            resync: resync.clone(),
            lost: false,
            connector,
            link: None,
            timeout: remote.timeout(),
            stream: stream_key(&remote.key_prefix, &cfg.host_id),
            live_key: liveness_key(&remote.key_prefix, &cfg.host_id),
            hosts_key: hosts_key(&remote.key_prefix),
            cfg,
            epoch,
            seq: 0,
            stats: stats.clone(),
            load,
        };
        tokio::spawn(task.run(rx));
        let p = Publisher {
            tx,
            stats,
            epoch,
            resync,
        };
        p.send(Kind::Cleared, Tier::Hot, Vec::new());
        Ok(p)
    }

    /// Queues an event; false (and counted) when the queue is full or the task is gone.
    pub fn send(&self, kind: Kind, tier: Tier, hashes: Vec<BlockHash>) -> bool {
        let ok = self.tx.try_send(Batch { kind, tier, hashes }).is_ok();
        if !ok {
            self.stats.dropped.fetch_add(1, Relaxed);
        }
        ok
    }

    /// The counters.
    pub fn stats(&self) -> &EventStats {
        &self.stats
    }

    /// This run's epoch.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Whether the server took a write again after entries were lost (asked once per
    /// recovery): the owner should send `cleared` and then everything it holds as `stored`.
    pub fn take_resync(&self) -> bool {
        self.resync.swap(false, Relaxed)
    }
}

struct Task {
    connector: Connector,
    link: Option<Link>,
    timeout: Duration,
    stream: String,
    live_key: String,
    hosts_key: String,
    cfg: EventsConfig,
    epoch: u64,
    seq: u64,
    stats: Arc<EventStats>,
    load: LoadFn,
    /// Entries were lost since the last successful write.
    lost: bool,
    resync: Arc<AtomicBool>,
}

impl Task {
    /// Records a write's outcome: the first success after a loss asks for a resync.
    fn wrote(&mut self, ok: bool) {
        if !ok {
            self.lost = true;
        } else if std::mem::take(&mut self.lost) {
            self.resync.store(true, Relaxed);
        }
    }

    async fn run(mut self, mut rx: mpsc::Receiver<Batch>) {
        let every = Duration::from_millis((self.cfg.liveness_ttl_s * 1000 / 3).max(200));
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                b = rx.recv() => {
                    let Some(b) = b else { break };
                    let mut batches = vec![b];
                    while batches.len() < 64 {
                        match rx.try_recv() {
                            Ok(b) => batches.push(b),
                            Err(_) => break,
                        }
                    }
                    self.publish(batches).await;
                }
                _ = tick.tick() => self.refresh().await,
            }
        }
    }

    async fn link(&mut self) -> Option<&mut Link> {
        if self.link.is_none() {
            let connected =
                tokio::time::timeout(self.timeout * 2, self.connector.connect(self.timeout)).await;
            self.link = connected.ok().and_then(Result::ok);
        }
        self.link.as_mut()
    }

    /// Writes `batches` as entries (long batches split), one pipeline.
    async fn publish(&mut self, batches: Vec<Batch>) {
        let mut p = redis::pipe();
        let mut entries = 0u64;
        for b in batches {
            let chunks: Vec<Vec<BlockHash>> = if b.hashes.is_empty() {
                if b.kind != Kind::Cleared {
                    continue;
                }
                vec![Vec::new()]
            } else {
                b.hashes
                    .chunks(MAX_ENTRY_HASHES)
                    .map(<[BlockHash]>::to_vec)
                    .collect()
            };
            for hashes in chunks {
                self.seq += 1;
                let e = Event {
                    epoch: self.epoch,
                    seq: self.seq,
                    kind: b.kind,
                    tier: b.tier,
                    hashes,
                };
                let c = p
                    .cmd("XADD")
                    .arg(&self.stream)
                    .arg("MAXLEN")
                    .arg("~")
                    .arg(self.cfg.maxlen)
                    .arg("*");
                for (k, v) in e.fields() {
                    c.arg(k).arg(v);
                }
                c.ignore();
                entries += 1;
            }
        }
        if entries == 0 {
            return;
        }
        let timeout = self.timeout;
        let ok = match self.link().await {
            Some(l) => matches!(
                tokio::time::timeout(timeout, p.query_async::<()>(l)).await,
                Ok(Ok(()))
            ),
            None => false,
        };
        let counter = if ok {
            &self.stats.published
        } else {
            &self.stats.errors
        };
        counter.fetch_add(entries, Relaxed);
        self.wrote(ok);
    }

    async fn refresh(&mut self) {
        let v = Liveness {
            addr: self.cfg.advertise.clone(),
            load: (self.load)(),
            epoch: self.epoch,
        }
        .encode();
        let (key, ttl, timeout) = (self.live_key.clone(), self.cfg.liveness_ttl_s, self.timeout);
        let Some(l) = self.link().await else { return };
        let mut c = redis::cmd("SET");
        c.arg(&key).arg(v).arg("EX").arg(ttl);
        let set = c.query_async::<()>(l);
        if let Ok(Ok(())) = tokio::time::timeout(timeout, set).await {
            self.stats.liveness.fetch_add(1, Relaxed);
            self.wrote(true);
            // Its own command: on a cluster the two keys live in different slots.
            let mut add = redis::cmd("SADD");
            add.arg(&self.hosts_key).arg(&self.cfg.host_id);
            if let Some(l) = self.link().await {
                let _ = tokio::time::timeout(timeout, add.query_async::<()>(l)).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_checked() {
        let good = EventsConfig {
            host_id: "h1".into(),
            advertise: "http://127.0.0.1:8080".into(),
            maxlen: 10_000,
            liveness_ttl_s: 3,
        };
        assert_eq!(good.validate(), Ok(()));
        let bad = |f: fn(&mut EventsConfig)| {
            let mut c = good.clone();
            f(&mut c);
            c.validate().unwrap_err()
        };
        assert!(bad(|c| c.host_id = "a:b".into()).contains("host_id"));
        assert!(bad(|c| c.advertise = "10.0.0.1:80".into()).contains("advertise"));
        assert!(bad(|c| c.maxlen = 0).contains("events_maxlen"));
        assert!(bad(|c| c.liveness_ttl_s = 0).contains("liveness_ttl_s"));
    }
}
