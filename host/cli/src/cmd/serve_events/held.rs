//! What this host has announced it holds: for each block (by the pool's hash, host-internal)
//! the routing keys it was served under and the tiers holding it (hot pool, cold RAM, disk).
//! A served prompt marks its blocks hot; the store's residency moves (evicted from the pool,
//! stored in or removed from cold RAM or disk) flip tiers. A block held in no tier keeps its
//! routing keys (a later move may bring it back, e.g. the demotion thread storing in cold RAM
//! what the pool just evicted). Moves of blocks not served yet are kept a while (bounded), so
//! a block written to disk while its request ran is announced there once it is served.
//! Bounded: past the bound the least recently served block is forgotten and announced removed
//! from every tier it was in. Every change comes out as an [`Announce`] of routing keys only.
//! What is on disk outlives the process (see `saved`): [`Held::on_disk`] lists it for the store
//! and [`Held::restore`] takes it back after a restart.

use std::collections::{BTreeMap, HashMap, VecDeque};

use memoria_kv::BlockHash;
use memoria_store::Move;
use memoria_store::remote::events::{Kind, Publisher, Tier};

/// Most routing keys (labels) kept per block (as many as the store's record keeps).
const MAX_ROUTES: usize = memoria_store::routes::MAX_ROUTES_PER_BLOCK;
/// Most blocks whose moves are kept before they are served (oldest forgotten first).
const MAX_UNSERVED: usize = 16_384;

#[derive(Debug)]
struct Entry {
    routes: Vec<BlockHash>,
    tiers: u8,
    stamp: u64,
}

/// Changes to announce: each routing key's final state per tier (a key flipped twice within
/// one batch is announced once, as it ended).
#[derive(Debug, Default)]
pub struct Announce {
    tiers: [HashMap<BlockHash, bool>; 3],
}

impl Announce {
    fn set(&mut self, tier: Tier, routes: &[BlockHash], held: bool) {
        for r in routes {
            self.tiers[tier.index()].insert(*r, held);
        }
    }

    /// The keys announced stored and removed in `tier`, each sorted.
    pub fn lists(&self, tier: Tier) -> (Vec<BlockHash>, Vec<BlockHash>) {
        let (mut stored, mut removed): (Vec<_>, Vec<_>) = (Vec::new(), Vec::new());
        for (k, &held) in &self.tiers[tier.index()] {
            if held {
                stored.push(*k);
            } else {
                removed.push(*k);
            }
        }
        stored.sort_unstable();
        removed.sort_unstable();
        (stored, removed)
    }

    /// Queues the changes on `p` (removals first) and empties this batch.
    pub fn send(&mut self, p: &Publisher) {
        for t in Tier::ALL {
            let (stored, removed) = self.lists(t);
            if !removed.is_empty() {
                p.send(Kind::Removed, t, removed);
            }
            if !stored.is_empty() {
                p.send(Kind::Stored, t, stored);
            }
            self.tiers[t.index()].clear();
        }
    }
}

/// The blocks announced as held.
#[derive(Debug)]
pub struct Held {
    entries: HashMap<BlockHash, Entry>,
    order: BTreeMap<u64, BlockHash>,
    next: u64,
    cap: usize,
    /// Tiers of blocks moved before being served, and their arrival order.
    unserved: HashMap<BlockHash, u8>,
    unserved_order: VecDeque<BlockHash>,
    /// Changes so far (a saver compares it with the count it last saved at).
    changes: u64,
}

impl Held {
    /// Empty, tracking at most `cap` blocks (at least 1).
    pub fn new(cap: usize) -> Held {
        Held {
            entries: HashMap::new(),
            order: BTreeMap::new(),
            next: 0,
            cap: cap.max(1),
            unserved: HashMap::new(),
            unserved_order: VecDeque::new(),
            changes: 0,
        }
    }

    /// Changes so far: served blocks, tier moves of served blocks, forgetting.
    pub fn changes(&self) -> u64 {
        self.changes
    }

