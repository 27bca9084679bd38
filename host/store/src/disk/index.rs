//! The redb tier's in-memory index: which blocks are on disk (or queued for it), their encoded
//! sizes, their last-use order for the disk budget, and the named saves' charged sizes.
//! Invariants: `bytes` is the sum of the entries' lengths and `charged` the sum of their
//! [`charge`]s; `order` holds one `(stamp, hash)` per entry; a hash is never both an entry and
//! queued; `saves_charged` is the sum of `saves`' values (queued saves included).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use memoria_kv::BlockHash;

use super::budget::charge;
use crate::remote::RemoteTier;
use crate::remote::events::Tier as Place;
use crate::residency::Residency;

#[derive(Debug, Default)]
pub(crate) struct DiskIndex {
    entries: HashMap<BlockHash, (u64, u64)>,
    order: BTreeSet<(u64, BlockHash)>,
    queued: HashSet<BlockHash>,
    pub bytes: u64,
    pub charged: u64,
    pub clock: u64,
    saves: HashMap<(u64, String), u64>,
    pub saves_charged: u64,
    /// Told every block stored and removed (not the file's blocks read at open).
    pub watch: Option<Arc<Residency>>,
    /// The remote tier, told every block removed: it no longer takes the block to be held
    /// here, so a later prompt looks it up on the server.
    pub remote: Option<Arc<RemoteTier>>,
}

impl DiskIndex {
    pub fn contains(&self, h: &BlockHash) -> bool {
        self.entries.contains_key(h) || self.queued.contains(h)
    }

