//! An isolation group's memory of token sequences for drafting: a ring of the latest tokens the
//! group's sessions produced (prompts and outputs), with an n-gram table pointing into it.
//! Bounded: the ring keeps the last `capacity` tokens and older entries die as it wraps (a
//! table entry whose position has been overwritten is ignored). [`DraftMemory`] holds one
//! [`GroupMemory`] per isolation group, keyed by the group the host resolved: a draft is only
//! ever taken from the asking session's own group.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::ngram::{MAX_N, MIN_N, hash, slots_for};

/// A group's memory, shared by its sessions.
type Shared = Arc<Mutex<GroupMemory>>;

/// Separates two sequences in the ring: no n-gram spans it and no draft crosses it.
const SEPARATOR: u32 = u32::MAX;

/// One group's ring of tokens and its n-gram table.
#[derive(Debug)]
pub struct GroupMemory {
    ring: Vec<u32>,
    /// Tokens ever written (the next write goes to `written % ring.len()`).
    written: u64,
    /// `slot -> absolute position + 1` of the continuation of the n-gram hashed there.
    table: Vec<u64>,
    mask: usize,
}

impl GroupMemory {
    /// A memory of the last `capacity` tokens (at least 64), its memory taken now: about 28
    /// bytes per token.
    pub fn new(capacity: usize) -> GroupMemory {
        let capacity = capacity.max(64);
        let slots = slots_for(capacity.saturating_mul(MAX_N - MIN_N + 1));
        GroupMemory {
            ring: vec![SEPARATOR; capacity],
            written: 0,
            table: vec![0; slots],
            mask: slots - 1,
        }
    }

    /// The bytes this memory holds.
    pub fn bytes(&self) -> usize {
        self.ring.len() * 4 + self.table.len() * 8
    }

    fn at(&self, pos: u64) -> u32 {
        self.ring[(pos % self.ring.len() as u64) as usize]
    }

    /// Whether absolute position `pos` still holds what was written there.
    fn live(&self, pos: u64) -> bool {
        pos < self.written && self.written - pos <= self.ring.len() as u64
    }

    /// Records one sequence (a prompt with its output, or any run the group produced).
    pub fn record(&mut self, tokens: &[u32]) {
        let cap = self.ring.len();
        // Only the last `cap - 1` tokens can be kept with their separator.
        let tokens = &tokens[tokens.len().saturating_sub(cap - 1)..];
        let mut window = [0u32; MAX_N];
        let mut filled = 0usize;
        for &t in tokens.iter().chain(std::iter::once(&SEPARATOR)) {
            let pos = self.written;
            if t != SEPARATOR {
                // The n-grams ending just before `pos` continue with `t`.
                for n in MIN_N..=MAX_N.min(filled) {
                    let gram = &window[MAX_N - n..];
                    let slot = hash(gram) as usize & self.mask;
                    self.table[slot] = pos + 1;
                }
            }
            self.ring[(pos % cap as u64) as usize] = t;
            self.written += 1;
            window.copy_within(1.., 0);
            window[MAX_N - 1] = t;
            filled = if t == SEPARATOR {
                0
            } else {
                (filled + 1).min(MAX_N)
            };
        }
    }

    /// Writes into `out` (cleared first) up to `max` tokens that followed the latest recorded
    /// occurrence of the last `n` tokens of `context`, longest `n` first. Returns the `n`
    /// matched (0: no draft).
    pub fn draft(&self, context: &[u32], max: usize, out: &mut Vec<u32>) -> usize {
        out.clear();
        if max == 0 {
            return 0;
        }
        for n in (MIN_N..=MAX_N).rev() {
            if context.len() < n {
                continue;
            }
            let suffix = &context[context.len() - n..];
            let Some(start) = self.table[hash(suffix) as usize & self.mask].checked_sub(1) else {
                continue;
            };
            let Some(first) = start.checked_sub(n as u64) else {
                continue;
            };
            if !self.live(first) || !self.live(start) {
                continue;
            }
            if (0..n).any(|i| self.at(first + i as u64) != suffix[i]) {
                continue;
            }
            let mut p = start;
            while out.len() < max && self.live(p) {
                let t = self.at(p);
                if t == SEPARATOR {
                    break;
                }
                out.push(t);
                p += 1;
            }
            if !out.is_empty() {
                return n;
            }
        }
        0
    }
}

/// The draft memories of every isolation group, each created on its group's first record and
/// bounded in number: past `max_groups` the least recently recorded group's memory is dropped.
#[derive(Debug)]
pub struct DraftMemory {
    capacity: usize,
    max_groups: usize,
    /// Group -> (the clock at its last use, its memory).
    groups: Mutex<HashMap<u64, (u64, Shared)>>,
    clock: Mutex<u64>,
}

impl DraftMemory {
    /// Memories of `capacity` tokens each, for at most `max_groups` groups.
    pub fn new(capacity: usize, max_groups: usize) -> DraftMemory {
        DraftMemory {
            capacity,
            max_groups: max_groups.max(1),
            groups: Mutex::new(HashMap::new()),
            clock: Mutex::new(0),
        }
    }