    /// The blocks held on disk with their routing keys, least recently served first.
    pub fn on_disk(&self) -> Vec<memoria_store::RouteEntry> {
        self.order
            .values()
            .filter_map(|p| Some((p, self.entries.get(p)?)))
            .filter(|(_, e)| e.tiers & Tier::Disk.bit() != 0 && !e.routes.is_empty())
            .map(|(p, e)| memoria_store::RouteEntry {
                block: *p,
                routes: e.routes.clone(),
            })
            .collect()
    }

    /// A block a previous run of this host announced on disk, and the disk still holds:
    /// held there again under its saved routing keys (as if just served, for the bound).
    pub fn restore(&mut self, block: BlockHash, routes: &[BlockHash], out: &mut Announce) {
        let e = self.touch(block);
        for r in routes {
            if !e.routes.contains(r) && e.routes.len() < MAX_ROUTES {
                e.routes.push(*r);
            }
        }
        e.tiers |= Tier::Disk.bit();
        out.set(Tier::Disk, &e.routes, true);
        self.changes += 1;
        self.evict_past_cap(out);
    }

    /// A prompt was served: its whole blocks `pool[i]`, routed as `route[i]`, are hot.
    pub fn serve(&mut self, pool: &[BlockHash], route: &[BlockHash], out: &mut Announce) {
        for (p, r) in pool.iter().zip(route) {
            let e = self.touch(*p);
            if !e.routes.contains(r) && e.routes.len() < MAX_ROUTES {
                e.routes.push(*r);
                // A new label of a block held already: it is held there under this key too.
                for t in Tier::ALL.into_iter().filter(|&t| e.tiers & t.bit() != 0) {
                    out.set(t, std::slice::from_ref(r), true);
                }
            }
            if e.tiers & Tier::Hot.bit() == 0 {
                e.tiers |= Tier::Hot.bit();
                out.set(Tier::Hot, &e.routes, true);
            }
        }
        self.changes += 1;
        self.evict_past_cap(out);
    }

    /// Block `p`'s entry, made the most recently served; a new one takes the tiers its moves
    /// recorded before it was served.
    fn touch(&mut self, p: BlockHash) -> &mut Entry {
        let stamp = self.next;
        self.next += 1;
        let unserved = &mut self.unserved;
        let e = self.entries.entry(p).or_insert_with(|| Entry {
            routes: Vec::new(),
            tiers: unserved.remove(&p).unwrap_or(0),
            stamp,
        });
        self.order.remove(&e.stamp);
        e.stamp = stamp;
        self.order.insert(stamp, p);
        e
    }

    /// Forgets the least recently served blocks past the bound, announcing them removed.
    fn evict_past_cap(&mut self, out: &mut Announce) {
        while self.entries.len() > self.cap {
            let Some((_, p)) = self.order.pop_first() else {
                break;
            };
            if let Some(e) = self.entries.remove(&p) {
                for t in Tier::ALL {
                    if e.tiers & t.bit() != 0 {
                        out.set(t, &e.routes, false);
                    }
                }
            }
        }
    }

    /// Applies a residency move. A block not served (yet) has its tiers kept aside for a
    /// while: another isolation's, a component's, or one whose request is still being hashed.
    pub fn apply(&mut self, m: &Move, out: &mut Announce) {
        let b = m.tier.bit();
        let Some(e) = self.entries.get_mut(&m.hash) else {
            let t = self.unserved.entry(m.hash).or_insert_with(|| {
                self.unserved_order.push_back(m.hash);
                0
            });
            *t = if m.held { *t | b } else { *t & !b };
            while self.unserved_order.len() > MAX_UNSERVED {
                if let Some(old) = self.unserved_order.pop_front() {
                    self.unserved.remove(&old);
                }
            }
            return;
        };
        if (e.tiers & b != 0) == m.held {
            return;
        }
        e.tiers ^= b;
        out.set(m.tier, &e.routes, m.held);
        self.changes += 1;
    }

