//! The routing table: every backend with its health, polled queue depth, the router's own
//! in-flight count, its idle connections and per-backend counters, all readable from any task.

use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};

use anyhow::{Context, bail};
use memoria_kv::BlockHash;

use super::pool::IdlePool;
use super::prefix::HostKeys;
use super::rank::{self, Candidate};
use super::recent::Recent;
use super::upstream::Sender;

/// One host behind the router.
#[derive(Debug)]
pub struct Backend {
    /// `http://host:port`, as reported in `x-memoria-backend` and metrics labels.
    pub url: String,
    /// `host:port`, for connecting and the `Host` header.
    pub authority: String,
    /// Answered its last health poll (or a request) and was not marked down since.
    pub up: AtomicBool,
    /// Requests waiting on the host (engine queue plus admission queues), from `/stats` or,
    /// where `/stats` gives none, from its liveness key (see [`Backend::liveness_load`]).
    pub queue_depth: AtomicU64,
    /// Its last `/stats` poll gave a queue depth.
    pub stats_seen: AtomicBool,
    /// With `--events`: the queue depth in its liveness key (0 until read).
    pub announced_load: AtomicU64,
    /// The part of `queue_depth` that is not this router's own: what it reported less the
    /// requests this router had open to it during that poll (see [`super::poll::others_load`]).
    pub others: AtomicU64,
    /// Requests this router has open to it.
    pub inflight: AtomicU64,
    /// Requests sent to it.
    pub requests: AtomicU64,
    /// Connections it refused (or that timed out) while proxying.
    pub refused: AtomicU64,
    /// Idle connections to it, for the next request.
    pub pool: IdlePool,
    /// With `--events`: its liveness key exists (without, always true).
    pub live: AtomicBool,
    /// With `--events`: the routing keys it announced (see `prefix`).
    pub keys: Mutex<HostKeys>,
    /// Prefixes this router sent it lately (see `recent`).
    pub recent: Mutex<Recent>,
}

impl Backend {
    /// Parses `http://host[:port][/]`.
    pub fn parse(url: &str) -> anyhow::Result<Backend> {
        let uri: hyper::Uri = url
            .parse()
            .with_context(|| format!("--backend {url:?} is not a URL"))?;
        if uri.scheme_str() != Some("http") {
            bail!("--backend {url:?}: only http:// backends are supported");
        }
        if (uri.path() != "/" && !uri.path().is_empty()) || uri.query().is_some() {
            bail!("--backend {url:?}: give only the scheme, host and port (no path)");
        }
        let Some(auth) = uri.authority() else {
            bail!("--backend {url:?} has no host");
        };
        if auth.as_str().contains('@') {
            bail!("--backend {url:?}: credentials in the URL are not supported");
        }
        let authority = format!("{}:{}", auth.host(), auth.port_u16().unwrap_or(80));
        Ok(Backend {
            url: format!("http://{authority}"),
            authority,
            up: AtomicBool::new(true),
            queue_depth: AtomicU64::new(0),
            stats_seen: AtomicBool::new(false),
            announced_load: AtomicU64::new(0),
            others: AtomicU64::new(0),
            inflight: AtomicU64::new(0),
            requests: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            pool: IdlePool::default(),
            live: AtomicBool::new(true),
            keys: Mutex::new(HostKeys::default()),
            recent: Mutex::new(Recent::default()),
        })
    }

    /// Records the queue depth a host wrote into its liveness key (`--events`) and, where
    /// `/stats` gave none, weighs it (see [`Backend::fallback_load`]).
    pub fn liveness_load(&self, load: u64) {
        self.announced_load.store(load, Relaxed);
        if !self.stats_seen.load(Relaxed) {
            self.fallback_load();
        }
    }

    /// The load weighed where `/stats` gave no queue depth (it needs a key the router was not
    /// given): the one in the host's liveness key, staler than a poll (refreshed every third
    /// of the key's TTL) but better than counting only this router's requests; 0 without
    /// `--events`. The key's value counts this router's requests too; those open now are
    /// taken off as in [`super::poll::others_load`].
    pub fn fallback_load(&self) {
        let (load, open) = (
            self.announced_load.load(Relaxed),
            self.inflight.load(Relaxed),
        );
        self.queue_depth.store(load, Relaxed);
        self.others
            .store(super::poll::others_load(load, open, open), Relaxed);
    }

