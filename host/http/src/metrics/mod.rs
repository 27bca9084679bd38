//! What the server counts beyond the engine's and the pool's own atomics: per-namespace request
//! outcomes, token totals, time to first token and per-token latency, and per-route response
//! codes. [`render`] writes everything as Prometheus text; [`stats_json`] as the `/stats` JSON.
//! Invariant: the hot path only touches atomics; the maps are locked once per request.

mod cache_view;
mod components;
mod events;
mod histogram;
mod llama;
pub mod memory;
mod remote;
mod render;
mod speculation;
mod stats_json;
mod store;
mod tiers;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock};

pub use histogram::Histogram;
pub use llama::LlamaTotals;
pub use render::render;
pub use stats_json::stats_json;

/// One namespace's request figures.
#[derive(Debug, Default)]
pub struct NsMetrics {
    pub requests: AtomicU64,
    /// Refused with 429 by admission.
    pub rejected_overload: AtomicU64,
    /// Prompt tokens of finished generations.
    pub prompt_tokens: AtomicU64,
    /// Of those, tokens served from the shared state cache.
    pub cached_tokens: AtomicU64,
    pub completion_tokens: AtomicU64,
    /// Generations cancelled because the client went away.
    pub disconnects: AtomicU64,
    pub embeddings: AtomicU64,
    pub embedding_cache_hits: AtomicU64,
    /// Request start to first generated token.
    pub ttft: Histogram,
    /// Time between consecutive generated tokens.
    pub token_latency: Histogram,
}

/// All server-side metrics.
#[derive(Debug, Default)]
pub struct Metrics {
    namespaces: RwLock<BTreeMap<String, Arc<NsMetrics>>>,
    /// (route, status code) → responses.
    responses: Mutex<BTreeMap<(&'static str, u16), u64>>,
    /// Requests refused before reaching a namespace, by reason.
    rejected: Mutex<BTreeMap<&'static str, u64>>,
    /// llama-server's totals (`llamacpp:*`).
    pub llama: LlamaTotals,
}

impl Metrics {
    /// The figures of namespace `ns`, registered on first use.
    pub fn ns(&self, ns: &str) -> Arc<NsMetrics> {
        if let Some(m) = self
            .namespaces
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(ns)
        {
            return m.clone();
        }
        let mut map = self.namespaces.write().unwrap_or_else(|e| e.into_inner());
        map.entry(ns.to_string()).or_default().clone()
    }

    /// Every namespace's figures, sorted by name.
    pub fn namespaces(&self) -> Vec<(String, Arc<NsMetrics>)> {
        let map = self.namespaces.read().unwrap_or_else(|e| e.into_inner());
        map.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }

    /// Counts one response.
    pub fn response(&self, route: &'static str, status: u16) {
        let mut map = self.responses.lock().unwrap_or_else(|e| e.into_inner());
        *map.entry((route, status)).or_default() += 1;
        if status == 413 || status == 401 || status == 403 {
            drop(map);
            let reason = match status {
                413 => "body_too_large",
                401 => "unauthenticated",
                _ => "forbidden",
            };
            let mut r = self.rejected.lock().unwrap_or_else(|e| e.into_inner());
            *r.entry(reason).or_default() += 1;
        }
    }

    /// Counts one refusal that never reached a route (`too_many_connections`).
    pub fn reject(&self, reason: &'static str) {
        let mut r = self.rejected.lock().unwrap_or_else(|e| e.into_inner());
        *r.entry(reason).or_default() += 1;
    }

    fn responses(&self) -> Vec<((&'static str, u16), u64)> {
        let map = self.responses.lock().unwrap_or_else(|e| e.into_inner());
        map.iter().map(|(k, v)| (*k, *v)).collect()
    }

    fn rejected(&self) -> Vec<(&'static str, u64)> {
        let map = self.rejected.lock().unwrap_or_else(|e| e.into_inner());
        map.iter().map(|(k, v)| (*k, *v)).collect()
    }
}

impl NsMetrics {
    /// Adds a finished generation's usage.
    pub fn add_usage(&self, u: &memoria_sched::Usage) {
        self.prompt_tokens
            .fetch_add(u.prompt_tokens as u64, Relaxed);
        self.cached_tokens
            .fetch_add(u.cached_tokens as u64, Relaxed);
        self.completion_tokens
            .fetch_add(u.completion_tokens as u64, Relaxed);
    }
}
