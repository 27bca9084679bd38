//! Health and load polling: every interval each backend's `GET /health` decides whether it is
//! up (200) or out of the routing table (anything else, or no answer), and `GET /stats` gives
//! its queue depth (the engine's queue plus every namespace's admission queue). A host whose
//! `/stats` needs a key the router was not given takes its queue depth from its liveness key
//! with `--events` (`Backend::liveness_load`), else keeps 0 (load then comes from the
//! router's own in-flight count alone).

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use serde_json::Value;

use super::table::{Backend, Table};
use super::upstream;

/// What the poller needs.
#[derive(Clone, Debug)]
pub struct PollConfig {
    pub interval: Duration,
    pub timeout: Duration,
    pub stats_key: Option<String>,
}

/// Polls every backend once, all at once.
pub async fn poll_all(table: &Arc<Table>, cfg: &PollConfig) {
    let tasks: Vec<_> = (0..table.backends.len())
        .map(|i| {
            let (table, cfg) = (table.clone(), cfg.clone());
            tokio::spawn(async move {
                if let Some(b) = table.backends.get(i) {
                    poll_one(b, &cfg).await;
                }
            })
        })
        .collect();
    for t in tasks {
        let _ = t.await;
    }
}

/// Polls every backend forever, one task each.
pub fn spawn(table: Arc<Table>, cfg: PollConfig) {
    for i in 0..table.backends.len() {
        let (table, cfg) = (table.clone(), cfg.clone());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(cfg.interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                if let Some(b) = table.backends.get(i) {
                    poll_one(b, &cfg).await;
                }
            }
        });
    }
}

async fn poll_one(b: &Backend, cfg: &PollConfig) {
    let open_before = b.inflight.load(Relaxed);
    let healthy = matches!(
        upstream::get(&b.authority, "/health", None, cfg.timeout).await,
        Ok((s, _)) if s.is_success()
    );
    b.up.store(healthy, Relaxed);
    if !healthy {
        return;
    }
    let depth = match upstream::get(
        &b.authority,
        "/stats",
        cfg.stats_key.as_deref(),
        cfg.timeout,
    )
    .await
    {
        Ok((s, body)) if s.is_success() => serde_json::from_slice::<Value>(&body)
            .ok()
            .map(|v| queue_depth(&v)),
        _ => None,
    };
    b.stats_seen.store(depth.is_some(), Relaxed);
    let Some(depth) = depth else {
        b.fallback_load();
        return;
    };
    let open_after = b.inflight.load(Relaxed);
    b.queue_depth.store(depth, Relaxed);
    b.others
        .store(others_load(depth, open_before, open_after), Relaxed);
}

/// A host's reported queue less this router's own requests on it. The report counts every
/// request the host runs or queues, this router's included; those are known exactly here (the
/// in-flight count) and go stale in the report the moment they finish. The larger of the
/// in-flight counts at the poll's start and end is taken, so a request that finished while the
/// poll was on its way is not left behind as someone else's load.
pub fn others_load(reported: u64, open_before: u64, open_after: u64) -> u64 {
    reported.saturating_sub(open_before.max(open_after))
}

/// `engine.queue_depth` plus every `admission[].queued` of a host's `/stats`, saturating.
pub fn queue_depth(stats: &Value) -> u64 {
    let engine = stats["engine"]["queue_depth"].as_u64().unwrap_or(0);
    let admission = stats["admission"].as_array().map_or(0, |gates| {
        gates
            .iter()
            .filter_map(|g| g["queued"].as_u64())
            .fold(0u64, u64::saturating_add)
    });
    engine.saturating_add(admission)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn own_requests_are_not_counted_as_others_load() {
        // Our one request was on the host while it answered: nobody else's.
        assert_eq!(others_load(1, 1, 1), 0);
        // It finished while the poll was on its way: still ours.
        assert_eq!(others_load(1, 1, 0), 0);
        // Sent after the host answered: the report cannot hold it.
        assert_eq!(others_load(0, 0, 1), 0);
        // Three from elsewhere beside our two.
        assert_eq!(others_load(5, 2, 2), 3);
        assert_eq!(others_load(u64::MAX, 0, 0), u64::MAX);
    }

    #[test]
    fn queue_depth_sums_engine_and_admission() {
        let v = json!({"engine": {"queue_depth": 2},
                       "admission": [{"queued": 3}, {"queued": u64::MAX}, {"running": 1}]});
        assert_eq!(queue_depth(&v), u64::MAX);
        assert_eq!(queue_depth(&json!({"engine": {"queue_depth": 4}})), 4);
        assert_eq!(queue_depth(&json!("nonsense")), 0);
    }
}