    /// The memory of `group` (the isolation group the host resolved for a namespace), created if
    /// missing. Call off the engine step: creating one allocates its tables.
    pub fn group(&self, group: u64) -> Arc<Mutex<GroupMemory>> {
        let now = {
            let mut c = self.clock.lock().unwrap_or_else(PoisonError::into_inner);
            *c += 1;
            *c
        };
        let mut groups = self.groups.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((used, m)) = groups.get_mut(&group) {
            *used = now;
            return m.clone();
        }
        if groups.len() >= self.max_groups
            && let Some(oldest) = groups
                .iter()
                .min_by_key(|(_, (used, _))| *used)
                .map(|(k, _)| *k)
        {
            groups.remove(&oldest);
        }
        let m = Arc::new(Mutex::new(GroupMemory::new(self.capacity)));
        groups.insert(group, (now, m.clone()));
        m
    }

    /// The memory of `group` if it has one (drafting never creates one).
    pub fn existing(&self, group: u64) -> Option<Arc<Mutex<GroupMemory>>> {
        let groups = self.groups.lock().unwrap_or_else(PoisonError::into_inner);
        groups.get(&group).map(|(_, m)| m.clone())
    }

    /// The bytes every group's memory holds.
    pub fn bytes(&self) -> usize {
        let groups = self.groups.lock().unwrap_or_else(PoisonError::into_inner);
        groups
            .values()
            .map(|(_, m)| m.lock().unwrap_or_else(PoisonError::into_inner).bytes())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_sequence_drafts_its_continuation_and_stops_at_its_end() {
        let mut m = GroupMemory::new(256);
        m.record(&[10, 11, 12, 13, 14, 15]);
        m.record(&[20, 21, 22]);
        let mut out = Vec::new();
        assert_eq!(m.draft(&[5, 10, 11, 12], 8, &mut out), 3);
        assert_eq!(out, [13, 14, 15], "stops at the end of the sequence");
        assert_eq!(m.draft(&[21, 22], 8, &mut out), 0, "nothing followed");
        assert_eq!(m.draft(&[1, 2, 3], 8, &mut out), 0);
        // The latest occurrence wins.
        m.record(&[10, 11, 99]);
        assert_eq!(m.draft(&[10, 11], 2, &mut out), 2);
        assert_eq!(out, [99]);
        // No n-gram spans two sequences.
        assert_eq!(m.draft(&[15, 20], 4, &mut out), 0);
    }

    #[test]
    fn the_ring_forgets_the_oldest_tokens() {
        let mut m = GroupMemory::new(64);
        m.record(&[1, 2, 3, 4]);
        let mut out = Vec::new();
        assert_eq!(m.draft(&[1, 2], 4, &mut out), 2);
        // Write past the ring's size: the first sequence is gone, never drafted from garbage.
        for k in 0..20u32 {
            m.record(&[100 + k, 200 + k, 300 + k, 400 + k]);
        }
        assert_eq!(m.draft(&[1, 2], 4, &mut out), 0);
        assert!(out.is_empty());
        assert_eq!(m.draft(&[119, 219], 4, &mut out), 2);
        assert_eq!(out, [319, 419]);
        // A sequence longer than the ring keeps its tail.
        let long: Vec<u32> = (0..500).collect();
        m.record(&long);
        assert_eq!(m.draft(&[480, 481, 482], 3, &mut out), 3);
        assert_eq!(out, [483, 484, 485]);
    }

    #[test]
    fn groups_never_draft_from_each_other() {
        let mem = DraftMemory::new(1024, 8);
        // A canary only group 1 ever saw.
        let canary = [7001, 7002, 7003, 7004, 7005, 7006];
        mem.group(1).lock().unwrap().record(&canary);
        mem.group(2).lock().unwrap().record(&[1, 2, 3]);
        let mut out = Vec::new();
        let g2 = mem.existing(2).expect("group 2");
        assert_eq!(
            g2.lock().unwrap().draft(&[7001, 7002, 7003], 3, &mut out),
            0
        );
        assert!(out.is_empty());
        let g1 = mem.existing(1).expect("group 1");
        assert_eq!(
            g1.lock().unwrap().draft(&[7001, 7002, 7003], 3, &mut out),
            3
        );
        assert_eq!(out, [7004, 7005, 7006]);
        assert!(mem.existing(3).is_none(), "drafting creates nothing");
    }

    #[test]
    fn the_number_of_groups_is_bounded() {
        let mem = DraftMemory::new(64, 2);
        let one = GroupMemory::new(64).bytes();
        for g in 0..5 {
            mem.group(g).lock().unwrap().record(&[1, 2, 3]);
        }
        assert_eq!(mem.bytes(), 2 * one);
        assert!(mem.existing(0).is_none() && mem.existing(4).is_some());
    }
}
