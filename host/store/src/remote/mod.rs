//! The remote tier: blocks shared between hosts through Valkey or Redis (the same wire
//! protocol), one key per block (see [`keys`] and the codec's "Remote keys" section), values in
//! the codec's shared form (namespace root, never the salt). It is a lossy cache: a miss, a
//! timeout, a refused connection or a bad value is a counted miss, never an error; a circuit
//! breaker ([`breaker`]) stops asking a server that is down and probes again with backoff.
//!
//! Nothing here blocks the engine thread: reads are async ([`RemoteTier::get_many`], awaited
//! by the request's task before the engine schedules it; see `TierStack::prefetch_remote`),
//! writes are write-behind through a queue bounded in bytes ([`RemoteTier::put`]); the network
//! work runs on the tier's own thread ([`worker`]). The data lives on one server or on a Redis
//! Cluster ([`Endpoint`]); one connection type ([`link`]) serves both, so the breaker, timeouts,
//! counters, write-behind and miss semantics are the same. [`NamespaceRemote`] is the blocking
//! [`crate::Tier`] view of one namespace label, for tools and tests, never for the engine.

pub mod auth;
pub mod breaker;
mod endpoint;
pub mod events;
pub mod keys;
mod link;
mod options;
mod seen;
mod stats;
pub mod test_cluster;
pub mod test_server;
mod worker;

use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use memoria_kv::BlockHash;
use tokio::sync::{mpsc, oneshot};

pub use auth::RemoteKey;
pub use breaker::BreakerState;
pub use endpoint::{Endpoint, MAX_CLUSTER_NODES};
pub use options::{RemoteOptions, WriteMode};
pub use stats::{LATENCY_BOUNDS_US, Refusal, RemoteSnapshot, RemoteStats};
pub use worker::{GET_WINDOW, Lookup, MGET_RUN};

use crate::codec::BlockIdentity;
use crate::tier::Tier;
use worker::{Job, Reply, Shared, Write};

/// A handle on one Valkey/Redis server or Redis Cluster. Dropping it stops its thread (queued
/// writes get a bounded time to drain).
pub struct RemoteTier {
    shared: Arc<Shared>,
    jobs: mpsc::UnboundedSender<Job>,
    writes: mpsc::UnboundedSender<Write>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Hand-offs that feed this tier's writes (engines' intakes): [`RemoteTier::flush`] waits
    /// for what they were given first.
    upstream: Mutex<Vec<std::sync::Weak<crate::Intake>>>,
}

impl std::fmt::Debug for RemoteTier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteTier")
            .field("endpoint", &self.shared.opts.endpoint)
            .finish_non_exhaustive()
    }
}

impl RemoteTier {
    /// Checks `opts` and starts the tier's thread. Does not need the server to be up: a down
    /// server is a run of counted misses until it answers.
    pub fn start(opts: RemoteOptions) -> Result<Arc<RemoteTier>, String> {
        opts.validate()?;
        let key = opts
            .auth
            .clone()
            .ok_or_else(|| "store.remote.auth_key_file is not set".to_string())?;
        let connector = link::Connector::new(&opts.endpoint, opts.timeout())?;
        let shared = Arc::new(Shared::new(opts, key));
        let (jobs, jobs_rx) = mpsc::unbounded_channel();
        let (writes, writes_rx) = mpsc::unbounded_channel();
        let thread = worker::spawn(shared.clone(), connector, jobs_rx, writes_rx)
            .map_err(|e| format!("starting the remote tier's thread: {e}"))?;
        Ok(Arc::new(RemoteTier {
            shared,
            jobs,
            writes,
            thread: Mutex::new(Some(thread)),
            upstream: Mutex::new(Vec::new()),
        }))
    }

    /// The options it was started with.
    pub fn options(&self) -> &RemoteOptions {
        &self.shared.opts
    }

    /// Its figures.
    pub fn stats(&self) -> &Arc<RemoteStats> {
        &self.shared.stats
    }

    /// A plain copy of its figures.
    pub fn snapshot(&self) -> RemoteSnapshot {
        self.shared.stats.snapshot()
    }

