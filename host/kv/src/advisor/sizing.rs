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
