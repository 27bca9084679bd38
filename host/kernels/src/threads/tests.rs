//! Pool tests: every task runs once, results do not depend on the pool size, panics reach the
//! caller without hanging the workers, nesting and concurrent callers run inline.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::*;

#[test]
fn every_task_runs_exactly_once() {
    for threads in [1, 2, 3, 7] {
        let pool = Pool::new(threads);
        assert_eq!(pool.threads(), threads);
        for tasks in [0, 1, 2, 5, 64, 1000] {
            let hits: Vec<AtomicUsize> = (0..tasks).map(|_| AtomicUsize::new(0)).collect();
            for _ in 0..3 {
                pool.for_each(tasks, &|t| {
                    hits[t].fetch_add(1, Ordering::Relaxed);
                });
            }
            assert!(
                hits.iter().all(|h| h.load(Ordering::Relaxed) == 3),
                "{threads} {tasks}"
            );
        }
    }
}

#[test]
fn chunks_cover_the_slice_once() {
    let pool = Pool::new(3);
    let mut data = vec![0u32; 1001];
    pool.install(|| {
        for_each_chunk_mut(&mut data, 64, |i, c| {
            for (j, v) in c.iter_mut().enumerate() {
                *v += (i * 64 + j) as u32;
            }
        })
    });
    assert!(data.iter().enumerate().all(|(i, &v)| v == i as u32));
}

/// A panic in a task that runs on a worker (not the caller) reaches the caller; the pool keeps
/// working afterwards.
#[test]
fn worker_panic_propagates_without_deadlock() {
    let pool = Pool::new(2);
    let caller = std::thread::current().id();
    let started = AtomicUsize::new(0);
    let r = catch_unwind(AssertUnwindSafe(|| {
        pool.for_each(2, &|_| {
            started.fetch_add(1, Ordering::SeqCst);
            // Both tasks are running at once, so one of them is on the worker.
            let t0 = Instant::now();
            while started.load(Ordering::SeqCst) < 2 && t0.elapsed() < Duration::from_secs(10) {
                std::hint::spin_loop();
            }
            if std::thread::current().id() != caller {
                panic!("task on the worker");
            }
        })
    }));
    let msg = r.expect_err("the worker's panic must reach the caller");
    assert_eq!(msg.downcast_ref::<&str>(), Some(&"task on the worker"));
    let n = AtomicUsize::new(0);
    pool.for_each(100, &|_| {
        n.fetch_add(1, Ordering::Relaxed);
    });
    assert_eq!(n.load(Ordering::Relaxed), 100);
}

/// A panic on the caller's own share waits for the workers, then resumes on the caller.
#[test]
fn caller_panic_propagates_after_workers_finish() {
    let pool = Pool::new(3);
    let caller = std::thread::current().id();
    let done = AtomicUsize::new(0);
    let r = catch_unwind(AssertUnwindSafe(|| {
        pool.for_each(64, &|_| {
            if std::thread::current().id() == caller {
                panic!("task on the caller");
            }
            std::thread::sleep(Duration::from_millis(1));
            done.fetch_add(1, Ordering::SeqCst);
        })
    }));
    assert!(r.is_err());
    // Nothing still runs once for_each has returned.
    let after = done.load(Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(done.load(Ordering::SeqCst), after);
    let n = AtomicUsize::new(0);
    pool.for_each(10, &|_| {
        n.fetch_add(1, Ordering::Relaxed);
    });
    assert_eq!(n.load(Ordering::Relaxed), 10);
}

#[test]
fn nested_and_concurrent_calls_run_inline() {
    let pool = Pool::new(2);
    let total = AtomicUsize::new(0);
    std::thread::scope(|sc| {
        for _ in 0..4 {
            sc.spawn(|| {
                for _ in 0..200 {
                    pool.for_each(4, &|_| {
                        pool.for_each(3, &|_| {
                            total.fetch_add(1, Ordering::Relaxed);
                        });
                    });
                }
            });
        }
    });
    assert_eq!(total.load(Ordering::Relaxed), 4 * 200 * 4 * 3);
}

/// Workers park after spinning and wake up for the next job.
#[test]
fn parked_workers_wake_up() {
    let pool = Pool::new(3);
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(5));
        let n = AtomicUsize::new(0);
        pool.for_each(30, &|_| {
            n.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(n.load(Ordering::Relaxed), 30);
    }
}

#[test]
fn install_switches_the_current_pool() {
    let pool = Pool::new(5);
    assert_eq!(pool.install(current_threads), 5);
    let inner = Pool::new(2);
    pool.install(|| {
        assert_eq!(inner.install(current_threads), 2);
        assert_eq!(current_threads(), 5);
    });
}