    /// The breaker's state now.
    pub fn breaker_state(&self) -> BreakerState {
        self.shared.breaker_state()
    }

    /// The key of a block of the namespace labelled `label`.
    pub fn key(&self, label: &str, hash: &BlockHash) -> String {
        keys::block_key(&self.shared.opts.key_prefix, label, hash)
    }

    /// The key of the session saved as `name` by the namespace labelled `label`.
    pub fn session_key(&self, label: &str, name: &str) -> String {
        keys::session_key(&self.shared.opts.key_prefix, label, name)
    }

    /// Writes one already encoded value now (`SET key value EX ttl_s`, sealed with the hosts'
    /// key, not through the write-behind queue); `done` runs on the tier's thread with whether
    /// the server acknowledged it, or here with `false` when the tier has stopped (then this
    /// returns false too).
    pub fn set_then(
        &self,
        key: String,
        value: Vec<u8>,
        done: Box<dyn FnOnce(bool) + Send>,
    ) -> bool {
        let value = self.shared.key.seal(&key, value);
        match self.jobs.send(Job::Set { key, value, done }) {
            Ok(()) => true,
            Err(e) => {
                if let Job::Set { done, .. } = e.0 {
                    done(false);
                }
                false
            }
        }
    }

    /// The value stored under `key`, if its tag verifies under the hosts' key (else counted as
    /// refused, [`Refusal::Auth`], and left on the server: a host with the key overwrites it
    /// when it writes that block). Every value read must pass here before anything looks at it.
    pub fn open_value(&self, key: &str, stored: Vec<u8>) -> Option<Vec<u8>> {
        let v = self.shared.key.open(key, stored);
        if v.is_none() {
            self.shared.stats.refused(Refusal::Auth);
        }
        v
    }

    /// Counts a value refused after its tag verified (and deletes it: a host with the key wrote
    /// something no host can use under that key).
    pub(crate) fn refuse(&self, key: String, why: Refusal) {
        self.shared.stats.refused(why);
        self.delete(key);
    }

    /// The values under `keys`, in order (MGET in runs of [`MGET_RUN`]); with `leading`, keys
    /// after the first non-value are [`Lookup::Skipped`]. Never fails: a down server or a
    /// stopped tier answers [`Lookup::Failed`].
    pub async fn get_many(&self, keys: Vec<String>, leading: bool) -> Vec<Lookup> {
        let n = keys.len();
        let (tx, rx) = oneshot::channel();
        let job = Job::Get {
            keys,
            leading,
            run: MGET_RUN,
            reply: Reply::Async(tx),
        };
        if self.jobs.send(job).is_err() {
            return vec![Lookup::Failed; n];
        }
        rx.await.unwrap_or_else(|_| vec![Lookup::Failed; n])
    }

    /// [`RemoteTier::get_many`] answered run by run: MGETs of at most `run` keys (1..=
    /// [`MGET_RUN`]), several pipelined, each run's lookups received in key order as soon as it
    /// arrives, so the caller can verify one run while the next is on the wire. The receiver
    /// ends early (fewer lookups than keys) only if the tier stopped; treat the rest as failed.
    pub fn get_runs(
        &self,
        keys: Vec<String>,
        leading: bool,
        run: usize,
    ) -> mpsc::UnboundedReceiver<Vec<Lookup>> {
        let (tx, rx) = mpsc::unbounded_channel();
        let job = Job::Get {
            keys,
            leading,
            run,
            reply: Reply::Runs(tx),
        };
        // A stopped tier drops the job, and with it the sender: the receiver ends at once.
        let _ = self.jobs.send(job);
        rx
    }

    /// [`RemoteTier::get_many`] from a plain thread (never from async code or the engine).
    pub fn get_many_blocking(&self, keys: Vec<String>, leading: bool) -> Vec<Lookup> {
        let n = keys.len();
        let (tx, rx) = std::sync::mpsc::channel();
        let job = Job::Get {
            keys,
            leading,
            run: MGET_RUN,
            reply: Reply::Blocking(tx),
        };
        if self.jobs.send(job).is_err() {
            return vec![Lookup::Failed; n];
        }
        rx.recv_timeout(self.op_bound(n))
            .unwrap_or_else(|_| vec![Lookup::Failed; n])
    }

