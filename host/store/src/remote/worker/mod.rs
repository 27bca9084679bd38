//! The remote tier's network side: one thread running a single-threaded tokio runtime that
//! owns the connection (a [`Link`]: a redis-rs `ConnectionManager` to one server or a cluster
//! connection, created when the breaker allows and dropped when it opens). Reads arrive as jobs
//! and run as concurrent tasks: MGET in runs of at most [`MGET_RUN`] keys, [`GET_WINDOW`] runs
//! pipelined, answered run by run. Writes drain from their own queue in pipelines of `SET .. EX`
//! bounded in count and bytes, encoded (LZ4, checksum, the hosts' tag: `auth`) on a blocking
//! thread so reads never wait behind the encoder.
//! Every operation is bounded by the configured timeout and reported to the breaker; nothing
//! here ever returns an error to a request, only counted misses. This module holds the thread,
//! its connection and breaker; lookups are in `reads`, writes in `writes`, the size poll in
//! `size`.

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

mod reads;
mod size;
mod writes;

pub(crate) use reads::Reply;
pub use reads::{GET_WINDOW, Lookup, MGET_RUN};
use size::size_loop;
use writes::write_loop;
pub(crate) use writes::{QueuedBlock, WRITE_RUN, WRITE_RUN_BYTES, Write};

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
        crate::sync::lock(&self.breaker)
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
