//! The tier trait: a byte store of encoded blocks (see [`crate::codec`]) keyed by block hash.
//! Tiers never interpret the bytes; verification is the [`crate::TierStack`]'s job. Every
//! method takes `&self` (tiers lock or hand off internally), so one tier can serve the engine
//! thread and the store's background threads at once.

use memoria_kv::BlockHash;

/// One storage level below the hot pool.
pub trait Tier: Send + Sync {
    /// Short name for stats and logs (`cold`, `redb`).
    fn name(&self) -> &'static str;

    /// The encoded block stored under `hash`, if any.
    fn get(&self, hash: &BlockHash) -> Option<Vec<u8>>;

    /// Calls `f` with the encoded block stored under `hash` (borrowed where the tier can lend
    /// it, saving a copy); returns false, without calling it, when nothing is stored.
    fn get_with(&self, hash: &BlockHash, f: &mut dyn FnMut(&[u8])) -> bool {
        self.get(hash).map(|v| f(&v)).is_some()
    }

    /// Stores `encoded` under `hash` (replacing any value). A tier may decline (budget,
    /// full write queue); it counts what it drops.
    fn put(&self, hash: &BlockHash, encoded: Vec<u8>);

    /// Whether a value is stored (or queued to be) under `hash`.
    fn contains(&self, hash: &BlockHash) -> bool;

    /// Drops the value under `hash`; returns whether there was one.
    fn remove(&self, hash: &BlockHash) -> bool;

    /// [`Tier::get`] for many hashes, in order.
    fn get_many(&self, hashes: &[BlockHash]) -> Vec<Option<Vec<u8>>> {
        hashes.iter().map(|h| self.get(h)).collect()
    }

    /// [`Tier::put`] for many blocks.
    fn put_many(&self, blocks: Vec<(BlockHash, Vec<u8>)>) {
        for (h, b) in blocks {
            self.put(&h, b);
        }
    }

    /// [`Tier::contains`] for many hashes, in order.
    fn contains_many(&self, hashes: &[BlockHash]) -> Vec<bool> {
        hashes.iter().map(|h| self.contains(h)).collect()
    }

    /// [`Tier::remove`] for many hashes; returns how many were stored.
    fn remove_many(&self, hashes: &[BlockHash]) -> usize {
        hashes.iter().filter(|h| self.remove(h)).count()
    }
}
