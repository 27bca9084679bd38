//! Timing-safe hits (`hit_timing = "pad"`, after Gu et al., ICML 2025, "Auditing Prompt Caching
//! in Language Model APIs"): in a padded namespace the first output of every request, hit or
//! miss, is released at `started + k·BUCKET + u`: `k·BUCKET` the first bucket boundary no earlier
//! than both the moment it is ready and the estimated time a full recompute of the prompt takes,
//! `u` uniform in `[0, BUCKET)` from a keyed hash (key from the OS's randomness). A hit then leaves
//! in the bucket its miss would have, and the bucketing and the jitter keep finer differences
//! (a wake-up from an idle host instead of a busy one: a fraction of a millisecond) from showing.
//!
//! The estimate is `prompt_tokens × (mean + 4·dev)` seconds, `mean` and `dev` being exponentially
//! weighted averages (weights 1/8 and 1/4, the round-trip estimator of TCP) of the time to first
//! token per computed token of requests that computed at least 3/4 of their prompt, in any
//! namespace (the engine is shared). One estimator serves the OpenAI endpoints and the
//! components' host calls (the same engine computes both); embeddings keep one of their own.
//! Invariants: the wait happens in the task that streams to the client (or the guest's task),
//! never in the engine; it is capped at [`MAX_PAD`]; until the first sample the
//! estimate is zero (only the bucketing applies).

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Width of the release buckets.
pub const BUCKET: Duration = Duration::from_millis(25);
/// Longest wait the padding ever adds.
pub const MAX_PAD: Duration = Duration::from_secs(30);

/// The running per-token estimate (seconds per computed prompt token).
#[derive(Debug, Default)]
struct Estimate {
    mean: f64,
    dev: f64,
    samples: u64,
}

/// The recompute-time estimator shared by every padded namespace, and its jitter source.
#[derive(Debug)]
pub struct HitPad {
    est: Mutex<Estimate>,
    key: [u8; 32],
    draws: AtomicU64,
}

impl Default for HitPad {
    fn default() -> Self {
        // `RandomState` keys come from the OS's random source.
        let mut key = [0u8; 32];
        let (words, _) = key.as_chunks_mut::<8>();
        for (i, w) in words.iter_mut().enumerate() {
            *w = RandomState::new().hash_one(i).to_le_bytes();
        }
        HitPad {
            est: Mutex::default(),
            key,
            draws: AtomicU64::new(0),
        }
    }
}

impl HitPad {
    /// Records a request that computed `computed` of its `prompt` tokens and had its first
    /// output ready `ttft` after it started; only mostly-computed prompts are kept.
    pub fn observe(&self, prompt: usize, computed: usize, ttft: Duration) {
        if computed == 0 || computed.saturating_mul(4) < prompt.saturating_mul(3) {
            return;
        }
        let s = ttft.as_secs_f64() / computed as f64;
        if !s.is_finite() {
            return;
        }
        let mut e = self.est.lock().unwrap_or_else(|p| p.into_inner());
        if e.samples == 0 {
            e.mean = s;
            e.dev = s / 2.0;
        } else {
            e.dev += ((s - e.mean).abs() - e.dev) / 4.0;
            e.mean += (s - e.mean) / 8.0;
        }
        e.samples = e.samples.saturating_add(1);
    }

    /// Estimated time to first token of a full miss on `prompt` tokens.
    pub fn estimate(&self, prompt: usize) -> Duration {
        let e = self.est.lock().unwrap_or_else(|p| p.into_inner());
        let secs = prompt as f64 * (e.mean + 4.0 * e.dev);
        if secs.is_finite() && secs > 0.0 {
            Duration::from_secs_f64(secs.min(MAX_PAD.as_secs_f64()))
        } else {
            Duration::ZERO
        }
    }

    /// When the first output of a request that `started` on `prompt` tokens, ready at `ready`,
    /// may leave: a uniformly random moment of the bucket that starts at the first boundary
    /// after both `ready` and the estimate, at most [`MAX_PAD`] after `ready`.
    pub fn release_at(&self, started: Instant, prompt: usize, ready: Instant) -> Instant {
        let floor = ready
            .saturating_duration_since(started)
            .max(self.estimate(prompt));
        let target = started + round_up(floor) + self.jitter();
        target.min(ready + MAX_PAD)
    }

    /// Uniform in `[0, BUCKET)`.
    fn jitter(&self) -> Duration {
        let n = self.draws.fetch_add(1, Relaxed);
        let h = blake3::keyed_hash(&self.key, &n.to_le_bytes());
        let (words, _) = h.as_bytes().as_chunks::<8>();
        let r = words.first().map_or(0, |w| u64::from_le_bytes(*w));
        let span = u64::try_from(BUCKET.as_nanos()).unwrap_or(u64::MAX);
        Duration::from_nanos(r % span)
    }
}

/// `d` rounded up to a whole number of buckets (at least one).
fn round_up(d: Duration) -> Duration {
    let b = BUCKET.as_nanos();
    let n = d.as_nanos().div_ceil(b).max(1);
    Duration::from_nanos(u64::try_from(n.saturating_mul(b)).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hits_leave_with_the_misses_bucket() {
        let pad = HitPad::default();
        let t0 = Instant::now();
        let bucket = |at: Instant| at.duration_since(t0).as_nanos() / BUCKET.as_nanos();
        // Before any sample: only the bucketing (and the jitter inside the bucket).
        let early = pad.release_at(t0, 100, t0 + Duration::from_millis(3));
        assert_eq!(bucket(early), 1);
        for ms in [40, 42, 41, 40, 43, 41] {
            pad.observe(100, 100, Duration::from_millis(ms));
        }
        let est = pad.estimate(100);
        assert!(
            est >= Duration::from_millis(41) && est < Duration::from_millis(100),
            "{est:?}"
        );
        // A hit ready after 4 ms and a miss ready after 41 ms leave together.
        let hit = pad.release_at(t0, 100, t0 + Duration::from_millis(4));
        let miss = pad.release_at(t0, 100, t0 + Duration::from_millis(41));
        assert_eq!(bucket(hit), bucket(miss));
        assert!(hit >= t0 + est && miss >= t0 + est);
        // The jitter spreads releases over the bucket.
        let spread: std::collections::BTreeSet<u128> = (0..64)
            .map(|_| pad.release_at(t0, 100, t0).duration_since(t0).as_nanos() / 1_000_000)
            .collect();
        assert!(spread.len() > 8, "{spread:?}");
        // A slow miss goes to a later bucket, never earlier than it is ready.
        let slow = t0 + Duration::from_millis(130);
        assert!(pad.release_at(t0, 100, slow) >= slow);
    }

    #[test]
    fn hits_and_odd_inputs_do_not_move_the_estimate() {
        let pad = HitPad::default();
        pad.observe(100, 10, Duration::from_millis(5));
        pad.observe(0, 0, Duration::from_millis(5));
        assert_eq!(pad.estimate(100), Duration::ZERO);
        pad.observe(8, 8, Duration::from_secs(1_000_000));
        assert_eq!(pad.estimate(usize::MAX), MAX_PAD);
        let t0 = Instant::now();
        assert!(pad.release_at(t0, usize::MAX, t0) <= t0 + MAX_PAD);
    }
}
