//! Admission control: one gate per namespace with `max_concurrent` running slots and a queue of
//! at most `max_queue` waiters. A request that finds both full is refused at once (429 with
//! Retry-After); a request that got in keeps its slot until its response is finished, so
//! accepted work never fails because of load. Invariant: `queued` counts exactly the waiters
//! whose future is alive (a dropped waiter leaves the queue).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use memoria_tenant::Limits;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, TryAcquireError};

/// One namespace's slots and queue.
#[derive(Debug)]
pub struct Gate {
    sem: Arc<Semaphore>,
    pub max_concurrent: usize,
    pub max_queue: usize,
    queued: AtomicUsize,
    running: Arc<AtomicUsize>,
    pub rejected: AtomicU64,
    pub admitted: AtomicU64,
}

/// A running slot; released when dropped.
#[derive(Debug)]
pub struct Permit {
    _permit: OwnedSemaphorePermit,
    running: Arc<AtomicUsize>,
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.running.fetch_sub(1, Relaxed);
    }
}

struct QueueSlot<'a>(&'a AtomicUsize);

impl Drop for QueueSlot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

impl Gate {
    /// A gate for these limits.
    pub fn new(max_concurrent: usize, max_queue: usize) -> Gate {
        Gate {
            sem: Arc::new(Semaphore::new(max_concurrent.max(1))),
            max_concurrent: max_concurrent.max(1),
            max_queue,
            queued: AtomicUsize::new(0),
            running: Arc::new(AtomicUsize::new(0)),
            rejected: AtomicU64::new(0),
            admitted: AtomicU64::new(0),
        }
    }

    /// Takes a slot, waiting in the queue if there is room; `None` when both are full.
    pub async fn admit(&self) -> Option<Permit> {
        let permit = match self.sem.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(TryAcquireError::Closed) => return None,
            Err(TryAcquireError::NoPermits) => {
                if self.queued.fetch_add(1, Relaxed) >= self.max_queue {
                    self.queued.fetch_sub(1, Relaxed);
                    self.rejected.fetch_add(1, Relaxed);
                    return None;
                }
                let _slot = QueueSlot(&self.queued);
                self.sem.clone().acquire_owned().await.ok()?
            }
        };
        self.running.fetch_add(1, Relaxed);
        self.admitted.fetch_add(1, Relaxed);
        Some(Permit {
            _permit: permit,
            running: self.running.clone(),
        })
    }

    /// Requests waiting for a slot.
    pub fn queued(&self) -> usize {
        self.queued.load(Relaxed)
    }

    /// Requests holding a slot.
    pub fn running(&self) -> usize {
        self.running.load(Relaxed)
    }
}

/// Every namespace's gate, by namespace name.
#[derive(Debug, Default)]
pub struct Admission {
    gates: Mutex<HashMap<String, Arc<Gate>>>,
}

impl Admission {
    /// The gate of `ns`, created from `limits` on first use or when the limits changed (requests
    /// admitted by a replaced gate keep their slots until they finish).
    pub fn gate(&self, ns: &str, limits: &Limits) -> Arc<Gate> {
        let mut gates = self.gates.lock().unwrap_or_else(|e| e.into_inner());
        match gates.get(ns) {
            Some(g)
                if g.max_concurrent == limits.max_concurrent.max(1)
                    && g.max_queue == limits.max_queue =>
            {
                g.clone()
            }
            _ => {
                let g = Arc::new(Gate::new(limits.max_concurrent, limits.max_queue));
                gates.insert(ns.to_string(), g.clone());
                g
            }
        }
    }

    /// Every gate, sorted by namespace.
    pub fn snapshot(&self) -> Vec<(String, Arc<Gate>)> {
        let gates = self.gates.lock().unwrap_or_else(|e| e.into_inner());
        let mut v: Vec<_> = gates.iter().map(|(k, g)| (k.clone(), g.clone())).collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn full_gate_refuses_and_queue_drains() {
        let g = Arc::new(Gate::new(1, 1));
        let first = g.admit().await.expect("slot");
        let g2 = g.clone();
        let waiter = tokio::spawn(async move { g2.admit().await.is_some() });
        while g.queued() == 0 {
            tokio::task::yield_now().await;
        }
        assert!(g.admit().await.is_none(), "slot and queue are full");
        assert_eq!(g.rejected.load(Relaxed), 1);
        drop(first);
        assert!(waiter.await.expect("join"));
        assert_eq!(g.queued(), 0);
        assert_eq!(g.running(), 0);
    }
}
