//! Lookups on the remote tier: MGET in runs of at most [`MGET_RUN`] keys, [`GET_WINDOW`] runs
//! pipelined, answered run by run or whole, each key a value, absent, failed or skipped.

use super::*;

/// Most keys in one MGET.
pub const MGET_RUN: usize = 64;
/// MGET runs of one lookup in flight at once (pipelined on the one connection): with one
/// block per run (see `FETCH_RUN_BYTES`), about 3.5 MB of a 110M model's K/V.
pub const GET_WINDOW: usize = 6;

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
    pub(super) async fn answer(
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

/// Looks `keys` up in MGET runs of at most `run` keys, [`GET_WINDOW`] at a time, handing
/// each run's answers to `sink` in key order; with `leading`, once a run holds a non-value the
/// answers of runs still in flight are discarded and every later key is [`Lookup::Skipped`].
/// A sink that returns false wants no more: no further run is sent. The whole lookup is one
/// observation of the fetch latency.
pub(super) async fn get(
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

pub(super) fn observe(shared: &Shared, start: Instant) {
    let us = u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX);
    shared.stats.observe_fetch(us);
}

/// One MGET, counted: its values and absent keys, or every key failed by reason.
pub(super) async fn mget(shared: &Shared, conn: &Conn, run: Vec<String>) -> Vec<Lookup> {
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
