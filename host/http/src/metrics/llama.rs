//! llama-server's metric families (`llamacpp:*`) beside memoria's own in `/metrics`, so its
//! dashboards and scrapers read a memoria host unchanged: token and time totals of finished
//! generations (summed from each request's `timings`), forward passes, and the requests running
//! and waiting.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use super::render::Out;
use crate::state::AppState;

/// Totals of every finished generation's timings, all namespaces together.
#[derive(Debug, Default)]
pub struct LlamaTotals {
    /// Prompt tokens computed (not found in the cache).
    prompt_tokens: AtomicU64,
    /// Prompt tokens found in the cache.
    cached_tokens: AtomicU64,
    prompt_micros: AtomicU64,
    predicted_tokens: AtomicU64,
    predicted_micros: AtomicU64,
}

impl LlamaTotals {
    /// Adds one request's timings: `prompt_n` computed and `cached` prompt tokens in `prompt`,
    /// `predicted_n` tokens generated in `predicted`.
    pub fn add(
        &self,
        (prompt_n, cached, prompt): (usize, usize, Duration),
        (predicted_n, predicted): (usize, Duration),
    ) {
        let micros = |d: Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.prompt_tokens.fetch_add(prompt_n as u64, Relaxed);
        self.cached_tokens.fetch_add(cached as u64, Relaxed);
        self.prompt_micros.fetch_add(micros(prompt), Relaxed);
        self.predicted_tokens.fetch_add(predicted_n as u64, Relaxed);
        self.predicted_micros.fetch_add(micros(predicted), Relaxed);
    }
}

fn rate(tokens: u64, micros: u64) -> f64 {
    if micros == 0 {
        0.0
    } else {
        tokens as f64 * 1e6 / micros as f64
    }
}

/// Writes the `llamacpp:*` families.
pub(super) fn render(o: &mut Out, state: &AppState) {
    let t = &state.metrics.llama;
    let eng = state.engine.stats().snapshot();
    let gates = state.admission.snapshot();
    let running: usize = gates.iter().map(|(_, g)| g.running()).sum();
    let queued: usize = gates.iter().map(|(_, g)| g.queued()).sum();
    let prompt = t.prompt_tokens.load(Relaxed);
    let prompt_us = t.prompt_micros.load(Relaxed);
    let predicted = t.predicted_tokens.load(Relaxed);
    let predicted_us = t.predicted_micros.load(Relaxed);
    let families: [(&str, &str, &str, f64); 15] = [
        (
            "prompt_tokens_total",
            "counter",
            "Number of prompt tokens processed (computed, not found in the cache).",
            prompt as f64,
        ),
        (
            "prompt_tokens_cached_total",
            "counter",
            "Number of prompt tokens found in the cache.",
            t.cached_tokens.load(Relaxed) as f64,
        ),
        (
            "prompt_seconds_total",
            "counter",
            "Prompt process time.",
            prompt_us as f64 / 1e6,
        ),
        (
            "tokens_predicted_total",
            "counter",
            "Number of generation tokens processed.",
            predicted as f64,
        ),
        (
            "tokens_predicted_seconds_total",
            "counter",
            "Predict process time.",
            predicted_us as f64 / 1e6,
        ),
        (
            "n_decode_total",
            "counter",
            "Total number of forward passes (memoria batches every running request in each).",
            eng.steps as f64,
        ),
        (
            "n_tokens_max",
            "counter",
            "Largest number of tokens in one forward pass.",
            eng.step_tokens_max as f64,
        ),
        (
            "spec_decode_num_draft_tokens_total",
            "counter",
            "Draft tokens proposed (memoria has no speculative decoding).",
            0.0,
        ),
        (
            "spec_decode_num_accepted_tokens_total",
            "counter",
            "Draft tokens accepted (memoria has no speculative decoding).",
            0.0,
        ),
        (
            "spec_decode_num_drafts_total",
            "counter",
            "Drafts made (memoria has no speculative decoding).",
            0.0,
        ),
        (
            "prompt_tokens_seconds",
            "gauge",
            "Average prompt throughput in tokens/s.",
            rate(prompt, prompt_us),
        ),
        (
            "predicted_tokens_seconds",
            "gauge",
            "Average generation throughput in tokens/s.",
            rate(predicted, predicted_us),
        ),
        (
            "requests_processing",
            "gauge",
            "Number of requests processing.",
            running as f64,
        ),
        (
            "requests_deferred",
            "gauge",
            "Number of requests deferred (waiting in an admission queue).",
            queued as f64,
        ),
        (
            "n_busy_slots_per_decode",
            "gauge",
            "Average number of tokens per forward pass (memoria batches every running request in each).",
            eng.mean_step_tokens(),
        ),
    ];
    for (name, kind, help, value) in families {
        let name = format!("llamacpp:{name}");
        o.family(&name, kind, help);
        o.sample(&name, "", value);
    }
}
