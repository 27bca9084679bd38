//! Reading a host's `/stats` for `bench cluster`: the counters it compares before and after a
//! request (prefill tokens computed, remote hits, bytes read, fetch latency buckets, writes,
//! write-behind queue), medians, and quantiles of the remote fetch latency computed from the
//! histogram's buckets (as Prometheus's `histogram_quantile` does: linear within a bucket).

use memoria_store::remote::LATENCY_BOUNDS_US;
use serde_json::Value;

/// The figures of one `/stats` answer that the bench uses.
#[derive(Clone, Debug, Default)]
pub struct Figures {
    pub prefill_tokens: u64,
    pub block_tokens: u64,
    pub remote_hits: u64,
    pub remote_misses_absent: u64,
    pub bytes_read: u64,
    pub writes: u64,
    pub writes_dropped: u64,
    pub write_errors: u64,
    pub queue_blocks: u64,
    /// Blocks waiting for the disk tier's writer (gauge).
    pub disk_queue_blocks: u64,
    pub fetches: u64,
    pub mget_runs: u64,
    pub latency: Vec<u64>,
    pub latency_sum_us: u64,
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

impl Figures {
    pub fn of(stats: &Value) -> Figures {
        let r = &stats["remote"];
        Figures {
            prefill_tokens: u(&stats["engine"]["prefill_tokens"]),
            block_tokens: u(&stats["pool"]["block_tokens"]).max(1),
            remote_hits: u(&r["hits"]),
            remote_misses_absent: u(&r["miss_absent"]),
            bytes_read: u(&r["bytes_read"]),
            writes: u(&r["writes"]),
            writes_dropped: u(&r["writes_dropped"]),
            write_errors: u(&r["write_errors"]),
            queue_blocks: u(&r["queue_blocks"]),
            disk_queue_blocks: u(&stats["tiers"]["disk"]["queue_blocks"]),
            fetches: u(&r["fetches"]),
            mget_runs: u(&r["mget_runs"]),
            latency: r["latency"]
                .as_array()
                .map(|a| a.iter().map(u).collect())
                .unwrap_or_default(),
            latency_sum_us: u(&r["latency_sum_us"]),
        }
    }

    /// `self - before`, counter by counter (gauges and `block_tokens` kept from `self`).
    pub fn since(&self, before: &Figures) -> Figures {
        let d = |a: u64, b: u64| a.saturating_sub(b);
        Figures {
            prefill_tokens: d(self.prefill_tokens, before.prefill_tokens),
            block_tokens: self.block_tokens,
            remote_hits: d(self.remote_hits, before.remote_hits),
            remote_misses_absent: d(self.remote_misses_absent, before.remote_misses_absent),
            bytes_read: d(self.bytes_read, before.bytes_read),
            writes: d(self.writes, before.writes),
            writes_dropped: d(self.writes_dropped, before.writes_dropped),
            write_errors: d(self.write_errors, before.write_errors),
            queue_blocks: self.queue_blocks,
            disk_queue_blocks: self.disk_queue_blocks,
            fetches: d(self.fetches, before.fetches),
            mget_runs: d(self.mget_runs, before.mget_runs),
            latency: self
                .latency
                .iter()
                .enumerate()
                .map(|(i, n)| d(*n, before.latency.get(i).copied().unwrap_or(0)))
                .collect(),
            latency_sum_us: d(self.latency_sum_us, before.latency_sum_us),
        }
    }

    /// Adds another delta's counters (histogram included).
    pub fn add(&mut self, o: &Figures) {
        self.prefill_tokens += o.prefill_tokens;
        self.remote_hits += o.remote_hits;
        self.remote_misses_absent += o.remote_misses_absent;
        self.bytes_read += o.bytes_read;
        self.writes += o.writes;
        self.writes_dropped += o.writes_dropped;
        self.write_errors += o.write_errors;
        self.fetches += o.fetches;
        self.mget_runs += o.mget_runs;
        self.latency_sum_us += o.latency_sum_us;
        if self.latency.len() < o.latency.len() {
            self.latency.resize(o.latency.len(), 0);
        }
        for (a, b) in self.latency.iter_mut().zip(&o.latency) {
            *a += b;
        }
        self.block_tokens = o.block_tokens;
    }
}

/// The `q` quantile (0..=1) in milliseconds of a non-cumulative histogram over
/// [`LATENCY_BOUNDS_US`] plus +Inf, linear within the bucket it falls in (a value in the +Inf
/// bucket reads as the last finite bound); None when it holds no observation.
pub fn quantile_ms(buckets: &[u64], q: f64) -> Option<f64> {
    let total: u64 = buckets.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = q.clamp(0.0, 1.0) * total as f64;
    let mut below = 0u64;
    for (i, &n) in buckets.iter().enumerate() {
        if n > 0 && (below + n) as f64 >= rank {
            let lo = if i == 0 { 0 } else { LATENCY_BOUNDS_US[i - 1] };
            let Some(&hi) = LATENCY_BOUNDS_US.get(i) else {
                return Some(lo as f64 / 1000.0);
            };
            let frac = ((rank - below as f64) / n as f64).clamp(0.0, 1.0);
            return Some((lo as f64 + (hi - lo) as f64 * frac) / 1000.0);
        }
        below += n;
    }
    LATENCY_BOUNDS_US.last().map(|b| *b as f64 / 1000.0)
}

/// The median (the mean of the middle two for an even count); 0 for none.
pub fn median(xs: &[f64]) -> f64 {
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_interpolate_within_a_bucket() {
        let mut b = vec![0u64; 11];
        assert_eq!(quantile_ms(&b, 0.5), None);
        b[2] = 4; // four fetches in (0.5 ms, 1 ms]
        assert_eq!(quantile_ms(&b, 0.5), Some(0.75));
        assert_eq!(quantile_ms(&b, 1.0), Some(1.0));
        b[10] = 1; // one past 250 ms
        assert_eq!(quantile_ms(&b, 0.99), Some(250.0));
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
    }
}
