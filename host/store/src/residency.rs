//! Where blocks come to be held and stop being held, tier by tier (the hot pool, cold RAM, the
//! redb file), as a bounded journal one listener drains: the host's events (`memoria serve`
//! with `[store.remote] events = true`) turn these moves into `stored`/`removed` entries.
//!
//! Recording never blocks on the listener and never allocates: the journal is preallocated and
//! a move past its capacity is dropped, which [`Residency::drain`] reports so the listener can
//! resynchronise. Hashes are the pool's (salted) chain hashes: host-internal, never published.

use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Mutex, MutexGuard};

use memoria_kv::BlockHash;

use crate::remote::events::Tier;

/// One change: block `hash` is now held (`held`) or no longer held in `tier`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Move {
    pub hash: BlockHash,
    pub tier: Tier,
    pub held: bool,
}

/// The journal of [`Move`]s.
#[derive(Debug)]
pub struct Residency {
    moves: Mutex<Vec<Move>>,
    cap: usize,
    overflowed: AtomicBool,
}

impl Residency {
    /// An empty journal holding at most `cap` moves (at least 1) between drains.
    pub fn new(cap: usize) -> Residency {
        let cap = cap.max(1);
        Residency {
            moves: Mutex::new(Vec::with_capacity(cap)),
            cap,
            overflowed: AtomicBool::new(false),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Move>> {
        crate::sync::lock(&self.moves)
    }

    /// Records a move (dropped, and reported by the next drain, when the journal is full).
    pub fn record(&self, hash: BlockHash, tier: Tier, held: bool) {
        let mut g = self.lock();
        if g.len() < self.cap {
            g.push(Move { hash, tier, held });
        } else {
            self.overflowed.store(true, Relaxed);
        }
    }

    /// Moves the recorded moves into `out` (cleared first), oldest first; true when some were
    /// dropped since the last drain. `out` should have the journal's capacity: the two buffers
    /// are swapped, so neither side allocates once both are sized.
    pub fn drain(&self, out: &mut Vec<Move>) -> bool {
        out.clear();
        if out.capacity() < self.cap {
            out.reserve_exact(self.cap);
        }
        std::mem::swap(&mut *self.lock(), out);
        self.overflowed.swap(false, Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(i: u8) -> BlockHash {
        BlockHash([i; 32])
    }

    #[test]
    fn moves_are_drained_in_order_and_an_overflow_is_reported_once() {
        let r = Residency::new(2);
        let mut out = Vec::new();
        assert!(!r.drain(&mut out));
        assert!(out.is_empty());
        r.record(h(1), Tier::Hot, false);
        r.record(h(1), Tier::Cold, true);
        r.record(h(2), Tier::Disk, true);
        assert!(r.drain(&mut out), "the third move overflowed");
        assert_eq!(
            out,
            vec![
                Move {
                    hash: h(1),
                    tier: Tier::Hot,
                    held: false
                },
                Move {
                    hash: h(1),
                    tier: Tier::Cold,
                    held: true
                },
            ]
        );
        assert!(!r.drain(&mut out), "reported once");
        assert!(out.is_empty());
        r.record(h(3), Tier::Disk, false);
        assert!(!r.drain(&mut out));
        assert_eq!(out.len(), 1);
    }
}
