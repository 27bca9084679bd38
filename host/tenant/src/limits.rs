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
        Ok(())
    }
}
