//! A fixed-capacity open-addressed map from a sampled block key to its last access time
//! (linear probing, backward-shift deletion, allocated once: nothing grows at run time).
//! Key 0 marks an empty slot; callers never pass 0.

/// `u64 -> u32` map of at most `capacity / 2` keys.
#[derive(Debug)]
pub(crate) struct TimeTable {
    keys: Vec<u64>,
    times: Vec<u32>,
    mask: usize,
    len: usize,
}

impl TimeTable {
    /// Room for `max_keys` keys at load factor at most 1/2.
    pub fn new(max_keys: usize) -> Self {
        let cap = (max_keys.max(1) * 2).next_power_of_two();
        Self {
            keys: vec![0; cap],
            times: vec![0; cap],
            mask: cap - 1,
            len: 0,
        }
    }

    pub fn memory_bytes(&self) -> usize {
        self.keys.len() * 12
    }

    pub fn len(&self) -> usize {
        self.len
    }

    fn home(&self, key: u64) -> usize {
        // Keys are already uniform (hash bits); fold the high half in anyway.
        ((key ^ (key >> 32)) as usize) & self.mask
    }

    fn find(&self, key: u64) -> Result<usize, usize> {
        let mut i = self.home(key);
        loop {
            match self.keys[i] {
                0 => return Err(i),
                k if k == key => return Ok(i),
                _ => i = (i + 1) & self.mask,
            }
        }
    }

    pub fn get(&self, key: u64) -> Option<u32> {
        self.find(key).ok().map(|i| self.times[i])
    }

    /// Sets `key`'s time; a new key must leave the table at most half full.
    pub fn set(&mut self, key: u64, time: u32) {
        debug_assert_ne!(key, 0);
        match self.find(key) {
            Ok(i) => self.times[i] = time,
            Err(i) => {
                debug_assert!(self.len < self.keys.len() / 2);
                self.keys[i] = key;
                self.times[i] = time;
                self.len += 1;
            }
        }
    }

    /// Removes `key`, returning its time.
    pub fn remove(&mut self, key: u64) -> Option<u32> {
        let mut hole = self.find(key).ok()?;
        let time = self.times[hole];
        self.keys[hole] = 0;
        self.len -= 1;
        let mut i = (hole + 1) & self.mask;
        while self.keys[i] != 0 {
            let home = self.home(self.keys[i]);
            // Move the entry back when the hole lies on its probe path (cyclically).
            let dist_i = i.wrapping_sub(home) & self.mask;
            let dist_hole = hole.wrapping_sub(home) & self.mask;
            if dist_hole < dist_i {
                self.keys[hole] = self.keys[i];
                self.times[hole] = self.times[i];
                self.keys[i] = 0;
                hole = i;
            }
            i = (i + 1) & self.mask;
        }
        Some(time)
    }

    /// Every `(key, time)`.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        self.keys
            .iter()
            .zip(&self.times)
            .filter(|(k, _)| **k != 0)
            .map(|(k, t)| (*k, *t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn behaves_like_a_map_under_churn() {
        let mut t = TimeTable::new(64);
        let mut m = HashMap::new();
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for step in 0..20_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // A small key space (with clustered homes) so removals and reinserts collide.
            let key = (x % 97) * 0x1_0000_0001 + 1;
            if m.len() < 64 && x & 1 == 0 {
                t.set(key, step);
                m.insert(key, step);
            } else {
                assert_eq!(t.remove(key), m.remove(&key));
            }
            assert_eq!(t.len(), m.len());
        }
        for (k, v) in &m {
            assert_eq!(t.get(*k), Some(*v));
        }
        assert_eq!(t.iter().count(), m.len());
    }
}
