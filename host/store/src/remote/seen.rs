//! What this host knows about blocks on the remote server: hashes it wrote or fetched (so they
//! are not written again, and a prefetch takes them to be held here) and sighting counts for
//! the `second-hit` write mode. Both are bounded ([`CAP`] entries each, oldest forgotten
//! first): forgetting only costs a redundant write or lookup. A block becomes known when the
//! server acknowledged its write or served it, and stays known for half the keys' TTL (so a
//! block still in use is written again, refreshing its key, before the server expires it); it
//! is forgotten when it leaves this host's tiers ([`Seen::forget`]: a later prompt looks it up
//! again), and all are forgotten when the breaker opens (a server that was down may have
//! restarted empty). Blocks found missing are remembered ([`LOST_CAP`] at most), so that this
//! host writes them again when it next uses them ([`Seen::take_lost`]): one a lookup found
//! absent ([`Seen::mark_lost`]), and every known one when the server's key count collapses (a
//! restart, a flush: [`Seen::known_lost`]); one the server serves or acknowledges again is no
//! longer missing.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use memoria_kv::BlockHash;

/// Entries remembered per set.
pub const CAP: usize = 1 << 18;
/// Blocks found missing remembered at most (oldest forgotten first).
pub const LOST_CAP: usize = 4096;

#[derive(Default)]
struct Inner {
    /// Each known block and when it became known.
    known: HashMap<BlockHash, Instant>,
    known_order: VecDeque<BlockHash>,
    sightings: HashMap<BlockHash, u32>,
    sight_order: VecDeque<BlockHash>,
    /// Blocks a lookup found missing on the server, not yet written again.
    lost: HashSet<BlockHash>,
    lost_order: VecDeque<BlockHash>,
}

pub(crate) struct Seen {
    inner: Mutex<Inner>,
    /// How long a block stays known after its write or fetch.
    fresh_for: Duration,
}

