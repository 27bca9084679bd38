//! What the router knows a host holds, from its events (`--events`): the routing keys of its
//! blocks under its current epoch and the tiers holding each (hot pool, cold RAM, disk),
//! bounded (the oldest forgotten first), and where its stream was read to. A new epoch or a
//! `cleared` event starts the set over; `stored` adds a tier to a key, `removed` takes one
//! away, and a key held in no tier is gone. A block counts as held whatever its tier: the host
//! reads its own cold RAM or disk far faster than anyone recomputes it.

use std::collections::{HashMap, VecDeque};

use memoria_kv::BlockHash;
use memoria_store::remote::events::{Event, Kind};

/// Most keys kept per host.
pub const MAX_KEYS: usize = 1 << 20;

/// One host's announced keys.
#[derive(Debug)]
pub struct HostKeys {
    /// The stream read (None: the host has no live liveness key).
    pub stream: Option<String>,
    /// The last stream entry id read (`0`: from the start).
    pub last_id: String,
    /// The epoch the keys belong to.
    pub epoch: u64,
    /// Each key's tiers (a bit per [`Tier`]; never 0).
    keys: HashMap<BlockHash, u8>,
    order: VecDeque<BlockHash>,
    cap: usize,
}

impl Default for HostKeys {
    fn default() -> Self {
        HostKeys::with_cap(MAX_KEYS)
    }
}

impl HostKeys {
    /// An empty set keeping at most `cap` keys.
    pub fn with_cap(cap: usize) -> HostKeys {
        HostKeys {
            stream: None,
            last_id: "0".into(),
            epoch: 0,
            keys: HashMap::new(),
            order: VecDeque::new(),
            cap: cap.max(1),
        }
    }

    /// Follows `stream` under `epoch` (the liveness key's): a different stream or epoch
    /// starts over from the stream's beginning.
    pub fn follow(&mut self, stream: &str, epoch: u64) {
        if self.stream.as_deref() != Some(stream) || self.epoch != epoch {
            self.reset(Some(stream.to_string()), epoch);
        }
    }

    /// Forgets everything (the host left).
    pub fn forget(&mut self) {
        self.reset(None, 0);
    }

    fn reset(&mut self, stream: Option<String>, epoch: u64) {
        self.stream = stream;
        self.last_id = "0".into();
        self.epoch = epoch;
        self.keys.clear();
        self.order.clear();
    }

    /// Applies one event; events of another epoch than the one followed are ignored (an older
    /// run's entries still in the stream, or a newer run's before its liveness key is seen).
    pub fn apply(&mut self, e: &Event) {
        if e.epoch != self.epoch {
            return;
        }
        match e.kind {
            Kind::Cleared => {
                self.keys.clear();
                self.order.clear();
            }
            Kind::Removed => {
                let bit = e.tier.bit();
                for h in &e.hashes {
                    if let Some(t) = self.keys.get_mut(h) {
                        *t &= !bit;
                        if *t == 0 {
                            self.keys.remove(h);
                        }
                    }
                }
                if self.order.len() > 2 * self.keys.len() + 1024 {
                    let keys = &self.keys;
                    self.order.retain(|h| keys.contains_key(h));
                }
            }
            Kind::Stored => {
                let bit = e.tier.bit();
                for h in &e.hashes {
                    let t = self.keys.entry(*h).or_insert(0);
                    if *t == 0 {
                        self.order.push_back(*h);
                    }
                    *t |= bit;
                }
                while self.keys.len() > self.cap {
                    match self.order.pop_front() {
                        Some(old) => {
                            self.keys.remove(&old);
                        }
                        None => break,
                    }
                }
            }
        }
    }

    /// How many leading keys of `chain` the host holds (each one, not only the last: a host
    /// missing an early block would recompute from there).
    pub fn matched(&self, chain: &[BlockHash]) -> usize {
        chain
            .iter()
            .take_while(|h| self.keys.contains_key(h))
            .count()
    }

