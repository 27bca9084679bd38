//! [`FailureLog`]: which failed guest requests get a log line. At most one line per namespace
//! per second; the failures left out are counted in that namespace's next line, so a failing
//! tenant cannot flood the host's log, and the map of namespaces is bounded.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Shortest time between two lines of one namespace.
const PERIOD: Duration = Duration::from_secs(1);
/// Most namespaces tracked; past it, namespaces not seen for a period are forgotten and, if
/// still full, the rest share one line a period (under the name `*`).
const MAX_TRACKED: usize = 4096;

/// When each namespace last logged, and how many of its failures were left out since.
#[derive(Debug, Default)]
pub(crate) struct FailureLog {
    last: HashMap<String, (Instant, u64)>,
}

impl FailureLog {
    /// The line to print for a failure of `ns` at `now` (`why`: the error), or None while the
    /// namespace is within its quiet period (the failure is then counted).
    pub fn line(&mut self, ns: &str, why: &str, now: Instant) -> Option<String> {
        let key = if self.last.contains_key(ns) || self.room(now) {
            ns
        } else {
            "*"
        };
        let Some((at, skipped)) = self.last.get_mut(key) else {
            self.last.insert(key.to_string(), (now, 0));
            return Some(format!("[ns {ns}] request failed: {why}"));
        };
        if now.saturating_duration_since(*at) < PERIOD {
            *skipped = skipped.saturating_add(1);
            return None;
        }
        let more = std::mem::take(skipped);
        *at = now;
        Some(if more > 0 {
            format!("[ns {ns}] request failed: {why} ({more} more failures not logged)")
        } else {
            format!("[ns {ns}] request failed: {why}")
        })
    }

    /// Whether a new namespace can be tracked, forgetting the quiet ones if the map is full.
    fn room(&mut self, now: Instant) -> bool {
        if self.last.len() >= MAX_TRACKED {
            self.last
                .retain(|_, (at, n)| *n > 0 || now.saturating_duration_since(*at) < PERIOD);
        }
        self.last.len() < MAX_TRACKED
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_namespace_per_second_and_the_rest_counted() {
        let mut log = FailureLog::default();
        let t0 = Instant::now();
        let first = log
            .line("a", "trap", t0)
            .expect("the first failure is logged");
        assert_eq!(first, "[ns a] request failed: trap");
        for i in 1..=1000u64 {
            let at = t0 + Duration::from_micros(i * 900);
            assert_eq!(
                log.line("a", "trap", at),
                None,
                "failure {i} within the second"
            );
        }
        // Another namespace has its own period.
        assert!(
            log.line("b", "oom", t0 + Duration::from_millis(5))
                .is_some()
        );
        let next = log.line("a", "trap", t0 + PERIOD).expect("a second later");
        assert_eq!(
            next,
            "[ns a] request failed: trap (1000 more failures not logged)"
        );
        assert_eq!(log.line("a", "trap", t0 + PERIOD), None);
    }

    #[test]
    fn many_namespaces_cannot_flood_the_log_or_the_map() {
        let mut log = FailureLog::default();
        let t0 = Instant::now();
        let lines = (0..MAX_TRACKED + 5000)
            .filter(|i| log.line(&format!("ns{i}"), "trap", t0).is_some())
            .count();
        assert_eq!(lines, MAX_TRACKED + 1, "the rest share one line");
        assert!(log.last.len() <= MAX_TRACKED + 1);
        // A period later the quiet ones are forgotten and new namespaces are tracked again.
        assert!(log.line("late", "trap", t0 + PERIOD).is_some());
        assert!(log.last.len() <= MAX_TRACKED + 1);
    }
}
