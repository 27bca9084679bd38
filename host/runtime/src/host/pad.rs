//! `hit_timing = "pad"` for components' generations: as on the OpenAI endpoints, the first
//! output of a generation in a padded namespace leaves no earlier than a recompute of its
//! prompt (the tokens appended since the session's last generation) would have taken, bucketed
//! and jittered by the shared [`HitPad`], and the usage a guest sees reports no cached tokens.
//! A stream's first event waits; `generate`, which answers once at the end, is held back by the
//! same delay after the generation is done, so its total time is the bucket plus the decode for
//! a hit and a miss alike. Every generation's time to first token feeds the estimate.

use std::sync::Arc;
use std::time::{Duration, Instant};

use memoria_sched::Usage;
use memoria_tenant::HitPad;

/// The padding of one generation.
#[derive(Debug)]
pub(crate) struct GenerationPad {
    pad: Arc<HitPad>,
    enabled: bool,
    started: Instant,
    prompt: usize,
    first_ready: Option<Instant>,
}

impl GenerationPad {
    /// A generation of `prompt` new tokens starting now; `enabled` in a padded namespace.
    pub fn start(pad: Arc<HitPad>, enabled: bool, prompt: usize) -> GenerationPad {
        GenerationPad {
            pad,
            enabled,
            started: Instant::now(),
            prompt,
            first_ready: None,
        }
    }

    /// How long the first output must wait, decided when it is ready (zero after that, and
    /// when padding is off).
    pub fn first_output(&mut self) -> Duration {
        if self.first_ready.is_some() {
            return Duration::ZERO;
        }
        let ready = Instant::now();
        self.first_ready = Some(ready);
        if !self.enabled {
            return Duration::ZERO;
        }
        let at = self.pad.release_at(self.started, self.prompt, ready);
        at.saturating_duration_since(ready)
    }

    /// Records the generation's first-token time in the estimate and returns the usage the
    /// guest may see (no cached tokens when padded).
    pub fn finish(&self, mut u: Usage) -> Usage {
        if let Some(ready) = self.first_ready {
            self.pad.observe(
                u.prompt_tokens,
                u.prompt_tokens.saturating_sub(u.cached_tokens),
                ready.saturating_duration_since(self.started),
            );
        }
        if self.enabled {
            u.cached_tokens = 0;
        }
        u
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(prompt: usize, cached: usize) -> Usage {
        Usage {
            prompt_tokens: prompt,
            cached_tokens: cached,
            completion_tokens: 1,
            ..Usage::default()
        }
    }

    #[test]
    fn a_padded_generation_waits_once_and_hides_its_hits() {
        let pad = Arc::new(HitPad::default());
        let mut g = GenerationPad::start(pad.clone(), true, 100);
        let wait = g.first_output();
        assert!(
            wait > Duration::ZERO && wait <= memoria_tenant::BUCKET * 2,
            "{wait:?}"
        );
        assert_eq!(
            g.first_output(),
            Duration::ZERO,
            "only the first output waits"
        );
        assert_eq!(g.finish(usage(100, 96)).cached_tokens, 0);
        let mut off = GenerationPad::start(pad, false, 100);
        assert_eq!(off.first_output(), Duration::ZERO);
        assert_eq!(off.finish(usage(100, 96)).cached_tokens, 96);
    }
}
