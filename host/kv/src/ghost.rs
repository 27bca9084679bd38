//! The ghost table: a bounded memory of recently evicted block hashes, so a later miss on one
//! can be told apart from a block never computed (`evicted` or `expired`, and where it was
//! lost, instead of `cold`). Fixed size, allocated once: `capacity` 8-byte entries in 4-way
//! sets, each the hash's first 8 bytes with the low byte replaced by the record (valid bit,
//! expired bit, tier). Overflow: a full set overwrites one of its 4 entries in round-robin
//! order, so the oldest records of a busy set are forgotten first and their blocks' later
//! misses count as `cold`. A 56-bit tag collision (about 2^-56 per look-up) could label a
//! cold miss `evicted`; nothing else depends on it.

use crate::hash::BlockHash;
use crate::misses::LostTier;

const WAYS: usize = 4;
const VALID: u64 = 0x80;
const EXPIRED: u64 = 0x04;
const TAG_MASK: u64 = !0xFF;

/// What the ghost table remembers of one evicted block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ghost {
    /// Its timed pin had run out.
    pub expired: bool,
    /// Where it was last kept: the hot pool when no lower tier took it, else the tier that did
    /// (a later miss means it was lost there or below).
    pub tier: LostTier,
}

/// Fixed-size table of evicted hashes.
#[derive(Debug)]
pub(crate) struct GhostTable {
    entries: Vec<u64>,
    sets_mask: usize,
    clock: usize,
}

impl GhostTable {
    /// A table of about `entries` records (rounded up to a power of two, at least 4·WAYS).
    pub fn new(entries: usize) -> Self {
        let n = entries.clamp(WAYS * 4, 1 << 24).next_power_of_two();
        Self {
            entries: vec![0; n],
            sets_mask: n / WAYS - 1,
            clock: 0,
        }
    }

    /// Bytes held.
    pub fn memory_bytes(&self) -> usize {
        self.entries.len() * 8
    }

    fn tag(hash: &BlockHash) -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&hash.0[..8]);
        u64::from_le_bytes(b) & TAG_MASK
    }

    fn set(&self, tag: u64) -> usize {
        ((tag >> 8) as usize & self.sets_mask) * WAYS
    }

    /// Records that `hash` was evicted.
    pub fn record(&mut self, hash: &BlockHash, g: Ghost) {
        let tag = Self::tag(hash);
        let base = self.set(tag);
        let rec = tag | VALID | if g.expired { EXPIRED } else { 0 } | u64::from(g.tier.bits());
        let ways = &mut self.entries[base..base + WAYS];
        let slot = ways
            .iter()
            .position(|&e| e & TAG_MASK == tag && e & VALID != 0)
            .or_else(|| ways.iter().position(|&e| e & VALID == 0));
        let i = slot.unwrap_or_else(|| {
            self.clock = self.clock.wrapping_add(1);
            self.clock % WAYS
        });
        self.entries[base + i] = rec;
    }

    /// What is remembered of `hash`, if anything.
    pub fn get(&self, hash: &BlockHash) -> Option<Ghost> {
        let tag = Self::tag(hash);
        let base = self.set(tag);
        self.entries[base..base + WAYS]
            .iter()
            .find(|&&e| e & VALID != 0 && e & TAG_MASK == tag)
            .map(|&e| Ghost {
                expired: e & EXPIRED != 0,
                tier: LostTier::from_bits((e & 3) as u8),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(i: u64) -> BlockHash {
        BlockHash(*blake3::hash(&i.to_le_bytes()).as_bytes())
    }

    #[test]
    fn remembers_then_forgets_under_overflow() {
        let mut g = GhostTable::new(64);
        assert_eq!(g.memory_bytes(), 64 * 8);
        let rec = Ghost {
            expired: true,
            tier: LostTier::Disk,
        };
        g.record(&h(1), rec);
        assert_eq!(g.get(&h(1)), Some(rec));
        assert_eq!(g.get(&h(2)), None);
        // Rerecording updates in place.
        let hot = Ghost {
            expired: false,
            tier: LostTier::Hot,
        };
        g.record(&h(1), hot);
        assert_eq!(g.get(&h(1)), Some(hot));
        // Far more records than entries: most early ones are forgotten, the table never grows.
        for i in 10..10_000 {
            g.record(&h(i), hot);
        }
        let kept = (10..10_000).filter(|&i| g.get(&h(i)).is_some()).count();
        assert!(kept <= 64, "{kept}");
        assert!((9_900..10_000).filter(|&i| g.get(&h(i)).is_some()).count() >= 20);
        assert_eq!(g.memory_bytes(), 64 * 8);
    }
}