    /// Others' requests on the host at the last poll plus those open from here now: what
    /// ranking weighs. Counting the host's report whole would count this router's requests
    /// twice, and keep counting a finished one until the next poll.
    pub fn load(&self) -> u64 {
        self.others
            .load(Relaxed)
            .saturating_add(self.inflight.load(Relaxed))
    }
}

/// Every backend, in `--backend` order.
#[derive(Debug)]
pub struct Table {
    pub backends: Vec<Backend>,
    pub load_scale: f64,
}

impl Backend {
    /// Answers its health poll and, with `--events`, has a liveness key.
    pub fn routable(&self) -> bool {
        self.up.load(Relaxed) && self.live.load(Relaxed)
    }
}

impl Table {
    fn candidates(&self) -> Vec<Candidate<'_>> {
        self.backends
            .iter()
            .map(|b| Candidate {
                name: &b.url,
                up: b.routable(),
                load: b.load(),
            })
            .collect()
    }

    /// Backend indices for a prompt whose routing chain is `chain` (its first key `key`; the
    /// chain is empty without `--events`), best first by the prefix each backend holds (see
    /// [`rank::rank_by_prefix`]), and how many blocks of it each holds: what it announced or,
    /// if more, what this router sent it lately under the same first key.
    pub fn rank_by_prefix(&self, key: &BlockHash, chain: &[BlockHash]) -> (Vec<usize>, Vec<usize>) {
        let now = std::time::Instant::now();
        let matched: Vec<usize> = self
            .backends
            .iter()
            .map(|b| {
                let announced = b.keys.lock().map_or(0, |k| k.matched(chain));
                let routed = b.recent.lock().map_or(0, |r| r.matched(key, now));
                announced.max(routed)
            })
            .collect();
        let order = rank::rank_by_prefix(key, &self.candidates(), &matched, self.load_scale);
        (order, matched)
    }

    /// How many backends are up.
    pub fn up_count(&self) -> usize {
        self.backends.iter().filter(|b| b.routable()).count()
    }
}

/// Counts one request open to a backend until dropped (it lives as long as the response body).
pub struct Inflight {
    table: Arc<Table>,
    index: usize,
}

impl Inflight {
    /// Counts a request to `table.backends[index]` (an index from [`Table::rank`]).
    pub fn start(table: Arc<Table>, index: usize) -> Inflight {
        if let Some(b) = table.backends.get(index) {
            b.inflight.fetch_add(1, Relaxed);
        }
        Inflight { table, index }
    }

    /// Gives the exchange's connection back to its backend's pool (its response was read to
    /// the end).
    pub fn give_back(&self, sender: Sender) {
        IdlePool::give_back(self.table.clone(), self.index, sender);
    }
}

impl Drop for Inflight {
    fn drop(&mut self) {
        if let Some(b) = self.table.backends.get(self.index) {
            let _ = b
                .inflight
                .fetch_update(Relaxed, Relaxed, |n| Some(n.saturating_sub(1)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backend_urls() {
        let b = Backend::parse("http://127.0.0.1:8080").expect("plain");
        assert_eq!(b.authority, "127.0.0.1:8080");
        assert_eq!(
            Backend::parse("http://h/").expect("slash").url,
            "http://h:80"
        );
        for bad in [
            "https://h",
            "h:80",
            "http://h/v1",
            "http://u:p@h",
            "http://h?x=1",
            "",
        ] {
            assert!(Backend::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn liveness_load_counts_only_where_stats_gave_none() {
        let b = Backend::parse("http://127.0.0.1:1").expect("url");
        b.inflight.store(2, Relaxed);
        // /stats unreadable: the key's 5 less this router's 2 open requests.
        b.liveness_load(5);
        assert_eq!((b.queue_depth.load(Relaxed), b.load()), (5, 5));
        // A poll that reads /stats wins over the key from then on.
        b.stats_seen.store(true, Relaxed);
        b.others.store(1, Relaxed);
        b.liveness_load(9);
        assert_eq!(b.load(), 3);
        // /stats stops answering: back to the last key's value.
        b.stats_seen.store(false, Relaxed);
        b.fallback_load();
        assert_eq!((b.queue_depth.load(Relaxed), b.load()), (9, 9));
    }
}
