//! Following the hosts' events (`--events redis://...`): every interval, the live hosts are
//! found by their liveness keys and matched to `--backend` URLs by address; a backend without
//! one is not live (it leaves the routing table, its keys forgotten), one whose `/stats` the
//! router cannot read takes its load from the key; each live backend's
//! stream is read on from where the last read stopped, a new epoch starting its set over.
//! Entries that do not parse are skipped and counted; Redis errors are counted and the table
//! is left as it was until the next round.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use memoria_store::remote::events::Follower;

use super::table::{Backend, Table};

/// Entries read per stream per round.
const READ_COUNT: usize = 4096;

/// The follower's counters (in the router's `/metrics`).
#[derive(Debug, Default)]
pub struct EventCounters {
    /// Events applied.
    pub applied: AtomicU64,
    /// Entries, liveness values or reply parts that did not parse.
    pub skipped: AtomicU64,
    /// Rounds a Redis command failed in.
    pub errors: AtomicU64,
    /// Live hosts that match no `--backend`.
    pub unknown_hosts: AtomicU64,
}

/// `http://host:port` as the table writes backend URLs, or None.
fn normalize(addr: &str) -> Option<String> {
    Backend::parse(addr).ok().map(|b| b.url)
}

/// One round: discovery, then a read of every live stream.
pub async fn round(f: &mut Follower, table: &Table, c: &EventCounters) {
    let (hosts, bad) = match f.hosts().await {
        Ok(h) => h,
        Err(_) => {
            c.errors.fetch_add(1, Relaxed);
            return;
        }
    };
    c.skipped.fetch_add(bad, Relaxed);
    let mut live = vec![None; table.backends.len()];
    for h in &hosts {
        let at = normalize(&h.liveness.addr)
            .and_then(|u| table.backends.iter().position(|b| b.url == u));
        match at {
            Some(i) => live[i] = Some(h),
            None => {
                c.unknown_hosts.fetch_add(1, Relaxed);
            }
        }
    }
    let mut from = Vec::new();
    for (b, h) in table.backends.iter().zip(&live) {
        let Ok(mut keys) = b.keys.lock() else {
            continue;
        };
        match h {
            Some(h) => {
                b.liveness_load(h.liveness.load);
                keys.follow(&h.stream, h.liveness.epoch);
                from.push((h.stream.clone(), keys.last_id.clone()));
            }
            None => keys.forget(),
        }
        b.live.store(h.is_some(), Relaxed);
    }
    let (streams, bad) = match f.read(&from, READ_COUNT).await {
        Ok(r) => r,
        Err(_) => {
            c.errors.fetch_add(1, Relaxed);
            return;
        }
    };
    c.skipped.fetch_add(bad, Relaxed);
    for (stream, read) in streams {
        c.skipped.fetch_add(read.skipped, Relaxed);
        for b in &table.backends {
            let Ok(mut keys) = b.keys.lock() else {
                continue;
            };
            if keys.stream.as_deref() != Some(stream.as_str()) {
                continue;
            }
            for e in &read.events {
                keys.apply(e);
            }
            c.applied.fetch_add(read.events.len() as u64, Relaxed);
            if let Some(id) = &read.last_id {
                keys.last_id = id.clone();
            }
        }
    }
}

/// Follows forever, one round per `interval`.
pub fn spawn(mut f: Follower, table: Arc<Table>, counters: Arc<EventCounters>, interval: Duration) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            round(&mut f, &table, &counters).await;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_normalize_like_backends() {
        assert_eq!(
            normalize("http://127.0.0.1:80/").as_deref(),
            Some("http://127.0.0.1:80")
        );
        assert_eq!(normalize("http://h").as_deref(), Some("http://h:80"));
        assert_eq!(normalize("nonsense"), None);
    }
}