    fn op_bound(&self, keys: usize) -> Duration {
        let runs = u32::try_from(keys.div_ceil(MGET_RUN).max(1)).unwrap_or(u32::MAX);
        (self.shared.opts.timeout() * 3).saturating_mul(runs) + Duration::from_secs(1)
    }

    /// Deletes a key behind the caller (a bad value); counted when the server confirms.
    pub fn delete(&self, key: String) {
        let _ = self.jobs.send(Job::Delete { key, reply: None });
    }

    fn delete_blocking(&self, key: String) -> bool {
        let (tx, rx) = std::sync::mpsc::channel();
        if self
            .jobs
            .send(Job::Delete {
                key,
                reply: Some(tx),
            })
            .is_err()
        {
            return false;
        }
        rx.recv_timeout(self.op_bound(1)).unwrap_or(false)
    }

    /// Queues a block for writing (gathered for a short linger, encoded off the tier's thread
    /// in the shared form, `root` in the salt's place, written with `SET key value EX ttl_s`).
    /// Returns false, counted, when the queue's byte bound is reached. `data` is the block's
    /// raw bytes.
    pub fn put(
        &self,
        key: String,
        identity: BlockIdentity,
        root: BlockHash,
        tokens: &[u32],
        data: &[u8],
    ) -> bool {
        // Written now: no longer waiting to be written again.
        self.shared.seen.take_lost(&identity.hash);
        let st = &self.shared.stats;
        let len = data.len() as u64;
        let max = self.shared.opts.max_inflight_bytes as u64;
        let reserved = st
            .queue_bytes
            .try_update(Relaxed, Relaxed, |q| {
                q.checked_add(len).filter(|t| *t <= max)
            })
            .is_ok();
        if !reserved {
            RemoteStats::add(&st.writes_dropped, 1);
            return false;
        }
        RemoteStats::add(&st.queue_blocks, 1);
        let w = Write::Block(Box::new(worker::QueuedBlock {
            key,
            identity,
            root,
            tokens: tokens.to_vec(),
            data: data.to_vec(),
        }));
        if self.writes.send(w).is_err() {
            RemoteStats::sub(&st.queue_bytes, len);
            RemoteStats::sub(&st.queue_blocks, 1);
            RemoteStats::add(&st.writes_dropped, 1);
            return false;
        }
        // A pipeline's worth ends the write loop's linger.
        if st.queue_bytes.load(Relaxed) >= worker::WRITE_RUN_BYTES
            || st.queue_blocks.load(Relaxed) >= worker::WRITE_RUN as u64
        {
            self.shared.write_wake.notify_one();
        }
        true
    }

