//! A fixed-bucket latency histogram on atomics (Prometheus semantics: cumulative `le` buckets,
//! `_sum` in seconds, `_count`). Invariant: observations never lock; bucket bounds are constant.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Upper bounds in seconds, ascending; `+Inf` is implicit.
pub const LATENCY_BOUNDS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// Counts of observations per bucket (not cumulative), their sum and count.
#[derive(Debug, Default)]
pub struct Histogram {
    buckets: [AtomicU64; LATENCY_BOUNDS.len()],
    sum_micros: AtomicU64,
    count: AtomicU64,
}

impl Histogram {
    /// Records one observation.
    pub fn observe(&self, seconds: f64) {
        let s = if seconds.is_finite() {
            seconds.max(0.0)
        } else {
            0.0
        };
        if let Some(i) = LATENCY_BOUNDS.iter().position(|&b| s <= b) {
            self.buckets[i].fetch_add(1, Relaxed);
        }
        self.sum_micros.fetch_add((s * 1e6) as u64, Relaxed);
        self.count.fetch_add(1, Relaxed);
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.count.load(Relaxed)
    }

    /// Writes the `_bucket`, `_sum` and `_count` series with `labels` (`k="v",...` or empty).
    pub fn render(&self, out: &mut String, name: &str, labels: &str) {
        let sep = if labels.is_empty() { "" } else { "," };
        let mut cumulative = 0;
        for (b, n) in LATENCY_BOUNDS.iter().zip(&self.buckets) {
            cumulative += n.load(Relaxed);
            let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"{b}\"}} {cumulative}");
        }
        let count = self.count.load(Relaxed);
        let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {count}");
        let sum = self.sum_micros.load(Relaxed) as f64 / 1e6;
        let braces = if labels.is_empty() {
            String::new()
        } else {
            format!("{{{labels}}}")
        };
        let _ = writeln!(out, "{name}_sum{braces} {sum}");
        let _ = writeln!(out, "{name}_count{braces} {count}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_cumulative() {
        let h = Histogram::default();
        h.observe(0.003);
        h.observe(0.2);
        h.observe(100.0);
        let mut s = String::new();
        h.render(&mut s, "x_seconds", "namespace=\"a\"");
        assert!(
            s.contains("x_seconds_bucket{namespace=\"a\",le=\"0.005\"} 1\n"),
            "{s}"
        );
        assert!(
            s.contains("x_seconds_bucket{namespace=\"a\",le=\"0.25\"} 2\n"),
            "{s}"
        );
        assert!(
            s.contains("x_seconds_bucket{namespace=\"a\",le=\"+Inf\"} 3\n"),
            "{s}"
        );
        assert!(s.contains("x_seconds_count{namespace=\"a\"} 3\n"), "{s}");
    }
}
