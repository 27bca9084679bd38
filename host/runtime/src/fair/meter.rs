//! [`SliceMeter`]: measures one request's guest time slice by slice and charges it to the
//! namespace. [`metered`] wraps the request's future: every poll of it is a slice, run on one
//! thread, so the thread CPU clock ([`super::clock`]) and the wall clock are read when the poll
//! starts and charged when it ends: CPU time for the accounts, wall time (the worker held) for
//! the share. The epoch callback charges the slice so far with [`SliceMeter::charge_now`]
//! before it decides whether to throttle, so a guest that never returns from one poll is still
//! seen at every tick.
//!
//! Invariant: a reading is only ever subtracted from one taken on the same thread during the
//! same poll; outside a [`metered`] poll (a store driven some other way) nothing is charged.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use super::NsCpu;
use super::clock::thread_cpu_nanos;

/// The clocks of one request's slices.
#[derive(Debug)]
pub(crate) struct SliceMeter {
    ns: Arc<NsCpu>,
    /// Thread CPU time when the running slice started or was last charged.
    mark: AtomicU64,
    /// Wall time ([`NsCpu::wall`]) at the same moment.
    wall_mark: AtomicU64,
    /// A [`metered`] poll is running (so `mark` was read on the current thread).
    active: AtomicBool,
}

impl SliceMeter {
    pub fn new(ns: Arc<NsCpu>) -> SliceMeter {
        SliceMeter {
            ns,
            mark: AtomicU64::new(0),
            wall_mark: AtomicU64::new(0),
            active: AtomicBool::new(false),
        }
    }

    /// Charges the running slice's CPU and wall time since the last reading (nothing outside a
    /// slice).
    pub fn charge_now(&self) {
        if !self.active.load(Ordering::Relaxed) {
            return;
        }
        let (now, at) = (thread_cpu_nanos(), Instant::now());
        let wall = self.ns.wall(at);
        let cpu = now.saturating_sub(self.mark.swap(now, Ordering::Relaxed));
        let held = wall.saturating_sub(self.wall_mark.swap(wall, Ordering::Relaxed));
        // The two clocks are read one after the other and at different resolutions; a slice
        // holds its worker at least as long as it runs.
        self.ns.charge_at(cpu, held.max(cpu), at);
    }

    fn begin(&self) -> Slice<'_> {
        self.mark.store(thread_cpu_nanos(), Ordering::Relaxed);
        let wall = self.ns.wall(Instant::now());
        self.wall_mark.store(wall, Ordering::Relaxed);
        self.active.store(true, Ordering::Relaxed);
        Slice(self)
    }
}

/// A running slice; charged when dropped (also if the poll unwinds).
struct Slice<'a>(&'a SliceMeter);

impl Drop for Slice<'_> {
    fn drop(&mut self) {
        self.0.charge_now();
        self.0.active.store(false, Ordering::Relaxed);
    }
}

/// `fut`, with every poll measured by `meter`.
pub(crate) async fn metered<F: Future>(meter: Arc<SliceMeter>, fut: F) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    std::future::poll_fn(move |cx| {
        let _slice = meter.begin();
        fut.as_mut().poll(cx)
    })
    .await
}

#[cfg(test)]
mod tests {
    use std::task::Poll;

    use super::*;
    use crate::namespaces::NsCounters;

    fn spin_cpu() {
        let start = thread_cpu_nanos();
        let mut x = 0u64;
        while thread_cpu_nanos().saturating_sub(start) < 2_000_000 {
            x = std::hint::black_box(x.wrapping_add(1));
        }
    }

    #[test]
    fn every_poll_is_charged_and_nothing_outside_them() {
        let counters = Arc::new(NsCounters::default());
        let meter = Arc::new(SliceMeter::new(Arc::new(NsCpu::new(
            counters.clone(),
            None,
            std::time::Duration::from_millis(10),
        ))));
        let cpu = || counters.cpu_nanos.load(Ordering::Relaxed);
        let held = || counters.worker_nanos.load(Ordering::Relaxed);
        spin_cpu();
        meter.charge_now();
        assert_eq!(cpu(), 0, "no slice is running");
        let mut polls = 0;
        let fut = std::future::poll_fn(|cx| {
            polls += 1;
            spin_cpu();
            if polls < 3 {
                cx.waker().wake_by_ref();
                Poll::Pending
            } else {
                Poll::Ready(polls)
            }
        });
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        assert_eq!(rt.block_on(metered(meter.clone(), fut)), 3);
        assert!(cpu() >= 6_000_000, "three 2 ms slices: {} ns", cpu());
        assert!(
            held() >= cpu(),
            "a slice holds its worker at least as long as it runs"
        );
        let (after, held_after) = (cpu(), held());
        spin_cpu();
        meter.charge_now();
        assert_eq!(cpu(), after, "the slice ended with the poll");
        assert_eq!(held(), held_after);
    }
}
