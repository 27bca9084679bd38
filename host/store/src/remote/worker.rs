//! The remote tier's network side: one thread running a single-threaded tokio runtime that
//! owns the connection (a [`Link`]: a redis-rs `ConnectionManager` to one server or a cluster
//! connection, created when the breaker allows and dropped when it opens). Reads arrive as jobs
//! and run as concurrent tasks: MGET in runs of at most [`MGET_RUN`] keys, [`GET_WINDOW`] runs
//! pipelined, answered run by run. Writes drain from their own queue in pipelines of `SET .. EX`
//! bounded in count and bytes, encoded (LZ4, checksum, the hosts' tag: `auth`) on a blocking
//! thread so reads never wait behind the encoder.
//! Every operation is bounded by the configured timeout and reported to the breaker; nothing
//! here ever returns an error to a request, only counted misses.

use std::future::Future;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};

use super::auth::RemoteKey;
use super::breaker::{Breaker, BreakerState};
use super::link::{Connector, Link};
use super::options::RemoteOptions;
use super::seen::Seen;
use super::stats::RemoteStats;
use crate::codec::{self, BlockIdentity, Encoding};
use memoria_kv::BlockHash;

/// Most keys in one MGET.
pub const MGET_RUN: usize = 64;
/// MGET runs of one lookup in flight at once (pipelined on the one connection): with one
/// block per run (see `FETCH_RUN_BYTES`), about 3.5 MB of a 110M model's K/V.
pub const GET_WINDOW: usize = 6;
/// Most writes in one pipeline.
pub(crate) const WRITE_RUN: usize = 64;
/// Raw bytes past which a write pipeline is sent (at least one block): the server's query
/// buffer and a read queued behind the pipeline wait for at most about this much.
pub(crate) const WRITE_RUN_BYTES: u64 = 4 << 20;

/// One key's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// The stored bytes, tag included (not yet verified: see `RemoteTier::open_value`).
    Value(Vec<u8>),
    /// The server holds no such key.
    Absent,
    /// Not fetched: timeout, connection error or open breaker (counted by reason).
    Failed,
    /// Not asked for: an earlier key of a leading-run lookup was absent or failed.
    Skipped,
}

pub(crate) enum Reply {
    Async(oneshot::Sender<Vec<Lookup>>),
    Blocking(std::sync::mpsc::Sender<Vec<Lookup>>),
    /// One message per MGET run, in key order, as each arrives.
    Runs(mpsc::UnboundedSender<Vec<Lookup>>),
}

impl Reply {
    /// Answers the lookup of `keys` (see [`get`]): run by run, or whole.
    async fn answer(
        self,
        s: &Arc<Shared>,
        c: &Arc<Conn>,
        keys: Vec<String>,
        leading: bool,
        run: usize,
    ) {
        match self {
            // A receiver gone (its prefetch passed its deadline) wants no more runs.
            Reply::Runs(tx) => get(s, c, keys, leading, run, |v| tx.send(v).is_ok()).await,
            whole => {
                let mut out = Vec::with_capacity(keys.len());
                get(s, c, keys, leading, run, |v| {
                    out.extend(v);
                    true
                })
                .await;
                whole.send(out);
            }
        }
    }

    fn send(self, v: Vec<Lookup>) {
        match self {
            Reply::Async(tx) => {
                let _ = tx.send(v);
            }
            Reply::Blocking(tx) => {
                let _ = tx.send(v);
            }
            Reply::Runs(tx) => {
                let _ = tx.send(v);
            }
        }
    }
}

pub(crate) enum Job {
    /// `leading`: stop after the first key that is not a value; `run`: most keys per MGET.
    Get {
        keys: Vec<String>,
        leading: bool,
        run: usize,
        reply: Reply,
    },
    Delete {
        key: String,
        reply: Option<std::sync::mpsc::Sender<bool>>,
    },
    /// One already encoded value, written now (the blocking `Tier` view, saved sessions);
    /// `done` runs on the tier's thread with whether the server acknowledged it.
    Set {
        key: String,
        value: Vec<u8>,
        done: Box<dyn FnOnce(bool) + Send>,
    },
    Stop,
}