impl Seen {
    /// Known blocks stay known for `fresh_for` (half the keys' TTL).
    pub fn new(fresh_for: Duration) -> Seen {
        Seen {
            inner: Mutex::default(),
            fresh_for,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        crate::sync::lock(&self.inner)
    }

    pub fn is_known(&self, h: &BlockHash) -> bool {
        self.lock()
            .known
            .get(h)
            .is_some_and(|at| at.elapsed() < self.fresh_for)
    }

    pub fn mark_known(&self, h: &BlockHash) {
        let mut g = self.lock();
        if g.lost.remove(h) {
            g.lost_order.retain(|x| x != h);
        }
        if g.known.insert(*h, Instant::now()).is_none() {
            g.known_order.push_back(*h);
            while g.known_order.len() > CAP {
                if let Some(old) = g.known_order.pop_front() {
                    g.known.remove(&old);
                }
            }
        }
    }

    /// Forgets one block (it left this host; the server may still hold it).
    pub fn forget(&self, h: &BlockHash) {
        self.lock().known.remove(h);
    }

    /// Forgets every known block (the server may have lost them: it was down).
    pub fn forget_known(&self) {
        let mut g = self.lock();
        g.known.clear();
        g.known_order.clear();
    }

    /// Forgets every known block and takes the most recent [`LOST_CAP`] of them to be missing
    /// (the server lost most of its keys: a restart, a flush), so this host writes them again
    /// when it next uses them.
    pub fn known_lost(&self) {
        let mut g = self.lock();
        let Inner {
            known,
            known_order,
            lost,
            lost_order,
            ..
        } = &mut *g;
        for h in known_order.iter().rev() {
            if lost_order.len() >= LOST_CAP {
                break;
            }
            if known.contains_key(h) && lost.insert(*h) {
                lost_order.push_front(*h);
            }
        }
        known.clear();
        known_order.clear();
    }

    /// Records that a lookup found the block missing on the server (it is no longer known).
    pub fn mark_lost(&self, h: &BlockHash) {
        let mut g = self.lock();
        g.known.remove(h);
        if g.lost.insert(*h) {
            g.lost_order.push_back(*h);
            while g.lost_order.len() > LOST_CAP {
                if let Some(old) = g.lost_order.pop_front() {
                    g.lost.remove(&old);
                }
            }
        }
    }

    /// Whether any block found missing waits to be written again.
    pub fn any_lost(&self) -> bool {
        !self.lock().lost.is_empty()
    }

    /// Whether the block was found missing (and forgets that: the caller writes it again).
    pub fn take_lost(&self, h: &BlockHash) -> bool {
        let mut g = self.lock();
        let was = g.lost.remove(h);
        if was {
            g.lost_order.retain(|x| x != h);
        }
        was
    }

    /// Counts a sighting; returns the count so far (saturating).
    pub fn sight(&self, h: &BlockHash) -> u32 {
        let mut g = self.lock();
        let Inner {
            sightings,
            sight_order,
            ..
        } = &mut *g;
        let n = sightings.entry(*h).or_insert_with(|| {
            sight_order.push_back(*h);
            0
        });
        *n = n.saturating_add(1);
        let n = *n;
        while sight_order.len() > CAP {
            if let Some(old) = sight_order.pop_front() {
                sightings.remove(&old);
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_and_sightings_are_bounded() {
        let s = Seen::new(Duration::from_secs(3600));
        let h = |i: usize| BlockHash(blake3::hash(&i.to_le_bytes()).into());
        assert_eq!((s.sight(&h(0)), s.sight(&h(0))), (1, 2));
        s.mark_known(&h(0));
        assert!(s.is_known(&h(0)));
        for i in 1..=CAP {
            s.mark_known(&h(i));
            s.sight(&h(i));
        }
        assert!(!s.is_known(&h(0)), "oldest forgotten");
        assert_eq!(s.sight(&h(0)), 1);
        assert!(s.is_known(&h(CAP)));
    }

    #[test]
    fn a_block_found_missing_is_taken_once_and_the_set_is_bounded() {
        let s = Seen::new(Duration::from_secs(3600));
        let h = |i: usize| BlockHash(blake3::hash(&i.to_le_bytes()).into());
        s.mark_known(&h(0));
        s.mark_lost(&h(0));
        assert!(!s.is_known(&h(0)), "missing on the server: no longer known");
        assert!(s.any_lost());
        assert!(s.take_lost(&h(0)) && !s.take_lost(&h(0)), "taken once");
        assert!(!s.any_lost());
        for i in 1..=LOST_CAP + 1 {
            s.mark_lost(&h(i));
        }
        assert!(!s.take_lost(&h(1)), "oldest forgotten");
        assert!(s.take_lost(&h(LOST_CAP + 1)));
    }

    #[test]
    fn when_the_server_loses_its_keys_known_blocks_become_missing_until_seen_there_again() {
        let s = Seen::new(Duration::from_secs(3600));
        let h = |i: u8| BlockHash([i; 32]);
        s.mark_known(&h(1));
        s.mark_known(&h(2));
        s.mark_known(&h(3));
        s.forget(&h(3));
        s.known_lost();
        assert!(!s.is_known(&h(1)) && !s.is_known(&h(2)));
        assert!(
            !s.take_lost(&h(3)),
            "it had left this host: nothing to write"
        );
        // Served by the server again (another host wrote it): no longer missing.
        s.mark_known(&h(2));
        assert!(!s.take_lost(&h(2)));
        assert!(s.take_lost(&h(1)));
        assert!(!s.any_lost());
    }

    #[test]
    fn known_blocks_go_stale_and_can_be_forgotten_one_by_one() {
        let s = Seen::new(Duration::from_millis(40));
        let h = |i: u8| BlockHash([i; 32]);
        s.mark_known(&h(1));
        s.mark_known(&h(2));
        s.forget(&h(1));
        assert!(!s.is_known(&h(1)) && s.is_known(&h(2)));
        std::thread::sleep(Duration::from_millis(60));
        assert!(!s.is_known(&h(2)), "older than half the TTL: written again");
        s.mark_known(&h(2));
        assert!(s.is_known(&h(2)), "a new write or fetch renews it");
    }
}
