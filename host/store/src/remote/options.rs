//! How the remote tier is configured (`[store.remote]`, `--remote URL`, `--remote-cluster`):
//! plain data with defaults, checked by [`RemoteOptions::validate`] before anything connects.

use std::time::Duration;

use super::auth::{KEY_HINT, RemoteKey};
use super::endpoint::Endpoint;
use super::keys::check_label;

/// Which sealed blocks are written to the remote tier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum WriteMode {
    /// Every sealed block (once: a block known to be remote is not written again).
    #[default]
    All,
    /// A block is written on its second sighting on this host (sealed, hit or evicted), so
    /// one-off prompts do not fill the shared tier.
    SecondHit,
}

impl WriteMode {
    /// Parses `all` or `second-hit`.
    pub fn parse(s: &str) -> Option<WriteMode> {
        match s {
            "all" => Some(WriteMode::All),
            "second-hit" => Some(WriteMode::SecondHit),
            _ => None,
        }
    }
}

/// The remote tier's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteOptions {
    /// One server (`redis://host:port[/db]`, Valkey or Redis) or a Redis Cluster's seed nodes.
    pub endpoint: Endpoint,
    /// Expiry of every written key, seconds (at least 1).
    pub ttl_s: u64,
    /// First component of every key.
    pub key_prefix: String,
    /// Bound on one network operation (connect, MGET run, write pipeline).
    pub timeout_ms: u64,
    /// Bytes the write-behind queue may hold (a full queue drops writes), and bytes of fetched
    /// blocks staged for the engine (one prefetch asks for no more than fit).
    pub max_inflight_bytes: usize,
    /// Which blocks are written.
    pub write: WriteMode,
    /// How long the write-behind loop gathers blocks after the first before sending them
    /// (unless a 4 MiB pipeline's worth is queued or a flush waits), milliseconds; 0 sends at
    /// once. Fewer, larger sends wake fewer threads on the engine's cores.
    pub write_linger_ms: u64,
    /// First wait of the circuit breaker once open; doubles per failed probe.
    pub breaker_min_backoff_ms: u64,
    /// Longest wait of the circuit breaker.
    pub breaker_max_backoff_ms: u64,
    /// Consecutive failures that open the breaker.
    pub breaker_threshold: u32,
    /// The key every value is authenticated with (`auth_key_file`); required.
    pub auth: Option<RemoteKey>,
}

impl Default for RemoteOptions {
    fn default() -> Self {
        RemoteOptions {
            endpoint: Endpoint::Server("redis://127.0.0.1:6379".into()),
            ttl_s: 24 * 3600,
            key_prefix: "memoria".into(),
            timeout_ms: 200,
            max_inflight_bytes: 256 << 20,
            write: WriteMode::All,
            write_linger_ms: 250,
            breaker_min_backoff_ms: 250,
            breaker_max_backoff_ms: 30_000,
            breaker_threshold: 3,
            auth: None,
        }
    }
}

/// Largest accepted timeout and backoff (one hour): a bound on numbers from configuration.
const MAX_MS: u64 = 3_600_000;
/// Longest accepted write linger (one minute).
const MAX_LINGER_MS: u64 = 60_000;
/// Longest accepted TTL (one year).
const MAX_TTL_S: u64 = 366 * 24 * 3600;

impl RemoteOptions {
    /// Defaults with one server at `url`.
    pub fn with_url(url: impl Into<String>) -> Self {
        RemoteOptions {
            endpoint: Endpoint::Server(url.into()),
            ..Self::default()
        }
    }

    /// Defaults with a Redis Cluster reached through `nodes` (seed node URLs).
    pub fn with_cluster<S: Into<String>>(nodes: impl IntoIterator<Item = S>) -> Self {
        RemoteOptions {
            endpoint: Endpoint::Cluster(nodes.into_iter().map(Into::into).collect()),
            ..Self::default()
        }
    }

    /// The per-operation timeout.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }

    /// The write-behind linger.
    pub fn write_linger(&self) -> Duration {
        Duration::from_millis(self.write_linger_ms)
    }

    /// Checks every field; the message names the field.
    pub fn validate(&self) -> Result<(), String> {
        self.endpoint.validate()?;
        if self.ttl_s == 0 || self.ttl_s > MAX_TTL_S {
            return Err(format!("store.remote.ttl_s must be 1..={MAX_TTL_S}"));
        }
        check_label(&self.key_prefix).map_err(|e| format!("store.remote.key_prefix: {e}"))?;
        for (name, v) in [
            ("timeout_ms", self.timeout_ms),
            ("breaker_min_backoff_ms", self.breaker_min_backoff_ms),
            ("breaker_max_backoff_ms", self.breaker_max_backoff_ms),
        ] {
            if v == 0 || v > MAX_MS {
                return Err(format!("store.remote.{name} must be 1..={MAX_MS}"));
            }
        }
        if self.write_linger_ms > MAX_LINGER_MS {
            return Err(format!(
                "store.remote.write_linger_ms must be 0..={MAX_LINGER_MS}"
            ));
        }
        if self.breaker_min_backoff_ms > self.breaker_max_backoff_ms {
            return Err("store.remote.breaker_min_backoff_ms exceeds the maximum".into());
        }
        if self.breaker_threshold == 0 {
            return Err("store.remote.breaker_threshold must be at least 1".into());
        }
        if self.max_inflight_bytes == 0 {
            return Err("store.remote.max_inflight_bytes must be positive".into());
        }
        if self.auth.is_none() {
            return Err(format!(
                "store.remote.auth_key_file (or --remote-key-file) is not set: the remote tier \
                 authenticates every value with a key its hosts share and the server never sees \
                 (anyone who can write to the server could otherwise change what hosts compute \
                 with); {KEY_HINT}"
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate_and_bad_fields_are_named() {
        let keyed = || RemoteOptions {
            auth: Some(RemoteKey::from_material(&[7; 32]).unwrap()),
            ..RemoteOptions::default()
        };
        assert_eq!(keyed().validate(), Ok(()));
        let e = RemoteOptions::default().validate().unwrap_err();
        assert!(
            e.contains("auth_key_file") && e.contains("openssl rand"),
            "{e}"
        );
        let bad = |f: fn(&mut RemoteOptions)| {
            let mut o = keyed();
            f(&mut o);
            o.validate().unwrap_err()
        };
        assert!(bad(|o| o.endpoint = Endpoint::Server("http://x".into())).contains("url"));
        assert!(bad(|o| o.endpoint = Endpoint::Cluster(vec![])).contains("cluster"));
        assert!(
            RemoteOptions {
                auth: keyed().auth,
                ..RemoteOptions::with_cluster(["redis://a:1", "redis://b:2"])
            }
            .validate()
            .is_ok()
        );
        assert!(bad(|o| o.ttl_s = 0).contains("ttl_s"));
        assert!(bad(|o| o.key_prefix = "a:b".into()).contains("key_prefix"));
        assert!(bad(|o| o.timeout_ms = 0).contains("timeout_ms"));
        assert!(bad(|o| o.write_linger_ms = 60_001).contains("write_linger_ms"));
        assert!(bad(|o| o.breaker_min_backoff_ms = 40_000).contains("breaker_min_backoff_ms"));
        assert_eq!(WriteMode::parse("second-hit"), Some(WriteMode::SecondHit));
        assert_eq!(WriteMode::parse("some"), None);
    }
}