pub(crate) enum Write {
    Block {
        key: String,
        identity: BlockIdentity,
        tokens: Vec<u32>,
        data: Vec<u8>,
    },
    Barrier(std::sync::mpsc::Sender<()>),
    Stop,
}

impl Write {
    /// The raw bytes it carries (a block's), 0 for the others.
    fn raw_bytes(&self) -> u64 {
        match self {
            Write::Block { data, .. } => data.len() as u64,
            _ => 0,
        }
    }
}

/// State shared by the tier's handle and its thread.
pub(crate) struct Shared {
    pub opts: RemoteOptions,
    /// Every value written is sealed with it, every value read opened with it.
    pub key: RemoteKey,
    pub stats: Arc<RemoteStats>,
    pub seen: Seen,
    /// Wakes the write loop's linger early: a pipeline's worth queued, a flush, a stop.
    pub write_wake: tokio::sync::Notify,
    breaker: Mutex<Breaker>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fail {
    Timeout,
    Error,
    Breaker,
}

impl Shared {
    pub fn new(opts: RemoteOptions, key: RemoteKey) -> Self {
        let ms = Duration::from_millis;
        let breaker = Breaker::new(
            opts.breaker_threshold,
            ms(opts.breaker_min_backoff_ms),
            ms(opts.breaker_max_backoff_ms),
        );
        // Known for half the keys' TTL: a block still in use is written again before it expires.
        let seen = Seen::new(Duration::from_secs(opts.ttl_s) / 2);
        Shared {
            opts,
            key,
            stats: Arc::new(RemoteStats::default()),
            seen,
            write_wake: tokio::sync::Notify::new(),
            breaker: Mutex::new(breaker),
        }
    }

    fn breaker(&self) -> MutexGuard<'_, Breaker> {
        self.breaker.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn breaker_state(&self) -> BreakerState {
        self.breaker().state()
    }

    fn publish(&self, b: &Breaker) {
        self.stats.breaker.store(b.state().code(), Relaxed);
        self.stats.breaker_opens.store(b.opens(), Relaxed);
    }

    fn allow(&self) -> bool {
        let mut b = self.breaker();
        let ok = b.allow(Instant::now());
        self.publish(&b);
        ok
    }

    fn success(&self) {
        let mut b = self.breaker();
        b.success();
        self.publish(&b);
    }

    /// Returns whether the breaker is now open.
    fn failure(&self) -> bool {
        let mut b = self.breaker();
        let was_open = b.state() == BreakerState::Open;
        let open = b.failure(Instant::now());
        self.publish(&b);
        drop(b);
        if open && !was_open {
            self.seen.forget_known();
        }
        open
    }
}

struct Conn {
    connector: Connector,
    slot: tokio::sync::Mutex<Option<Link>>,
}

fn classify(e: &redis::RedisError) -> Fail {
    if e.is_timeout() {
        Fail::Timeout
    } else {
        Fail::Error
    }
}

impl Conn {
    async fn get(&self, timeout: Duration) -> Result<Link, Fail> {
        let mut g = self.slot.lock().await;
        if let Some(c) = &*g {
            return Ok(c.clone());
        }
        match tokio::time::timeout(timeout * 2, self.connector.connect(timeout)).await {
            Ok(Ok(c)) => {
                *g = Some(c.clone());
                Ok(c)
            }
            Ok(Err(e)) => Err(classify(&e)),
            Err(_) => Err(Fail::Timeout),
        }
    }
}

/// Runs `op` on the connection if the breaker allows, bounded by the timeout, and reports the
/// outcome to the breaker (an opening breaker drops the connection).
async fn guarded<T, F, Fut>(shared: &Shared, conn: &Conn, op: F) -> Result<T, Fail>
where
    F: FnOnce(Link) -> Fut,
    Fut: Future<Output = redis::RedisResult<T>>,
{
    guarded_with(shared, conn, op, |_| true).await
}

/// [`guarded`], where an answer `healthy` rejects (a cluster write some slots refused) still
/// returns, but counts as a failure for the breaker.
async fn guarded_with<T, F, Fut>(
    shared: &Shared,
    conn: &Conn,
    op: F,
    healthy: impl FnOnce(&T) -> bool,
) -> Result<T, Fail>
where
    F: FnOnce(Link) -> Fut,
    Fut: Future<Output = redis::RedisResult<T>>,
{
    if !shared.allow() {
        return Err(Fail::Breaker);
    }
    let t = shared.opts.timeout();
    let r = match conn.get(t).await {
        Ok(c) => match tokio::time::timeout(t, op(c)).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(classify(&e)),
            Err(_) => Err(Fail::Timeout),
        },
        Err(f) => Err(f),
    };
    if r.as_ref().is_ok_and(healthy) {
        shared.success();
    } else {
        RemoteStats::add(&shared.stats.errors, 1);
        if shared.failure() {
            *conn.slot.lock().await = None;
        }
    }
    r
}

