//! The circuit breaker in front of the remote server: after `threshold` consecutive failures
//! it opens and answers every request at once (a counted miss) for a backoff that doubles per
//! failed probe (from the minimum to the maximum); once the backoff ends one request probes
//! (half-open): success closes it, failure reopens it. Pure state, driven by the caller's clock.

use std::time::{Duration, Instant};

/// Where the breaker stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BreakerState {
    /// Requests go to the server.
    Closed,
    /// Requests are answered as misses until the backoff ends.
    Open,
    /// One probe is in flight; others are answered as misses.
    HalfOpen,
}

impl BreakerState {
    /// Gauge value: 0 closed, 1 open, 2 half-open.
    pub fn code(self) -> u64 {
        match self {
            BreakerState::Closed => 0,
            BreakerState::Open => 1,
            BreakerState::HalfOpen => 2,
        }
    }

    /// `closed`, `open` or `half-open`.
    pub fn name(self) -> &'static str {
        match self {
            BreakerState::Closed => "closed",
            BreakerState::Open => "open",
            BreakerState::HalfOpen => "half-open",
        }
    }
}

/// Consecutive-failure breaker with exponential backoff.
#[derive(Debug)]
pub struct Breaker {
    state: BreakerState,
    until: Instant,
    failures: u32,
    threshold: u32,
    backoff: Duration,
    min: Duration,
    max: Duration,
    opens: u64,
}

impl Breaker {
    /// A closed breaker.
    pub fn new(threshold: u32, min: Duration, max: Duration) -> Self {
        Breaker {
            state: BreakerState::Closed,
            until: Instant::now(),
            failures: 0,
            threshold: threshold.max(1),
            backoff: min,
            min,
            max: max.max(min),
            opens: 0,
        }
    }

    /// The current state.
    pub fn state(&self) -> BreakerState {
        self.state
    }

    /// Times it has opened.
    pub fn opens(&self) -> u64 {
        self.opens
    }

    /// Whether a request may go to the server now (an open breaker past its backoff lets this
    /// one request through as the probe).
    pub fn allow(&mut self, now: Instant) -> bool {
        match self.state {
            BreakerState::Closed => true,
            BreakerState::HalfOpen => false,
            BreakerState::Open if now >= self.until => {
                self.state = BreakerState::HalfOpen;
                true
            }
            BreakerState::Open => false,
        }
    }

    /// A request succeeded.
    pub fn success(&mut self) {
        self.state = BreakerState::Closed;
        self.failures = 0;
        self.backoff = self.min;
    }

    /// A request failed (timeout, refused, I/O); returns whether the breaker is now open.
    pub fn failure(&mut self, now: Instant) -> bool {
        match self.state {
            BreakerState::Closed => {
                self.failures = self.failures.saturating_add(1);
                if self.failures >= self.threshold {
                    self.open(now);
                }
            }
            BreakerState::HalfOpen => {
                self.backoff = (self.backoff * 2).min(self.max);
                self.open(now);
            }
            BreakerState::Open => {}
        }
        self.state == BreakerState::Open
    }

    fn open(&mut self, now: Instant) {
        self.state = BreakerState::Open;
        self.until = now + self.backoff;
        self.opens += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_after_threshold_probes_with_doubling_backoff_and_closes() {
        let ms = Duration::from_millis;
        let mut b = Breaker::new(3, ms(100), ms(350));
        let t = Instant::now();
        assert!(b.allow(t));
        assert!(!b.failure(t) && !b.failure(t));
        b.success();
        assert!(!b.failure(t) && !b.failure(t));
        assert!(b.failure(t));
        assert_eq!(b.state(), BreakerState::Open);
        assert!(!b.allow(t + ms(99)));
        assert!(b.allow(t + ms(100)));
        assert_eq!(b.state(), BreakerState::HalfOpen);
        assert!(!b.allow(t + ms(100)), "one probe at a time");
        assert!(b.failure(t + ms(100)));
        assert!(!b.allow(t + ms(299)));
        assert!(b.allow(t + ms(300)));
        assert!(b.failure(t + ms(300)));
        assert!(!b.allow(t + ms(649)), "backoff capped at 350 ms");
        assert!(b.allow(t + ms(650)));
        b.success();
        assert_eq!(b.state(), BreakerState::Closed);
        assert_eq!(b.opens(), 3);
        assert!(
            !b.failure(t) && !b.failure(t) && b.failure(t),
            "threshold again"
        );
    }
}