    /// The tiers announced for `key` (none when not held).
    #[cfg(test)]
    pub fn tiers(&self, key: &BlockHash) -> Vec<memoria_store::remote::events::Tier> {
        use memoria_store::remote::events::Tier;
        let t = self.keys.get(key).copied().unwrap_or(0);
        Tier::ALL
            .into_iter()
            .filter(|&x| t & x.bit() != 0)
            .collect()
    }

    /// Keys held.
    pub fn len(&self) -> usize {
        self.keys.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memoria_store::remote::events::Tier;

    fn k(i: u8) -> BlockHash {
        BlockHash([i; 32])
    }

    fn ev(epoch: u64, kind: Kind, hashes: &[u8]) -> Event {
        ev_in(epoch, kind, Tier::Hot, hashes)
    }

    fn ev_in(epoch: u64, kind: Kind, tier: Tier, hashes: &[u8]) -> Event {
        Event {
            epoch,
            seq: 1,
            kind,
            tier,
            hashes: hashes.iter().map(|&i| k(i)).collect(),
        }
    }

    #[test]
    fn a_key_is_held_while_some_tier_holds_it() {
        let mut h = HostKeys::with_cap(8);
        h.follow("m:events:a", 1);
        h.apply(&ev_in(1, Kind::Stored, Tier::Hot, &[1, 2]));
        // Block 1 leaves the pool for cold RAM: still held.
        h.apply(&ev_in(1, Kind::Removed, Tier::Hot, &[1]));
        h.apply(&ev_in(1, Kind::Stored, Tier::Cold, &[1]));
        assert_eq!(h.tiers(&k(1)), vec![Tier::Cold]);
        assert_eq!(h.matched(&[k(1), k(2)]), 2);
        h.apply(&ev_in(1, Kind::Stored, Tier::Disk, &[1]));
        h.apply(&ev_in(1, Kind::Removed, Tier::Cold, &[1]));
        assert_eq!(h.tiers(&k(1)), vec![Tier::Disk]);
        // A removal from a tier that did not hold it changes nothing.
        h.apply(&ev_in(1, Kind::Removed, Tier::Hot, &[1]));
        assert_eq!(h.matched(&[k(1), k(2)]), 2);
        h.apply(&ev_in(1, Kind::Removed, Tier::Disk, &[1]));
        assert_eq!(h.matched(&[k(1), k(2)]), 0, "held nowhere");
        assert_eq!(h.len(), 1);
        h.apply(&ev_in(1, Kind::Stored, Tier::Disk, &[1]));
        assert_eq!(h.tiers(&k(1)), vec![Tier::Disk]);
        assert_eq!(h.len(), 2);
    }

    #[test]
    fn events_build_the_set_and_epochs_reset_it() {
        let mut h = HostKeys::with_cap(3);
        h.follow("m:events:a", 7);
        h.apply(&ev(7, Kind::Stored, &[1, 2, 3]));
        assert_eq!(h.matched(&[k(1), k(2), k(9)]), 2);
        assert_eq!(h.matched(&[k(2), k(1)]), 2);
        assert_eq!(h.matched(&[k(9), k(1)]), 0);
        h.apply(&ev(6, Kind::Stored, &[9]));
        assert_eq!(h.matched(&[k(9)]), 0, "another epoch's event");
        h.apply(&ev(7, Kind::Removed, &[2]));
        assert_eq!(h.matched(&[k(1), k(2)]), 1);
        h.apply(&ev(7, Kind::Stored, &[4, 5]));
        assert_eq!(h.len(), 3, "bounded: the oldest key went");
        assert_eq!(h.matched(&[k(1)]), 0);
        h.last_id = "5-0".into();
        h.follow("m:events:a", 7);
        assert_eq!(h.last_id, "5-0");
        h.follow("m:events:a", 8);
        assert_eq!((h.len(), h.last_id.as_str()), (0, "0"));
        h.apply(&ev(8, Kind::Stored, &[1]));
        h.apply(&ev(8, Kind::Cleared, &[]));
        assert_eq!(h.len(), 0);
        h.apply(&ev(8, Kind::Stored, &[1]));
        h.forget();
        assert_eq!((h.len(), h.stream.clone()), (0, None));
    }
}
