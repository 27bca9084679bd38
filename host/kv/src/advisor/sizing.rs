//! Over- and under-sizing warnings from windows of the pool's counters. A window is the span
//! between two [`SizingWatch::check`] calls (the engine calls it every 30 s or more). Over a
//! window with at least [`MIN_LOOKUPS`] full prompt blocks looked up:
//! - **oversized**: the hit rate is above 0.97 and blocks are idle: a quarter of the pool is
//!   free, or the advisor predicts half the budget would lose at most 0.01 of hit rate;
//! - **undersized**: the hit rate is below the target and blocks evicted earlier were asked
//!   for again (`evicted` or `expired` misses) in at least 1% of the look-ups.
//!
//! A warning needs its condition in two windows in a row and is given at most once per
//! [`REPEAT`] per kind.

use std::time::{Duration, Instant};

use crate::misses::MissReason;
use crate::stats::StatsSnapshot;

use super::AdvisorSnapshot;

/// Full prompt blocks a window needs before it is judged.
pub const MIN_LOOKUPS: u64 = 64;
/// Least time between two warnings of one kind.
pub const REPEAT: Duration = Duration::from_secs(600);
/// Hit rate above which an idle pool is called oversized.
pub const OVERSIZED_HIT_RATE: f64 = 0.97;

/// A sizing warning.
#[derive(Clone, Debug, PartialEq)]
pub enum SizingWarning {
    /// Hit rate high with blocks idle.
    Oversized {
        /// The window's hit rate (full prompt blocks).
        hit_rate: f64,
        /// Free blocks at the end of the window.
        free_blocks: u64,
        /// Predicted hit rate at half the budget.
        half_budget_hit_rate: f64,
    },
    /// Hit rate below target while evicted blocks were asked for again.
    Undersized {
        /// The window's hit rate.
        hit_rate: f64,
        /// The target.
        target: f64,
        /// Misses on blocks evicted (or expired) earlier, in the window.
        evicted_misses: u64,
        /// The advisor's suggestion, if any.
        suggested_blocks: Option<u64>,
    },
}

impl std::fmt::Display for SizingWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SizingWarning::Oversized {
                hit_rate,
                free_blocks,
                half_budget_hit_rate,
            } => write!(
                f,
                "the state cache looks oversized: hit rate {hit_rate:.3} with {free_blocks} \
                 blocks free; half the budget is predicted to hit {half_budget_hit_rate:.3}"
            ),
            SizingWarning::Undersized {
                hit_rate,
                target,
                evicted_misses,
                suggested_blocks,
            } => {
                write!(
                    f,
                    "the state cache looks undersized: hit rate {hit_rate:.3} below the target \
                     {target:.2}, {evicted_misses} misses on blocks evicted earlier"
                )?;
                match suggested_blocks {
                    Some(b) => write!(f, "; the advisor suggests {b} blocks"),
                    None => write!(f, "; the target is out of the advisor's range (16x)"),
                }
            }
        }
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Mark {
    hits: u64,
    full_misses: u64,
    evicted_misses: u64,
}

impl Mark {
    fn of(s: &StatsSnapshot) -> Mark {
        let m = &s.total.misses;
        Mark {
            hits: s.total.hit_blocks,
            full_misses: s
                .total
                .miss_blocks
                .saturating_sub(m.blocks_for(MissReason::Partial)),
            evicted_misses: m.blocks_for(MissReason::Evicted) + m.blocks_for(MissReason::Expired),
        }
    }
}

/// Windows of counters and the rate limit.
#[derive(Debug, Default)]
pub struct SizingWatch {
    last: Option<Mark>,
    over_streak: u32,
    under_streak: u32,
    warned_over: Option<Instant>,
    warned_under: Option<Instant>,
}