    pub fn on_disk(&self, h: &BlockHash) -> bool {
        self.entries.contains_key(h)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Marks a block as queued; false when it is already stored or queued.
    pub fn enqueue(&mut self, h: BlockHash) -> bool {
        !self.entries.contains_key(&h) && self.queued.insert(h)
    }

    pub fn dequeue(&mut self, h: &BlockHash) {
        self.queued.remove(h);
    }

    /// Records a block as stored with `len` bytes at `stamp` (0: now). Returns its stamp.
    pub fn insert(&mut self, h: BlockHash, len: u64, stamp: u64) -> u64 {
        let replaced = self.take(&h);
        self.queued.remove(&h);
        let stamp = if stamp == 0 { self.tick() } else { stamp };
        self.clock = self.clock.max(stamp);
        if let (Some(r), false) = (&self.watch, replaced) {
            r.record(h, Place::Disk, true);
        }
        self.entries.insert(h, (len, stamp));
        self.order.insert((stamp, h));
        self.bytes += len;
        self.charged += charge(len);
        stamp
    }

    /// Moves a stored block to most recently used; returns its new stamp and length.
    pub fn touch(&mut self, h: &BlockHash) -> Option<(u64, u64)> {
        let stamp = self.tick();
        let (len, old) = self.entries.get_mut(h)?;
        self.order.remove(&(*old, *h));
        *old = stamp;
        self.order.insert((stamp, *h));
        Some((stamp, *len))
    }

    pub fn remove(&mut self, h: &BlockHash) -> bool {
        let removed = self.take(h);
        if removed {
            self.left(h);
        }
        removed
    }

    /// Tells the watcher and the remote tier that `h` is no longer on disk.
    fn left(&self, h: &BlockHash) {
        if let Some(r) = &self.watch {
            r.record(*h, Place::Disk, false);
        }
        if let Some(r) = &self.remote {
            r.forget(h);
        }
    }

    /// Removes a stored block without telling the watcher.
    fn take(&mut self, h: &BlockHash) -> bool {
        match self.entries.remove(h) {
            Some((len, stamp)) => {
                self.order.remove(&(stamp, *h));
                self.bytes -= len;
                self.charged -= charge(len);
                true
            }
            None => false,
        }
    }

    /// The least recently used stored block.
    pub fn oldest(&self) -> Option<BlockHash> {
        self.order.first().map(|(_, h)| *h)
    }

    /// The charged size of the save under `key`, if any.
    pub fn save(&self, key: &(u64, String)) -> Option<u64> {
        self.saves.get(key).copied()
    }

    /// Records the save under `key` as costing `charged` bytes (None: removed); returns what
    /// it cost before.
    pub fn set_save(&mut self, key: (u64, String), charged: Option<u64>) -> Option<u64> {
        let old = match charged {
            Some(c) => {
                self.saves_charged += c;
                self.saves.insert(key, c)
            }
            None => self.saves.remove(&key),
        };
        if let Some(o) = old {
            self.saves_charged -= o;
        }
        old
    }

    /// Brings this index in line with `disk`, the index read from the file after a reopen: a
    /// commit that failed may have reached the file after all, and one that seemed to succeed
    /// may be gone. Queued blocks and reserved saves not yet on disk are kept.
    pub fn reconcile(&mut self, disk: DiskIndex) {
        let gone: Vec<BlockHash> = self
            .entries
            .keys()
            .filter(|h| !disk.entries.contains_key(h))
            .copied()
            .collect();
        for h in gone {
            self.remove(&h);
        }
        for (h, (len, stamp)) in disk.entries {
            if self.entries.get(&h).map(|e| e.0) != Some(len) {
                self.insert(h, len, stamp.max(1));
            }
        }
        for (key, charged) in disk.saves {
            if !self.saves.contains_key(&key) {
                self.set_save(key, Some(charged));
            }
        }
        self.clock = self.clock.max(disk.clock);
    }

    /// Takes `disk`, the index of a new file (empty, or what a salvage kept), in place of this
    /// one, keeping the blocks still queued that it lacks (they are written to it); the blocks
    /// it lacks have left the disk (the watcher and the remote tier are told).
    pub fn restart(&mut self, disk: DiskIndex) {
        let mut queued = std::mem::take(&mut self.queued);
        queued.retain(|h| !disk.entries.contains_key(h));
        let clock = self.clock;
        for h in self
            .entries
            .keys()
            .filter(|h| !disk.entries.contains_key(*h))
        {
            self.left(h);
        }
        let (watch, remote) = (self.watch.take(), self.remote.take());
        *self = disk;
        self.watch = watch;
        self.remote = remote;
        self.queued = queued;
        self.clock = self.clock.max(clock);
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracks_bytes_order_and_queue() {
        let (a, b) = (BlockHash([1; 32]), BlockHash([2; 32]));
        let mut ix = DiskIndex::default();
        assert!(ix.enqueue(a));
        assert!(!ix.enqueue(a));
        assert!(ix.contains(&a) && !ix.on_disk(&a));
        ix.insert(a, 10, 0);
        ix.insert(b, 5, 0);
        assert!(!ix.enqueue(a));
        assert_eq!((ix.len(), ix.bytes, ix.oldest()), (2, 15, Some(a)));
        ix.touch(&a);
        assert_eq!(ix.oldest(), Some(b));
        assert!(ix.remove(&b));
        assert_eq!((ix.len(), ix.bytes, ix.oldest()), (1, 10, Some(a)));
        assert_eq!(ix.charged, charge(10));
    }

    #[test]
    fn a_block_removed_from_disk_is_no_longer_known_to_the_remote_tier() {
        // Never connects: the tier's thread dials only when asked to read or write.
        let opts = crate::RemoteOptions {
            auth: Some(crate::remote::test_server::test_key()),
            ..crate::RemoteOptions::with_url("redis://127.0.0.1:1".to_string())
        };
        let remote = RemoteTier::start(opts).expect("remote");
        let (a, b) = (BlockHash([1; 32]), BlockHash([2; 32]));
        let mut ix = DiskIndex {
            remote: Some(remote.clone()),
            ..DiskIndex::default()
        };
        for h in [a, b] {
            remote.mark_known(&h);
            ix.insert(h, 10, 0);
        }
        assert!(ix.remove(&a));
        assert!(!remote.is_known(&a) && remote.is_known(&b));
        ix.restart(DiskIndex::default());
        assert!(
            !remote.is_known(&b),
            "a new file holds none of the old blocks"
        );
        assert!(ix.remote.is_some(), "kept across the restart");
    }

    #[test]
    fn reconcile_takes_the_files_blocks_and_keeps_the_queue() {
        let (a, b, c, q) = (
            BlockHash([1; 32]),
            BlockHash([2; 32]),
            BlockHash([3; 32]),
            BlockHash([4; 32]),
        );
        let mut ix = DiskIndex::default();
        ix.insert(a, 10, 0);
        ix.insert(b, 20, 0);
        assert!(ix.enqueue(q));
        ix.set_save((1, "reserved".into()), Some(7));
        // The file lost `b` and holds `c`, which a failed commit wrote after all.
        let mut disk = DiskIndex::default();
        disk.insert(a, 10, 5);
        disk.insert(c, 30, 9);
        disk.set_save((1, "on-disk".into()), Some(3));
        ix.reconcile(disk);
        assert!(ix.on_disk(&a) && !ix.contains(&b) && ix.on_disk(&c));
        assert!(ix.contains(&q) && !ix.on_disk(&q));
        assert_eq!(
            (ix.len(), ix.bytes, ix.charged),
            (2, 40, charge(10) + charge(30))
        );
        assert_eq!(ix.saves_charged, 10);
        assert!(ix.clock >= 9);
    }

    #[test]
    fn restart_forgets_the_old_file_and_keeps_the_queue() {
        let (a, q) = (BlockHash([1; 32]), BlockHash([4; 32]));
        let mut ix = DiskIndex::default();
        ix.insert(a, 10, 0);
        assert!(ix.enqueue(q));
        ix.set_save((1, "old".into()), Some(7));
        let clock = ix.clock;
        ix.restart(DiskIndex::default());
        assert!(!ix.contains(&a) && ix.contains(&q) && !ix.on_disk(&q));
        assert_eq!(
            (ix.len(), ix.bytes, ix.charged, ix.saves_charged),
            (0, 0, 0, 0)
        );
        assert!(ix.save(&(1, "old".into())).is_none());
        assert_eq!(ix.clock, clock);
    }

    #[test]
    fn saves_are_charged_and_replaced() {
        let mut ix = DiskIndex::default();
        let k = (1, "x".to_string());
        assert_eq!(ix.set_save(k.clone(), Some(100)), None);
        assert_eq!(ix.set_save(k.clone(), Some(40)), Some(100));
        assert_eq!((ix.saves_charged, ix.save(&k)), (40, Some(40)));
        ix.set_save((2, "y".into()), Some(5));
        assert_eq!(ix.set_save(k, None), Some(40));
        assert_eq!(ix.saves_charged, 5);
    }
}
