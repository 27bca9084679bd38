//! Per-namespace quotas and component limits, with defaults a single-user host is happy with.

use serde::Deserialize;

use crate::TenantError;

/// What one namespace may use.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Requests running at once.
    pub max_concurrent: usize,
    /// Requests waiting for a slot before 429.
    pub max_queue: usize,
    /// Sessions open at once.
    pub max_sessions: usize,
    /// `max_tokens` accepted per request.
    pub max_tokens_per_request: usize,
    /// K/V blocks the namespace may hold (None: no cap).
    pub max_blocks: Option<usize>,
    /// Eviction priority of its cached blocks (higher stays longer).
    pub priority: i32,
    /// Linear memory a component instance may grow to, bytes.
    pub memory_bytes: u64,
    /// Wall time of one component request, milliseconds.
    pub wall_time_ms: u64,
    /// Component instances running at once.
    pub max_instances: usize,
    /// Bytes a guest may pass in one host call.
    pub max_host_call_bytes: usize,
    /// Wasm fuel per request (None: only the wall-time limit).
    pub fuel: Option<u64>,
    /// CPU its guests may use on average, in thousandths of a core (None: the host's share,
    /// half a core); past it a spinning guest sleeps at its next epoch tick.
    pub cpu_millicores: Option<u32>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_concurrent: 16,
            max_queue: 64,
            max_sessions: 256,
            max_tokens_per_request: 4096,
            max_blocks: None,
            priority: 0,
            memory_bytes: 64 << 20,
            wall_time_ms: 30_000,
            max_instances: 16,
            max_host_call_bytes: 1 << 20,
            fuel: None,
            cpu_millicores: None,
        }
    }
}

impl Limits {
    /// Checks ranges; errors name `namespaces.NS.limits.KEY` and the allowed range. The same
    /// rules hold for the config file at start-up and for `/admin/reload`.
    pub fn validate(&self, ns: &str) -> Result<(), TenantError> {
        fn check(
            ns: &str,
            key: &'static str,
            v: u64,
            lo: u64,
            hi: u64,
            note: &str,
        ) -> Result<(), TenantError> {
            if (lo..=hi).contains(&v) {
                return Ok(());
            }
            Err(TenantError::BadLimit {
                ns: ns.to_string(),
                key,
                why: format!("{v} is out of range: use {lo} to {hi}{note}"),
            })
        }
        let n = |v: usize| u64::try_from(v).unwrap_or(u64::MAX);
        check(
            ns,
            "max_concurrent",
            n(self.max_concurrent),
            1,
            MAX_SLOTS,
            "",
        )?;
        check(ns, "max_queue", n(self.max_queue), 0, MAX_QUEUE, "")?;
        check(ns, "max_sessions", n(self.max_sessions), 1, MAX_QUEUE, "")?;
        check(
            ns,
            "max_tokens_per_request",
            n(self.max_tokens_per_request),
            1,
            MAX_TOKENS,
            "",
        )?;
        if let Some(b) = self.max_blocks {
            check(ns, "max_blocks", n(b), 1, u64::from(u32::MAX), "")?;
        }
        check(
            ns,
            "memory_bytes",
            self.memory_bytes,
            1 << 16,
            1 << 48,
            " (one wasm page to 256 TiB)",
        )?;
        check(
            ns,
            "wall_time_ms",
            self.wall_time_ms,
            1,
            86_400_000,
            " (a day)",
        )?;
        check(ns, "max_instances", n(self.max_instances), 1, MAX_SLOTS, "")?;
        check(
            ns,
            "max_host_call_bytes",
            n(self.max_host_call_bytes),
            1,
            1 << 30,
            "",
        )?;
        if let Some(f) = self.fuel {
            check(ns, "fuel", f, 1, u64::MAX >> 1, "")?;
        }
        if let Some(m) = self.cpu_millicores {
            check(ns, "cpu_millicores", u64::from(m), 1, 1_000_000, "")?;
        }
        Ok(())
    }
}

/// Most requests (`max_concurrent`) or component instances (`max_instances`) one namespace may
/// run at once.
pub const MAX_SLOTS: u64 = 65_536;
/// Most requests waiting (`max_queue`) or sessions open (`max_sessions`) per namespace.
pub const MAX_QUEUE: u64 = 1 << 20;
/// Most tokens one request may ask for (`max_tokens_per_request`).
pub const MAX_TOKENS: u64 = 1 << 24;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_valid_and_a_bad_cpu_share_is_named() {
        assert!(Limits::default().validate("ns").is_ok());
        for bad in [0, 1_000_001] {
            let l = Limits {
                cpu_millicores: Some(bad),
                ..Limits::default()
            };
            let e = l.validate("ns").expect_err("out of range").to_string();
            assert!(e.contains("cpu_millicores"), "{e}");
        }
        let l: Limits = toml::from_str("cpu_millicores = 250").expect("parses");
        assert!(l.validate("ns").is_ok());
        let l: Limits = toml::from_str("max_blocks = 8").expect("parses");
        assert!(l.validate("ns").is_ok());
    }

    #[test]
    fn config_numbers_past_their_range_are_refused_naming_key_and_range() {
        for (text, key) in [
            ("max_instances = 9223372036854775807", "max_instances"),
            ("max_concurrent = 9223372036854775807", "max_concurrent"),
            ("max_concurrent = 65537", "max_concurrent"),
            ("max_blocks = 0", "max_blocks"),
            ("max_queue = 18446744073709551615", "max_queue"),
            ("max_sessions = 0", "max_sessions"),
            (
                "max_tokens_per_request = 4294967296",
                "max_tokens_per_request",
            ),
            ("memory_bytes = 18446744073709551615", "memory_bytes"),
            ("wall_time_ms = 0", "wall_time_ms"),
            ("max_host_call_bytes = 0", "max_host_call_bytes"),
            ("fuel = 0", "fuel"),
        ] {
            let l: Limits = toml::from_str(text).expect(text);
            let e = l.validate("g").expect_err(text).to_string();
            assert!(
                e.contains(&format!("namespaces.g.limits.{key}")) && e.contains(" to "),
                "{text}: {e}"
            );
        }
        let edge: Limits =
            toml::from_str("max_concurrent = 65536\nmax_instances = 65536").expect("parses");
        assert!(edge.validate("g").is_ok());
    }
}
