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
    /// Checks ranges; errors name `namespaces.NS.limits.KEY`.
    pub fn validate(&self, ns: &str) -> Result<(), TenantError> {
        let bad = |key, why: &str| TenantError::BadLimit {
            ns: ns.to_string(),
            key,
            why: why.into(),
        };
        if self.max_concurrent == 0 {
            return Err(bad("max_concurrent", "must be at least 1"));
        }
        if self.max_sessions == 0 {
            return Err(bad("max_sessions", "must be at least 1"));
        }
        if self.max_tokens_per_request == 0 {
            return Err(bad("max_tokens_per_request", "must be at least 1"));
        }
        if self.memory_bytes < 1 << 16 {
            return Err(bad(
                "memory_bytes",
                "must be at least 65536 (one wasm page)",
            ));
        }
        if self.wall_time_ms == 0 {
            return Err(bad("wall_time_ms", "must be at least 1"));
        }
        if self.max_instances == 0 {
            return Err(bad("max_instances", "must be at least 1"));
        }
        if self.max_host_call_bytes == 0 {
            return Err(bad("max_host_call_bytes", "must be at least 1"));
        }
        if let Some(m) = self.cpu_millicores
            && !(1..=1_000_000).contains(&m)
        {
            return Err(bad("cpu_millicores", "must be from 1 to 1000000"));
        }
        Ok(())
    }
}

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
        assert_eq!(l.cpu_millicores, Some(250));
        assert!(l.validate("ns").is_ok());
    }
}