    /// The routing keys held in `tier`, least recently served first (for a resync).
    pub fn keys(&self, tier: Tier) -> Vec<BlockHash> {
        self.order
            .values()
            .filter_map(|p| self.entries.get(p))
            .filter(|e| e.tiers & tier.bit() != 0)
            .flat_map(|e| e.routes.iter().copied())
            .collect()
    }

    /// Forgets every block (after moves were lost: what is held is no longer known).
    pub fn clear(&mut self) {
        self.changes += 1;
        self.entries.clear();
        self.order.clear();
        self.unserved.clear();
        self.unserved_order.clear();
    }

    /// Blocks tracked.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(i: u8) -> BlockHash {
        BlockHash([i; 32])
    }

    fn mv(i: u8, tier: Tier, held: bool) -> Move {
        Move {
            hash: k(i),
            tier,
            held,
        }
    }

    /// (stored, removed) of `tier`, then the batch emptied.
    fn take(a: &mut Announce, tier: Tier) -> (Vec<BlockHash>, Vec<BlockHash>) {
        let l = a.lists(tier);
        a.tiers[tier.index()].clear();
        l
    }

    #[test]
    fn a_served_block_is_hot_and_moves_follow_it_down_the_tiers() {
        let mut h = Held::new(8);
        let mut a = Announce::default();
        // Pool hashes 1, 2 routed as 101, 102.
        h.serve(&[k(1), k(2)], &[k(101), k(102)], &mut a);
        assert_eq!(take(&mut a, Tier::Hot), (vec![k(101), k(102)], vec![]));
        h.serve(&[k(1)], &[k(101)], &mut a);
        assert_eq!(take(&mut a, Tier::Hot), (vec![], vec![]), "held already");
        // Block 1 leaves the pool for cold RAM, then for disk.
        h.apply(&mv(1, Tier::Hot, false), &mut a);
        h.apply(&mv(1, Tier::Cold, true), &mut a);
        assert_eq!(take(&mut a, Tier::Hot), (vec![], vec![k(101)]));
        assert_eq!(take(&mut a, Tier::Cold), (vec![k(101)], vec![]));
        h.apply(&mv(1, Tier::Cold, false), &mut a);
        h.apply(&mv(1, Tier::Disk, true), &mut a);
        h.apply(&mv(1, Tier::Disk, true), &mut a);
        assert_eq!(take(&mut a, Tier::Cold), (vec![], vec![k(101)]));
        assert_eq!(take(&mut a, Tier::Disk), (vec![k(101)], vec![]));
        assert_eq!(h.keys(Tier::Disk), vec![k(101)]);
        assert_eq!(h.keys(Tier::Hot), vec![k(102)]);
        // Off the disk too: held nowhere, but its keys are kept for a later move.
        h.apply(&mv(1, Tier::Disk, false), &mut a);
        assert_eq!(take(&mut a, Tier::Disk), (vec![], vec![k(101)]));
        assert_eq!(h.len(), 2);
        h.apply(&mv(1, Tier::Cold, true), &mut a);
        assert_eq!(take(&mut a, Tier::Cold), (vec![k(101)], vec![]));
        // A move of a block not served says nothing, until the block is served.
        h.apply(&mv(9, Tier::Disk, true), &mut a);
        h.apply(&mv(9, Tier::Cold, true), &mut a);
        h.apply(&mv(9, Tier::Cold, false), &mut a);
        assert!(
            Tier::ALL
                .iter()
                .all(|&t| take(&mut a, t) == (vec![], vec![]))
        );
        h.serve(&[k(9)], &[k(109)], &mut a);
        assert_eq!(take(&mut a, Tier::Hot), (vec![k(109)], vec![]));
        assert_eq!(
            take(&mut a, Tier::Disk),
            (vec![k(109)], vec![]),
            "written before served"
        );
        assert_eq!(take(&mut a, Tier::Cold), (vec![], vec![]));
    }

    #[test]
    fn a_key_flipped_within_a_batch_is_announced_as_it_ended() {
        let mut h = Held::new(8);
        let mut a = Announce::default();
        h.serve(&[k(1)], &[k(101)], &mut a);
        h.apply(&mv(1, Tier::Cold, true), &mut a);
        h.apply(&mv(1, Tier::Cold, false), &mut a);
        assert_eq!(take(&mut a, Tier::Cold), (vec![], vec![k(101)]));
        assert_eq!(take(&mut a, Tier::Hot), (vec![k(101)], vec![]));
    }

    #[test]
    fn a_second_label_and_the_bound() {
        let mut h = Held::new(2);
        let mut a = Announce::default();
        h.serve(&[k(1)], &[k(101)], &mut a);
        h.apply(&mv(1, Tier::Disk, true), &mut a);
        take(&mut a, Tier::Hot);
        take(&mut a, Tier::Disk);
        // The same block served under another namespace's label.
        h.serve(&[k(1)], &[k(201)], &mut a);
        assert_eq!(take(&mut a, Tier::Hot), (vec![k(201)], vec![]));
        assert_eq!(take(&mut a, Tier::Disk), (vec![k(201)], vec![]));
        h.serve(&[k(2), k(3)], &[k(102), k(103)], &mut a);
        // Block 1 was the least recently served: forgotten, removed wherever it was.
        assert_eq!(
            take(&mut a, Tier::Hot),
            (vec![k(102), k(103)], vec![k(101), k(201)])
        );
        assert_eq!(take(&mut a, Tier::Disk), (vec![], vec![k(101), k(201)]));
        assert_eq!(h.len(), 2);
        h.clear();
        assert_eq!(h.len(), 0);
        assert!(h.keys(Tier::Hot).is_empty());
    }

    #[test]
    fn what_is_on_disk_is_listed_and_restored_after_a_restart() {
        let mut h = Held::new(8);
        let mut a = Announce::default();
        h.serve(&[k(1), k(2), k(3)], &[k(101), k(102), k(103)], &mut a);
        h.serve(&[k(1)], &[k(201)], &mut a);
        let before = h.changes();
        h.apply(&mv(1, Tier::Disk, true), &mut a);
        h.apply(&mv(2, Tier::Disk, true), &mut a);
        h.apply(&mv(2, Tier::Disk, false), &mut a);
        h.apply(&mv(3, Tier::Disk, true), &mut a);
        assert!(h.changes() > before);
        // Block 2 left the disk; 3 was served before 1's second label.
        let saved = h.on_disk();
        let listed: Vec<_> = saved.iter().map(|e| (e.block, e.routes.clone())).collect();
        assert_eq!(
            listed,
            vec![(k(3), vec![k(103)]), (k(1), vec![k(101), k(201)])]
        );
        // A new run: held on disk only, announced there.
        let (mut h, mut a) = (Held::new(8), Announce::default());
        for e in &saved {
            h.restore(e.block, &e.routes, &mut a);
        }
        assert_eq!(
            take(&mut a, Tier::Disk),
            (vec![k(101), k(103), k(201)], vec![])
        );
        assert_eq!(take(&mut a, Tier::Hot), (vec![], vec![]));
        assert_eq!(h.keys(Tier::Disk), vec![k(103), k(101), k(201)]);
        // Served again: hot as well, nothing new on disk.
        h.serve(&[k(1)], &[k(101)], &mut a);
        assert_eq!(take(&mut a, Tier::Hot), (vec![k(101), k(201)], vec![]));
        assert_eq!(take(&mut a, Tier::Disk), (vec![], vec![]));
        // The bound holds for restored blocks too.
        let mut small = Held::new(1);
        small.restore(k(1), &[k(101)], &mut a);
        small.restore(k(2), &[k(102)], &mut a);
        assert_eq!(small.len(), 1);
        assert_eq!(take(&mut a, Tier::Disk), (vec![k(102)], vec![k(101)]));
    }
}