/// Spawns the tier's thread; it runs until both queues receive `Stop`.
pub(crate) fn spawn(
    shared: Arc<Shared>,
    connector: Connector,
    jobs: mpsc::UnboundedReceiver<Job>,
    writes: mpsc::UnboundedReceiver<Write>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    // Blocking threads only encode writes: background work (reads stay on this thread).
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .on_thread_start(memoria_kv::background::lower_this_thread)
        .build()?;
    std::thread::Builder::new()
        .name("memoria-remote".into())
        .spawn(move || rt.block_on(run(shared, connector, jobs, writes)))
}

async fn run(
    shared: Arc<Shared>,
    connector: Connector,
    mut jobs: mpsc::UnboundedReceiver<Job>,
    writes: mpsc::UnboundedReceiver<Write>,
) {
    let conn = Arc::new(Conn {
        connector,
        slot: tokio::sync::Mutex::new(None),
    });
    let writer = tokio::spawn(write_loop(shared.clone(), conn.clone(), writes));
    let sizer = tokio::spawn(size_loop(shared.clone(), conn.clone()));
    while let Some(job) = jobs.recv().await {
        match job {
            Job::Get {
                keys,
                leading,
                run,
                reply,
            } => {
                let (s, c) = (shared.clone(), conn.clone());
                tokio::spawn(async move { reply.answer(&s, &c, keys, leading, run).await });
            }
            Job::Delete { key, reply } => {
                let (s, c) = (shared.clone(), conn.clone());
                tokio::spawn(async move {
                    let r = guarded(&s, &c, |mut m| async move {
                        redis::cmd("DEL").arg(&key).query_async::<u64>(&mut m).await
                    })
                    .await;
                    let n = r.unwrap_or(0);
                    RemoteStats::add(&s.stats.deletes, n);
                    if let Some(tx) = reply {
                        let _ = tx.send(n > 0);
                    }
                });
            }
            Job::Set { key, value, done } => {
                let (s, c) = (shared.clone(), conn.clone());
                tokio::spawn(async move {
                    let (n, ttl) = (value.len() as u64, s.opts.ttl_s);
                    let r = guarded(&s, &c, |mut m| async move {
                        redis::cmd("SET")
                            .arg(&key)
                            .arg(value)
                            .arg("EX")
                            .arg(ttl)
                            .query_async::<()>(&mut m)
                            .await
                    })
                    .await;
                    if r.is_ok() {
                        RemoteStats::add(&s.stats.writes, 1);
                        RemoteStats::add(&s.stats.bytes_written, n);
                    } else {
                        RemoteStats::add(&s.stats.write_errors, 1);
                    }
                    done(r.is_ok());
                });
            }
            Job::Stop => break,
        }
    }
    sizer.abort();
    // Queued writes get a bounded time to drain (an open breaker drops them at once).
    let _ = tokio::time::timeout(Duration::from_secs(2), writer).await;
}

/// How often the server's size is read for `/stats` (the status page's remote bar).
const SIZE_POLL: Duration = Duration::from_secs(2);

