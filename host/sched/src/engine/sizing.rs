//! The engine's periodic cache-sizing check: every [`EVERY`] it closes a window of the pool's
//! counters and logs the advisor's over- or under-sizing warning, if any (the rules and the
//! rate limit are in `memoria_kv::advisor::SizingWatch`). Runs between steps, never inside one.

use std::time::{Duration, Instant};

use memoria_kv::advisor::SizingWatch;

use super::Engine;

/// Length of one sizing window.
pub(crate) const EVERY: Duration = Duration::from_secs(30);

/// The watch and when its window opened.
#[derive(Debug)]
pub(crate) struct Sizing {
    watch: SizingWatch,
    opened: Instant,
}

impl Default for Sizing {
    fn default() -> Self {
        Sizing {
            watch: SizingWatch::default(),
            opened: Instant::now(),
        }
    }
}

impl Engine {
    /// Closes the sizing window when it is due and logs a warning when the watch gives one.
    pub(crate) fn check_sizing(&mut self) {
        let now = Instant::now();
        if now.duration_since(self.sizing.opened) < EVERY {
            return;
        }
        self.sizing.opened = now;
        let stats = self.pool.stats();
        let snap = stats.snapshot();
        let advisor = stats.advisor_snapshot();
        if let Some(w) = self.sizing.watch.check(now, &snap, &advisor) {
            eprintln!("memoria: warning: {w}");
        }
    }
}
