//! The salt-free content index behind the `isolated` miss reason: for every resident sealed
//! block, a 64-bit key of its token content and chain (`c_i = SipHash_k(c_{i-1}, tokens_i)`,
//! `c_{-1} = 0`, with a random key `k` per pool, so keys mean nothing outside this process),
//! counted per key. A prompt block that misses while its content key is resident was cached
//! under another namespace's salt. Only the count is used: the index stores no namespace, and
//! a miss learns one bit (some other salt holds it), reported as a number per namespace.
//! Bounded: one key per block and a map preallocated for twice the pool's blocks, so inserts
//! and removals never reallocate (hashbrown rehashes in place below half load).

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher, RandomState};

/// Counts of resident blocks by content key.
#[derive(Debug)]
pub(crate) struct ContentIndex {
    keyer: RandomState,
    /// Per block: its content key while sealed (0 otherwise).
    of_block: Vec<u64>,
    counts: HashMap<u64, u32>,
}

impl ContentIndex {
    pub fn new(n_blocks: usize) -> Self {
        Self {
            keyer: RandomState::new(),
            of_block: vec![0; n_blocks],
            counts: HashMap::with_capacity(n_blocks.saturating_mul(2)),
        }
    }

    /// The content key of a block of `tokens` following a block with key `parent` (0: first).
    pub fn key(&self, parent: u64, tokens: &[u32]) -> u64 {
        let mut h = self.keyer.build_hasher();
        h.write_u64(parent);
        for &t in tokens {
            h.write_u32(t);
        }
        // 0 marks "none": remap the one key that would collide with it.
        h.finish().max(1)
    }

    /// The key block `id` was sealed under (0 when not sealed).
    pub fn of(&self, id: u32) -> u64 {
        self.of_block[id as usize]
    }

    /// Block `id` was sealed with content key `key`.
    pub fn insert(&mut self, id: u32, key: u64) {
        self.of_block[id as usize] = key;
        *self.counts.entry(key).or_insert(0) += 1;
    }

    /// Block `id` left the pool.
    pub fn remove(&mut self, id: u32) {
        let key = std::mem::take(&mut self.of_block[id as usize]);
        if key == 0 {
            return;
        }
        if let Some(n) = self.counts.get_mut(&key) {
            *n -= 1;
            if *n == 0 {
                self.counts.remove(&key);
            }
        }
    }

    /// Whether some resident block has content key `key`.
    pub fn holds(&self, key: u64) -> bool {
        self.counts.contains_key(&key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_resident_content() {
        let mut c = ContentIndex::new(8);
        let k0 = c.key(0, &[1, 2]);
        let k1 = c.key(k0, &[3, 4]);
        assert_ne!(k0, k1);
        assert_ne!(c.key(0, &[3, 4]), k1, "the chain is part of the key");
        c.insert(0, k0);
        c.insert(1, k0);
        assert!(c.holds(k0) && !c.holds(k1));
        c.remove(0);
        assert!(c.holds(k0));
        c.remove(1);
        assert!(!c.holds(k0));
        c.remove(1);
        assert_eq!(c.of(1), 0);
    }
}