/// Reads the server's key count (`DBSIZE`) and `used_memory` every [`SIZE_POLL`] while the
/// breaker is closed (a cluster's: summed over its primaries). A failed poll changes nothing: not
/// the breaker, not the counters (the figures are for people; lookups and writes judge the
/// server's health). A key count that fell by half or more since the last poll takes every
/// block known to be on the server to be missing (counted in `server_losses`).
async fn size_loop(shared: Arc<Shared>, conn: Arc<Conn>) {
    let mut tick = tokio::time::interval(SIZE_POLL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if shared.breaker_state() != BreakerState::Closed {
            continue;
        }
        let t = shared.opts.timeout();
        let Ok(mut m) = conn.get(t).await else {
            continue;
        };
        let poll = async {
            let keys: u64 = redis::cmd("DBSIZE").query_async(&mut m).await?;
            let bytes = m.used_memory().await?;
            redis::RedisResult::Ok((keys, bytes))
        };
        if let Ok(Ok((keys, bytes))) = tokio::time::timeout(t, poll).await {
            let before = shared.stats.server_keys.swap(keys, Relaxed);
            shared.stats.server_bytes.store(bytes, Relaxed);
            if lost_most(before, keys) {
                // Restarted or flushed: what this host wrote or read there is likely gone; it
                // writes those blocks again when it next uses them.
                shared.seen.known_lost();
                RemoteStats::add(&shared.stats.server_losses, 1);
            }
        }
    }
}

/// Whether the server's key count fell by half or more between two polls (`before` 0: the
/// first poll, or an empty server before too).
fn lost_most(before: u64, now: u64) -> bool {
    before > 0 && now <= before / 2
}

/// Looks `keys` up in MGET runs of at most `run` keys, [`GET_WINDOW`] at a time, handing
/// each run's answers to `sink` in key order; with `leading`, once a run holds a non-value the
/// answers of runs still in flight are discarded and every later key is [`Lookup::Skipped`].
/// A sink that returns false wants no more: no further run is sent. The whole lookup is one
/// observation of the fetch latency.
async fn get(
    shared: &Arc<Shared>,
    conn: &Arc<Conn>,
    keys: Vec<String>,
    leading: bool,
    run: usize,
    mut sink: impl FnMut(Vec<Lookup>) -> bool,
) {
    let start = Instant::now();
    let run = run.clamp(1, MGET_RUN);
    let mut keys = keys.into_iter();
    let mut left = keys.len();
    let mut inflight = std::collections::VecDeque::with_capacity(GET_WINDOW);
    loop {
        while inflight.len() < GET_WINDOW && left > 0 {
            let batch: Vec<String> = keys.by_ref().take(run).collect();
            left -= batch.len();
            let (n, s, c) = (batch.len(), shared.clone(), conn.clone());
            inflight.push_back((n, tokio::spawn(async move { mget(&s, &c, batch).await })));
        }
        let Some((n, task)) = inflight.pop_front() else {
            break;
        };
        let answers = task.await.unwrap_or_else(|_| vec![Lookup::Failed; n]);
        let stop = leading && answers.iter().any(|l| !matches!(l, Lookup::Value(_)));
        if stop || (left == 0 && inflight.is_empty()) {
            // Observed before the last answer goes out: whoever received it sees the count.
            observe(shared, start);
        }
        let wanted = sink(answers);
        if stop || !wanted {
            let skipped = left + inflight.iter().map(|(n, _)| n).sum::<usize>();
            // Runs already sent finish detached (never aborted: one may be the breaker's probe).
            inflight.clear();
            if wanted && skipped > 0 {
                sink(vec![Lookup::Skipped; skipped]);
            }
            break;
        }
    }
}

fn observe(shared: &Shared, start: Instant) {
    let us = u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX);
    shared.stats.observe_fetch(us);
}

/// One MGET, counted: its values and absent keys, or every key failed by reason.
async fn mget(shared: &Shared, conn: &Conn, run: Vec<String>) -> Vec<Lookup> {
    let st = &shared.stats;
    let n = run.len();
    let run = &run;
    RemoteStats::add(&st.mget_runs, 1);
    let r = guarded(shared, conn, |mut m| async move {
        redis::cmd("MGET")
            .arg(run)
            .query_async::<Vec<Option<Vec<u8>>>>(&mut m)
            .await
    })
    .await;
    match r {
        Ok(vals) if vals.len() == n => vals
            .into_iter()
            .map(|v| match v {
                Some(b) => {
                    RemoteStats::add(&st.bytes_read, b.len() as u64);
                    Lookup::Value(b)
                }
                None => {
                    RemoteStats::add(&st.miss_absent, 1);
                    Lookup::Absent
                }
            })
            .collect(),
        other => {
            let counter = match other {
                Err(Fail::Timeout) => &st.miss_timeout,
                Err(Fail::Breaker) => &st.miss_breaker,
                _ => &st.miss_error,
            };
            RemoteStats::add(counter, n as u64);
            vec![Lookup::Failed; n]
        }
    }
}

