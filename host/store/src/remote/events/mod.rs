//! Host events for `memoria route --events`: each host tells a router what it holds
//! through the remote tier's server, never tokens.
//!
//! - Stream `{key_prefix}:events:{host id}` (`XADD .. MAXLEN ~ N`), entries with exactly the
//!   fields `epoch` (the host's run: unix ms at its start), `seq` (1, 2, ... within the epoch),
//!   `kind` (`stored`, `removed`, `cleared`), `tier` (`hot`, `cold`, `disk`: where the host now
//!   holds or no longer holds the blocks; see `crate::Residency`) and `hashes`
//!   (routing-chain block hashes, 64 hex digits each, comma separated; see
//!   `memoria_kv::route_key`: a public root, never a salt, so they say nothing a client did not
//!   send). A start publishes `cleared` under a new epoch ([`format`]).
//! - Liveness key `{key_prefix}:host:{host id}`, `SET .. EX ttl` and refreshed well before it
//!   expires, holding `{"addr": "http://host:port", "load": N, "epoch": E}` ([`liveness`]); a
//!   host whose key expired is gone from every router's table. Each refresh also adds the id
//!   to the set `{key_prefix}:hosts`, which routers read on a Redis Cluster (a SCAN sees one
//!   node) and prune of ids whose liveness key expired.
//!
//! [`Publisher`] is the host side (a bounded queue drained by a tokio task: nothing here runs
//! on the engine thread, and a full queue drops and counts), [`Follower`] the router side (SCAN
//! for liveness keys, XREAD from each stream's last id).

mod follow;
pub mod format;
pub mod liveness;
mod publish;

pub use follow::{Follower, LiveHost};
pub use format::{Event, Kind, StreamRead, Tier};
pub use liveness::Liveness;
pub use publish::{EventStats, EventsConfig, Publisher};

/// The stream of host `id`.
pub fn stream_key(prefix: &str, id: &str) -> String {
    format!("{prefix}:events:{id}")
}

/// The set of host ids that published a liveness key (how a router finds the hosts on a
/// Redis Cluster, where a SCAN sees one node).
pub fn hosts_key(prefix: &str) -> String {
    format!("{prefix}:hosts")
}

/// The liveness key of host `id`.
pub fn liveness_key(prefix: &str, id: &str) -> String {
    format!("{prefix}:host:{id}")
}

/// A host id from an advertised address (`http://127.0.0.1:8080` is `127.0.0.1_8080`):
/// characters outside `[A-Za-z0-9._-]` become `_`, cut to 64 bytes.
pub fn host_id_from(advertise: &str) -> String {
    let rest = advertise
        .strip_prefix("http://")
        .unwrap_or(advertise)
        .trim_end_matches('/');
    let mut id: String = rest
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(super::keys::MAX_LABEL)
        .collect();
    if id.is_empty() {
        id.push('_');
    }
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_ids() {
        assert_eq!(stream_key("memoria", "h1"), "memoria:events:h1");
        assert_eq!(liveness_key("memoria", "h1"), "memoria:host:h1");
        assert_eq!(hosts_key("memoria"), "memoria:hosts");
        assert_eq!(host_id_from("http://127.0.0.1:8080/"), "127.0.0.1_8080");
        assert_eq!(host_id_from(""), "_");
        assert!(super::super::keys::check_label(&host_id_from(&"x".repeat(99))).is_ok());
    }
}