    /// Waits (at most `timeout`) until every write queued before this call, or handed to an
    /// engine's intake before it, was sent and answered (or dropped); returns whether that
    /// happened in time.
    pub fn flush(&self, timeout: Duration) -> bool {
        let upstream: Vec<_> = crate::sync::lock(&self.upstream)
            .iter()
            .filter_map(std::sync::Weak::upgrade)
            .collect();
        for i in upstream {
            i.wait_handled(i.sent());
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let sent = self.writes.send(Write::Barrier(tx)).is_ok();
        self.shared.write_wake.notify_one();
        sent && rx.recv_timeout(timeout).is_ok()
    }

    /// Makes [`RemoteTier::flush`] wait for `intake`'s jobs first.
    pub(crate) fn feed_from(&self, intake: &Arc<crate::Intake>) {
        let mut g = crate::sync::lock(&self.upstream);
        g.retain(|w| w.strong_count() > 0);
        g.push(Arc::downgrade(intake));
    }

    /// Whether the server acknowledged this host's write of the block or served it to this
    /// host, within half the keys' TTL, and it has not left this host since (so it is not
    /// written again, and a prefetch takes it to be held here).
    pub fn is_known(&self, hash: &BlockHash) -> bool {
        self.shared.seen.is_known(hash)
    }

    /// Records that the block is on the server (own write, remote hit).
    pub fn mark_known(&self, hash: &BlockHash) {
        self.shared.seen.mark_known(hash);
    }

    /// Forgets that the block is known: it left this host's tiers, so a later prompt looks it
    /// up on the server again instead of taking it to be held here.
    pub fn forget(&self, hash: &BlockHash) {
        self.shared.seen.forget(hash);
    }

    /// Records that a lookup found the block missing on the server (see [`RemoteTier::rewrite`]).
    pub fn mark_lost(&self, hash: &BlockHash) {
        self.shared.seen.mark_lost(hash);
    }

    /// Whether a lookup found blocks missing that no host has written again through this tier.
    pub fn any_lost(&self) -> bool {
        self.shared.seen.any_lost()
    }

    /// Writes a block this host holds again when a lookup found it missing on the server (it
    /// restarted, was flushed, or evicted it), whatever the write mode; returns whether it was
    /// queued. A block not found missing is left alone (false).
    pub fn rewrite(
        &self,
        key: String,
        identity: BlockIdentity,
        root: BlockHash,
        tokens: &[u32],
        data: &[u8],
    ) -> bool {
        if !self.shared.seen.take_lost(&identity.hash) {
            return false;
        }
        let queued = self.put(key, identity, root, tokens, data);
        if queued {
            RemoteStats::add(&self.shared.stats.rewrites, 1);
        }
        queued
    }

    /// Counts one sighting of a block; returns whether, per the write mode, it is to be
    /// written now (never for a block already known to be remote).
    pub fn should_write(&self, hash: &BlockHash) -> bool {
        if self.shared.seen.is_known(hash) {
            return false;
        }
        match self.shared.opts.write {
            WriteMode::All => true,
            WriteMode::SecondHit => self.shared.seen.sight(hash) >= 2,
        }
    }
}

impl Drop for RemoteTier {
    fn drop(&mut self) {
        let _ = self.writes.send(Write::Stop);
        self.shared.write_wake.notify_one();
        let _ = self.jobs.send(Job::Stop);
        let t = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(t) = t {
            let _ = t.join();
        }
    }
}

/// The blocking [`Tier`] view of one namespace label of a remote tier (tools and tests; the
/// engine reads through `TierStack::prefetch_remote`). `put` takes an already encoded value
/// and writes it at once (not through the write-behind queue).
#[derive(Debug, Clone)]
pub struct NamespaceRemote {
    pub remote: Arc<RemoteTier>,
    pub label: String,
}

impl NamespaceRemote {
    /// A view of `label` (checked: `[A-Za-z0-9._-]`, 1..=64 bytes).
    pub fn new(remote: Arc<RemoteTier>, label: &str) -> Result<Self, String> {
        keys::check_label(label)?;
        Ok(NamespaceRemote {
            remote,
            label: label.to_string(),
        })
    }
}

impl Tier for NamespaceRemote {
    fn name(&self) -> &'static str {
        "remote"
    }

    fn get(&self, hash: &BlockHash) -> Option<Vec<u8>> {
        self.get_many(std::slice::from_ref(hash)).pop().flatten()
    }

    fn get_many(&self, hashes: &[BlockHash]) -> Vec<Option<Vec<u8>>> {
        let keys: Vec<String> = hashes
            .iter()
            .map(|h| self.remote.key(&self.label, h))
            .collect();
        self.remote
            .get_many_blocking(keys.clone(), false)
            .into_iter()
            .zip(keys)
            .map(|(l, key)| match l {
                Lookup::Value(v) => self.remote.open_value(&key, v),
                _ => None,
            })
            .collect()
    }

    fn put(&self, hash: &BlockHash, encoded: Vec<u8>) {
        let (tx, rx) = std::sync::mpsc::channel();
        let key = self.remote.key(&self.label, hash);
        let done = Box::new(move |ok| {
            let _ = tx.send(ok);
        });
        if self.remote.set_then(key, encoded, done) {
            let _ = rx.recv_timeout(self.remote.op_bound(1));
        }
    }

    fn contains(&self, hash: &BlockHash) -> bool {
        self.get(hash).is_some()
    }

    fn remove(&self, hash: &BlockHash) -> bool {
        self.remote
            .delete_blocking(self.remote.key(&self.label, hash))
    }
}
