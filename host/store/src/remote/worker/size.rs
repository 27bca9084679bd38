//! The server's size for `/stats`: its key count and memory, polled while the breaker is closed,
//! and the loss of most keys (a flushed or restarted server) detected between polls.

use super::*;

/// How often the server's size is read for `/stats` (the status page's remote bar).
const SIZE_POLL: Duration = Duration::from_secs(2);

/// Reads the server's key count (`DBSIZE`) and `used_memory` every [`SIZE_POLL`] while the
/// breaker is closed (a cluster's: summed over its primaries). A failed poll changes nothing: not
/// the breaker, not the counters (the figures are for people; lookups and writes judge the
/// server's health). A key count that fell by half or more since the last poll takes every
/// block known to be on the server to be missing (counted in `server_losses`).
pub(super) async fn size_loop(shared: Arc<Shared>, conn: Arc<Conn>) {
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
pub(super) fn lost_most(before: u64, now: u64) -> bool {
    before > 0 && now <= before / 2
}