/// The shared-form values of queued blocks, sealed under their keys; one that does not encode
/// is left out.
fn encode_all(
    blocks: Vec<(String, BlockIdentity, Vec<u32>, Vec<u8>)>,
    auth: &RemoteKey,
) -> Vec<(String, Vec<u8>, BlockHash)> {
    blocks
        .into_iter()
        .filter_map(|(key, identity, tokens, data)| {
            let v = codec::encode_shared(&identity, &tokens, &data, Encoding::Lz4).ok()?;
            let v = auth.seal(&key, v);
            Some((key, v, identity.hash))
        })
        .collect()
}

async fn write_loop(shared: Arc<Shared>, conn: Arc<Conn>, mut rx: mpsc::UnboundedReceiver<Write>) {
    let st = shared.stats.clone();
    let ttl = shared.opts.ttl_s;
    loop {
        let Some(first) = rx.recv().await else { return };
        // The linger (`write_linger_ms`): a decoding session seals a block every few dozen
        // steps, and each send wakes this thread, the encoder and the server on the cores the
        // engine's threads spin on, so fewer, larger sends cost decode less.
        let linger_until = tokio::time::Instant::now() + shared.opts.write_linger();
        let mut bytes = first.raw_bytes();
        let mut urgent = !matches!(first, Write::Block { .. });
        let mut batch = vec![first];
        loop {
            while batch.len() < WRITE_RUN && bytes < WRITE_RUN_BYTES {
                match rx.try_recv() {
                    Ok(w) => {
                        bytes += w.raw_bytes();
                        urgent |= !matches!(w, Write::Block { .. });
                        batch.push(w);
                    }
                    Err(_) => break,
                }
            }
            let full = batch.len() >= WRITE_RUN || bytes >= WRITE_RUN_BYTES;
            if urgent || full || tokio::time::Instant::now() >= linger_until {
                break;
            }
            tokio::select! {
                () = tokio::time::sleep_until(linger_until) => {}
                () = shared.write_wake.notified() => {}
            }
        }
        let mut blocks = Vec::new();
        let mut barriers = Vec::new();
        let mut stop = false;
        for w in batch {
            match w {
                Write::Block {
                    key,
                    identity,
                    tokens,
                    data,
                } => {
                    RemoteStats::sub(&st.queue_bytes, data.len() as u64);
                    RemoteStats::sub(&st.queue_blocks, 1);
                    blocks.push((key, identity, tokens, data));
                }
                Write::Barrier(tx) => barriers.push(tx),
                Write::Stop => stop = true,
            }
        }
        // Encoding (LZ4, checksum) runs on a blocking thread so reads keep flowing meanwhile.
        // An encoder that panicked loses its blocks: dropped and counted, as a lossy cache does.
        let n_blocks = blocks.len() as u64;
        let auth = shared.key.clone();
        let sets = tokio::task::spawn_blocking(move || encode_all(blocks, &auth))
            .await
            .unwrap_or_default();
        RemoteStats::add(&st.writes_dropped, n_blocks - sets.len() as u64);
        if !sets.is_empty() {
            let n = sets.len() as u64;
            let (kv, hashes): (Vec<_>, Vec<_>) =
                sets.into_iter().map(|(k, v, h)| ((k, v), h)).unzip();
            let kv = &kv;
            let r = guarded_with(
                &shared,
                &conn,
                |mut m| async move { m.set_many(kv, ttl).await },
                |acked| !acked.contains(&false),
            )
            .await;
            match r {
                Ok(acked) => {
                    for ((acked, (_, v)), h) in acked.into_iter().zip(kv).zip(&hashes) {
                        if acked {
                            RemoteStats::add(&st.writes, 1);
                            RemoteStats::add(&st.bytes_written, v.len() as u64);
                            shared.seen.mark_known(h);
                        } else {
                            RemoteStats::add(&st.write_errors, 1);
                        }
                    }
                }
                Err(Fail::Breaker) => RemoteStats::add(&st.writes_dropped, n),
                Err(_) => RemoteStats::add(&st.write_errors, n),
            }
        }
        for b in barriers {
            let _ = b.send(());
        }
        if stop {
            return;
        }
    }
}
