//! What this host knows about blocks on the remote server: hashes it wrote or fetched (so they
//! are not written again) and sighting counts for the `second-hit` write mode. Both are bounded
//! ([`CAP`] entries each, oldest forgotten first): forgetting only costs a redundant write.
//! A block becomes known when the server acknowledged its write or served it; all are
//! forgotten when the breaker opens (a server that was down may have restarted empty).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Mutex, MutexGuard};

use memoria_kv::BlockHash;

/// Entries remembered per set.
pub const CAP: usize = 1 << 18;

#[derive(Default)]
struct Inner {
    known: HashSet<BlockHash>,
    known_order: VecDeque<BlockHash>,
    sightings: HashMap<BlockHash, u32>,
    sight_order: VecDeque<BlockHash>,
}

#[derive(Default)]
pub(crate) struct Seen {
    inner: Mutex<Inner>,
}

impl Seen {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn is_known(&self, h: &BlockHash) -> bool {
        self.lock().known.contains(h)
    }

    pub fn mark_known(&self, h: &BlockHash) {
        let mut g = self.lock();
        if g.known.insert(*h) {
            g.known_order.push_back(*h);
            while g.known_order.len() > CAP {
                if let Some(old) = g.known_order.pop_front() {
                    g.known.remove(&old);
                }
            }
        }
    }

    /// Forgets every known block (the server may have lost them: it was down).
    pub fn forget_known(&self) {
        let mut g = self.lock();
        g.known.clear();
        g.known_order.clear();
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
        let s = Seen::default();
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
}
