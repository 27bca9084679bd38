//! Engine counters and gauges (atomics), readable from any thread while the engine runs:
//! sessions, queue depth, steps, tokens per step, decode vs prefill work, generations and embeddings, forks,
//! cancellations, and the recent cost of a prompt token (what a remote prefetch may wait).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Live engine figures.
#[derive(Debug, Default)]
pub struct EngineStats {
    pub sessions_active: AtomicU64,
    /// Sessions with work waiting at the start of the last step.
    pub queue_depth: AtomicU64,
    pub steps: AtomicU64,
    pub step_tokens_total: AtomicU64,
    pub step_tokens_max: AtomicU64,
    pub last_step_tokens: AtomicU64,
    pub decode_tokens: AtomicU64,
    pub prefill_tokens: AtomicU64,
    pub step_micros_total: AtomicU64,
    pub generations: AtomicU64,
    /// Embeddings computed by the engine (cache hits never reach it).
    pub embeddings: AtomicU64,
    pub forks: AtomicU64,
    pub cancelled: AtomicU64,
    pub ttl_closed: AtomicU64,
    /// Commands and steps that panicked and were contained.
    pub panics: AtomicU64,
    /// Times the supervisor restarted the engine after its loop died.
    pub restarts: AtomicU64,
    /// Nanoseconds per token of recent prompt-dominated steps (a moving average; 0 until one
    /// ran): see [`EngineStats::prompt_token_cost`].
    pub prompt_ns_per_token: AtomicU64,
    /// Speculative decoding's figures, per namespace.
    pub speculation: crate::speculation::SpecStats,
    /// Times store work that belongs off the engine thread (a redb transaction, a stored
    /// block's checksum or decode) ran inside this engine's steps: zero by design (tier reads
    /// are staged, see `engine::staging`); a test pins it.
    pub store_work_in_step: AtomicU64,
    /// Commands the engine thread has taken (each a round trip or a send from a caller).
    pub commands: AtomicU64,
    /// Block chain hashes the engine thread has computed: one per whole block of a prompt
    /// (matched, staged and sealed under the same hash), a test pins it.
    pub chain_hashes: AtomicU64,
}

/// Fewest tokens in a step that samples the prompt-token cost (smaller steps are dominated by
/// the per-step overhead and the weights' read, as decode is).
const PROMPT_SAMPLE_TOKENS: usize = 32;

/// A plain copy of [`EngineStats`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct EngineStatsSnapshot {
    pub sessions_active: u64,
    pub queue_depth: u64,
    pub steps: u64,
    pub step_tokens_total: u64,
    pub step_tokens_max: u64,
    pub last_step_tokens: u64,
    pub decode_tokens: u64,
    pub prefill_tokens: u64,
    pub step_seconds_total: f64,
    pub generations: u64,
    pub embeddings: u64,
    pub forks: u64,
    pub cancelled: u64,
    pub ttl_closed: u64,
    pub panics: u64,
    pub restarts: u64,
    pub commands: u64,
    pub store_work_in_step: u64,
    pub chain_hashes: u64,
}

impl EngineStatsSnapshot {
    /// Mean tokens per forward pass.
    pub fn mean_step_tokens(&self) -> f64 {
        if self.steps == 0 {
            0.0
        } else {
            self.step_tokens_total as f64 / self.steps as f64
        }
    }
}

impl EngineStats {
    pub(crate) fn set_sessions(&self, n: usize) {
        self.sessions_active.store(n as u64, Relaxed);
    }

    pub(crate) fn record_step(&self, tokens: usize, decode_tokens: usize, took: Duration) {
        let t = tokens as u64;
        self.steps.fetch_add(1, Relaxed);
        self.step_tokens_total.fetch_add(t, Relaxed);
        self.step_tokens_max.fetch_max(t, Relaxed);
        self.last_step_tokens.store(t, Relaxed);
        self.decode_tokens.fetch_add(decode_tokens as u64, Relaxed);
        self.prefill_tokens
            .fetch_add((tokens - decode_tokens.min(tokens)) as u64, Relaxed);
        self.step_micros_total
            .fetch_add(u64::try_from(took.as_micros()).unwrap_or(u64::MAX), Relaxed);
        if tokens >= PROMPT_SAMPLE_TOKENS && decode_tokens.saturating_mul(4) <= tokens {
            let sample = u64::try_from(took.as_nanos() / tokens as u128).unwrap_or(u64::MAX);
            let old = self.prompt_ns_per_token.load(Relaxed);
            // One writer (the engine thread): an average over about the last four samples.
            let avg = if old == 0 {
                sample
            } else {
                old.saturating_mul(3).saturating_add(sample) / 4
            };
            self.prompt_ns_per_token.store(avg.max(1), Relaxed);
        }
    }

    /// The estimated time to compute one prompt token, from recent prompt-dominated steps;
    /// `None` before the first.
    pub fn prompt_token_cost(&self) -> Option<Duration> {
        match self.prompt_ns_per_token.load(Relaxed) {
            0 => None,
            ns => Some(Duration::from_nanos(ns)),
        }
    }

    /// Reads every figure.
    pub fn snapshot(&self) -> EngineStatsSnapshot {
        EngineStatsSnapshot {
            sessions_active: self.sessions_active.load(Relaxed),
            queue_depth: self.queue_depth.load(Relaxed),
            steps: self.steps.load(Relaxed),
            step_tokens_total: self.step_tokens_total.load(Relaxed),
            step_tokens_max: self.step_tokens_max.load(Relaxed),
            last_step_tokens: self.last_step_tokens.load(Relaxed),
            decode_tokens: self.decode_tokens.load(Relaxed),
            prefill_tokens: self.prefill_tokens.load(Relaxed),
            step_seconds_total: self.step_micros_total.load(Relaxed) as f64 / 1e6,
            generations: self.generations.load(Relaxed),
            embeddings: self.embeddings.load(Relaxed),
            forks: self.forks.load(Relaxed),
            cancelled: self.cancelled.load(Relaxed),
            ttl_closed: self.ttl_closed.load(Relaxed),
            panics: self.panics.load(Relaxed),
            restarts: self.restarts.load(Relaxed),
            commands: self.commands.load(Relaxed),
            store_work_in_step: self.store_work_in_step.load(Relaxed),
            chain_hashes: self.chain_hashes.load(Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prompt_token_cost_follows_prompt_steps_only() {
        let s = EngineStats::default();
        assert_eq!(s.prompt_token_cost(), None);
        s.record_step(8, 0, Duration::from_millis(8));
        s.record_step(64, 32, Duration::from_millis(64));
        assert_eq!(s.prompt_token_cost(), None, "small or decode-heavy steps");
        s.record_step(100, 1, Duration::from_millis(50));
        assert_eq!(s.prompt_token_cost(), Some(Duration::from_micros(500)));
        s.record_step(100, 0, Duration::from_millis(10));
        assert_eq!(
            s.prompt_token_cost(),
            Some(Duration::from_nanos((3 * 500_000 + 100_000) / 4))
        );
    }
}
