//! The routing keys a host has announced as held, least recently served first, bounded by the
//! hot pool's block count: serving a prompt refreshes its keys and announces the new ones;
//! going past the bound retires the oldest, which are announced as removed. It stands in for
//! the pool's own LRU (the pool keys blocks by salted hashes the router cannot know).

use std::collections::{BTreeMap, HashMap};

use memoria_kv::BlockHash;

/// A bounded LRU set of routing keys.
#[derive(Debug)]
pub struct Advertised {
    stamps: HashMap<BlockHash, u64>,
    order: BTreeMap<u64, BlockHash>,
    next: u64,
    cap: usize,
}

impl Advertised {
    /// An empty set holding at most `cap` keys (at least 1).
    pub fn new(cap: usize) -> Advertised {
        Advertised {
            stamps: HashMap::new(),
            order: BTreeMap::new(),
            next: 0,
            cap: cap.max(1),
        }
    }

    /// Marks `keys` as just served: the keys not held before, and the keys retired to stay
    /// within the bound (never one of `keys` unless `keys` alone exceeds it).
    pub fn serve(&mut self, keys: &[BlockHash]) -> (Vec<BlockHash>, Vec<BlockHash>) {
        let mut added = Vec::new();
        for k in keys {
            let stamp = self.next;
            self.next += 1;
            match self.stamps.insert(*k, stamp) {
                Some(old) => {
                    self.order.remove(&old);
                }
                None => added.push(*k),
            }
            self.order.insert(stamp, *k);
        }
        let mut removed = Vec::new();
        while self.stamps.len() > self.cap {
            let Some((_, k)) = self.order.pop_first() else {
                break;
            };
            self.stamps.remove(&k);
            removed.push(k);
        }
        added.retain(|k| self.stamps.contains_key(k));
        (added, removed)
    }

    /// Every key held, least recently served first.
    pub fn keys(&self) -> Vec<BlockHash> {
        self.order.values().copied().collect()
    }

    /// Keys held.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.stamps.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(i: u8) -> BlockHash {
        BlockHash([i; 32])
    }

    #[test]
    fn new_keys_are_announced_and_the_oldest_retired() {
        let mut a = Advertised::new(3);
        assert_eq!(a.serve(&[k(1), k(2)]), (vec![k(1), k(2)], vec![]));
        assert_eq!(a.serve(&[k(1)]), (vec![], vec![]));
        // k(2) is now the oldest.
        assert_eq!(a.serve(&[k(3), k(4)]), (vec![k(3), k(4)], vec![k(2)]));
        assert_eq!(a.len(), 3);
        assert_eq!(
            a.keys(),
            vec![k(1), k(3), k(4)],
            "least recently served first"
        );
        let mut tiny = Advertised::new(1);
        assert_eq!(tiny.serve(&[k(1), k(2)]), (vec![k(2)], vec![k(1)]));
    }
}