impl SizingWatch {
    /// Closes a window at `now`; returns the warning to log, if any.
    pub fn check(
        &mut self,
        now: Instant,
        stats: &StatsSnapshot,
        advisor: &AdvisorSnapshot,
    ) -> Option<SizingWarning> {
        let mark = Mark::of(stats);
        let prev = self.last.replace(mark)?;
        let hits = mark.hits.saturating_sub(prev.hits);
        let misses = mark.full_misses.saturating_sub(prev.full_misses);
        let evicted = mark.evicted_misses.saturating_sub(prev.evicted_misses);
        let lookups = hits + misses;
        if lookups < MIN_LOOKUPS {
            self.over_streak = 0;
            self.under_streak = 0;
            return None;
        }
        let rate = hits as f64 / lookups as f64;
        let half = advisor.at_scale(0.5).unwrap_or(0.0);
        let idle = stats.blocks_free * 4 >= stats.blocks_total || half >= rate - 0.01;
        let over = rate > OVERSIZED_HIT_RATE && idle;
        let under = rate < advisor.target_hit_rate && evicted * 100 >= lookups && evicted > 0;
        self.over_streak = if over { self.over_streak + 1 } else { 0 };
        self.under_streak = if under { self.under_streak + 1 } else { 0 };
        let due = |at: Option<Instant>| at.is_none_or(|t| now.duration_since(t) >= REPEAT);
        if self.over_streak >= 2 && due(self.warned_over) {
            self.warned_over = Some(now);
            return Some(SizingWarning::Oversized {
                hit_rate: rate,
                free_blocks: stats.blocks_free,
                half_budget_hit_rate: half,
            });
        }
        if self.under_streak >= 2 && due(self.warned_under) {
            self.warned_under = Some(now);
            return Some(SizingWarning::Undersized {
                hit_rate: rate,
                target: advisor.target_hit_rate,
                evicted_misses: evicted,
                suggested_blocks: advisor.smallest_budget_for_target,
            });
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::advisor::CurvePoint;
    use crate::stats::CountersSnapshot;

    fn stats(hits: u64, misses: u64, evicted: u64, free: u64) -> StatsSnapshot {
        let mut total = CountersSnapshot {
            hit_blocks: hits,
            miss_blocks: misses,
            ..Default::default()
        };
        total.misses.blocks[MissReason::Evicted as usize] = evicted;
        total.misses.blocks[MissReason::Cold as usize] = misses - evicted;
        StatsSnapshot {
            blocks_total: 100,
            blocks_free: free,
            blocks_committed: 100,
            blocks_used: 0,
            blocks_cached: 100 - free,
            block_bytes: 1,
            block_tokens: 16,
            wasted_slots: 0,
            total,
            namespaces: Vec::new(),
        }
    }

    fn advisor(half: f64, smallest: Option<u64>) -> AdvisorSnapshot {
        AdvisorSnapshot {
            budget_blocks: 100,
            curve: vec![CurvePoint {
                scale: 0.5,
                blocks: 50,
                hit_rate: half,
            }],
            target_hit_rate: 0.9,
            smallest_budget_for_target: smallest,
            refs: 0,
            sampled_refs: 0,
            sampling_rate: 1.0,
            memory_bytes: 0,
        }
    }

    #[test]
    fn oversized_after_two_windows_then_rate_limited() {
        let mut w = SizingWatch::default();
        let t = Instant::now();
        let a = advisor(0.985, None);
        assert_eq!(
            w.check(t, &stats(0, 0, 0, 0), &a),
            None,
            "the first call opens a window"
        );
        assert_eq!(
            w.check(t, &stats(990, 10, 0, 0), &a),
            None,
            "one window is not enough"
        );
        let warn = w.check(t, &stats(1980, 20, 0, 0), &a).expect("oversized");
        assert!(matches!(warn, SizingWarning::Oversized { .. }));
        assert!(warn.to_string().contains("oversized"), "{warn}");
        assert_eq!(w.check(t, &stats(2970, 30, 0, 0), &a), None, "rate-limited");
        let later = t + REPEAT;
        assert!(w.check(later, &stats(3960, 40, 0, 0), &a).is_some());
    }

    #[test]
    fn a_busy_pool_with_a_high_hit_rate_is_not_oversized() {
        let mut w = SizingWatch::default();
        let t = Instant::now();
        // Half the budget would lose 0.2 of hit rate and nothing is free: every block works.
        let a = advisor(0.78, None);
        for i in 0..5 {
            assert_eq!(w.check(t, &stats(990 * i, 10 * i, 0, 0), &a), None);
        }
    }

    #[test]
    fn undersized_needs_evicted_blocks_asked_for_again() {
        let t = Instant::now();
        let a = advisor(0.2, Some(250));
        // Low hit rate from cold misses only: a bigger cache would not help.
        let mut w = SizingWatch::default();
        for i in 0..5 {
            assert_eq!(w.check(t, &stats(50 * i, 50 * i, 0, 0), &a), None);
        }
        let mut w = SizingWatch::default();
        w.check(t, &stats(0, 0, 0, 0), &a);
        w.check(t, &stats(50, 50, 20, 0), &a);
        let warn = w.check(t, &stats(100, 100, 40, 0), &a).expect("undersized");
        assert_eq!(
            warn,
            SizingWarning::Undersized {
                hit_rate: 0.5,
                target: 0.9,
                evicted_misses: 20,
                suggested_blocks: Some(250),
            }
        );
        assert!(warn.to_string().contains("250 blocks"), "{warn}");
        // Too few look-ups in a window: not judged.
        let mut w = SizingWatch::default();
        for i in 0..5 {
            assert_eq!(w.check(t, &stats(10 * i, 10 * i, 5 * i, 0), &a), None);
        }
    }
}
