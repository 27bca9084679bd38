//! [`NsCpu`]: one namespace's CPU account. Every slice its guests run is added to the
//! namespace's counters (`NsCounters::cpu_nanos` and `worker_nanos`, kept by name across
//! reloads) and, when the host sets a [`CpuShare`], the time the slice held its worker is taken
//! out of the namespace's [`CpuBucket`]; at an epoch callback it answers whether the guest
//! should sleep, and counts the pause.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::CpuShare;
use super::bucket::CpuBucket;
use crate::namespaces::NsCounters;

/// Adds `n` to `a`, stopping at `u64::MAX`.
fn add_saturating(a: &AtomicU64, n: u64) {
    let _ = a.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
        Some(v.saturating_add(n))
    });
}

/// The CPU account of one namespace's runtime.
#[derive(Debug)]
pub(crate) struct NsCpu {
    counters: Arc<NsCounters>,
    /// Wall-time origin of the bucket's clock.
    origin: Instant,
    /// None: CPU is counted, never throttled.
    bucket: Option<Mutex<CpuBucket>>,
}

impl NsCpu {
    /// `slice`: the longest a guest runs between two epoch callbacks (the epoch tick).
    pub fn new(counters: Arc<NsCounters>, share: Option<CpuShare>, slice: Duration) -> NsCpu {
        NsCpu {
            counters,
            origin: Instant::now(),
            bucket: share.map(|s| Mutex::new(CpuBucket::new(&s, slice, 0))),
        }
    }

    /// Wall time `at`, nanoseconds since the account's origin (the bucket's clock).
    pub fn wall(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.origin).as_nanos()).unwrap_or(u64::MAX)
    }

    /// Charges a slice that ran `cpu` nanoseconds of thread CPU time and held its worker for
    /// `held` nanoseconds of wall time, ending at `at`.
    pub fn charge_at(&self, cpu: u64, held: u64, at: Instant) {
        add_saturating(&self.counters.cpu_nanos, cpu);
        add_saturating(&self.counters.worker_nanos, held);
        let Some(b) = &self.bucket else { return };
        if held > 0 {
            let at = self.wall(at);
            b.lock().unwrap_or_else(|e| e.into_inner()).charge(held, at);
        }
    }

    /// How long a guest at an epoch callback at `now` should sleep (None: carry on), never past
    /// `deadline`; a pause is counted as throttled time.
    pub fn pause(&self, now: Instant, deadline: Instant) -> Option<Duration> {
        let b = self.bucket.as_ref()?;
        let wall = self.wall(now);
        let pause = b.lock().unwrap_or_else(|e| e.into_inner()).pause(wall)?;
        let pause = pause.min(deadline.saturating_duration_since(now));
        if pause.is_zero() {
            return None;
        }
        add_saturating(&self.counters.throttled, 1);
        let nanos = u64::try_from(pause.as_nanos()).unwrap_or(u64::MAX);
        add_saturating(&self.counters.throttled_nanos, nanos);
        Some(pause)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TICK: Duration = Duration::from_millis(10);

    fn share() -> CpuShare {
        CpuShare {
            millicores: 1000,
            burst: Duration::from_millis(10),
        }
    }

    #[test]
    fn cpu_is_counted_with_or_without_a_share() {
        for s in [None, Some(share())] {
            let c = Arc::new(NsCounters::default());
            let cpu = NsCpu::new(c.clone(), s, TICK);
            let now = Instant::now();
            cpu.charge_at(3, 5, now);
            cpu.charge_at(4, 6, now);
            assert_eq!(c.cpu_nanos.load(Ordering::Relaxed), 7);
            assert_eq!(c.worker_nanos.load(Ordering::Relaxed), 11);
        }
    }

    #[test]
    fn without_a_share_nothing_pauses() {
        let c = Arc::new(NsCounters::default());
        let cpu = NsCpu::new(c.clone(), None, TICK);
        let now = Instant::now();
        cpu.charge_at(u64::MAX, u64::MAX, now);
        assert_eq!(cpu.pause(now, now + Duration::from_secs(1)), None);
        assert_eq!(c.throttled.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn an_overdrawn_namespace_pauses_but_never_past_the_deadline() {
        let c = Arc::new(NsCounters::default());
        let cpu = NsCpu::new(c.clone(), Some(share()), TICK);
        let now = Instant::now();
        cpu.charge_at(0, u64::MAX, now);
        let far = now + Duration::from_secs(60);
        let p = cpu.pause(now, far).expect("overdrawn");
        assert!(p <= Duration::from_millis(10), "at most one burst: {p:?}");
        let near = now + Duration::from_micros(300);
        assert_eq!(cpu.pause(now, near), Some(Duration::from_micros(300)));
        assert_eq!(
            cpu.pause(now, now),
            None,
            "at the deadline: interrupt, not sleep"
        );
        assert_eq!(c.throttled.load(Ordering::Relaxed), 2);
        let slept = u64::try_from((p + Duration::from_micros(300)).as_nanos()).expect("small");
        assert_eq!(c.throttled_nanos.load(Ordering::Relaxed), slept);
    }

    #[test]
    fn the_counters_saturate() {
        let a = AtomicU64::new(u64::MAX - 1);
        add_saturating(&a, 5);
        assert_eq!(a.load(Ordering::Relaxed), u64::MAX);
    }
}
