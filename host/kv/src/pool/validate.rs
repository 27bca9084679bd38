//! A full consistency check of the pool's invariants, for tests and debugging (O(blocks + table
//! entries)); it reads everything and changes nothing.

use std::collections::HashMap;

use super::BlockPool;
use crate::ids::NIL;
use crate::meta::{BlockState, PinLevel};
use crate::seq::Sequence;

impl BlockPool {
    /// Checks every invariant; returns the first violation found.
    pub fn check_invariants(&self) -> Result<(), String> {
        self.check_counts()?;
        self.check_refcounts()?;
        self.check_index_and_links()?;
        self.check_heaps()?;
        self.check_seqs()
    }

    fn check_counts(&self) -> Result<(), String> {
        let count = |s: BlockState| self.metas.iter().filter(|m| m.state == s).count();
        let (free, used, cached) = (
            count(BlockState::Free),
            count(BlockState::Used),
            count(BlockState::Cached),
        );
        if (free, used, cached) != (self.free.len(), self.n_used, self.n_cached) {
            return Err(format!(
                "states free/used/cached {free}/{used}/{cached} vs counters {}/{}/{}",
                self.free.len(),
                self.n_used,
                self.n_cached
            ));
        }
        let mut seen = 0;
        let mut id = self.free.head();
        let mut prev = NIL;
        while id != NIL {
            let m = &self.metas[id as usize];
            if m.state != BlockState::Free || m.prev != prev || seen > self.metas.len() {
                return Err(format!("free list broken at block {id}"));
            }
            seen += 1;
            prev = id;
            id = m.next;
        }
        if seen != free {
            return Err(format!("free list holds {seen} blocks, {free} are free"));
        }
        let snap = self.stats.snapshot();
        if (snap.blocks_free, snap.blocks_used, snap.blocks_cached)
            != (free as u64, used as u64, cached as u64)
        {
            return Err(format!("stats gauges disagree: {snap:?}"));
        }
        let b = self.layout.block_tokens;
        let wasted: usize = self
            .metas
            .iter()
            .filter(|m| m.state != BlockState::Free)
            .map(|m| b - m.filled as usize)
            .sum();
        if wasted != self.wasted || wasted as u64 != snap.wasted_slots {
            return Err(format!("wasted slots {wasted} vs counter {}", self.wasted));
        }
        let mut held = vec![0usize; self.namespaces.len()];
        for m in self.metas.iter().filter(|m| m.state != BlockState::Free) {
            held[m.owner as usize] += 1;
        }
        for (n, h) in self.namespaces.iter().zip(held) {
            if n.held != h {
                return Err(format!(
                    "{} holds {h} blocks, counter says {}",
                    n.id, n.held
                ));
            }
        }
        Ok(())
    }

    fn check_refcounts(&self) -> Result<(), String> {
        let mut refs = vec![0u32; self.metas.len()];
        for s in self.seqs.values() {
            for id in &s.table {
                refs[id.index()] += 1;
            }
        }
        // A lent block holds the reference its loan will give back or hand to a sequence.
        for &id in self.lent_ids() {
            refs[id as usize] += 1;
        }
        for (id, (m, &r)) in self.metas.iter().zip(&refs).enumerate() {
            if m.refcount != r {
                return Err(format!(
                    "block {id}: refcount {} but {r} table references",
                    m.refcount
                ));
            }
            let want = match (r, m.frozen()) {
                (0, true) => BlockState::Cached,
                (0, false) => BlockState::Free,
                _ => BlockState::Used,
            };
            if m.state != want {
                return Err(format!(
                    "block {id}: state {:?}, expected {want:?}",
                    m.state
                ));
            }
        }
        Ok(())
    }

    fn check_index_and_links(&self) -> Result<(), String> {
        for (h, &id) in &self.index {
            if self.metas[id as usize].hash != Some(*h) {
                return Err(format!(
                    "index entry {h:?} names block {id} with another hash"
                ));
            }
        }
        let mut children = vec![0u32; self.metas.len()];
        for (id, m) in self.metas.iter().enumerate() {
            if m.hash
                .is_some_and(|h| self.index.get(&h) != Some(&(id as u32)))
            {
                return Err(format!("sealed block {id} not indexed under its hash"));
            }
            if m.parent != NIL {
                if !m.frozen() || self.metas[m.parent as usize].state == BlockState::Free {
                    return Err(format!("block {id} linked to a missing parent"));
                }
                children[m.parent as usize] += 1;
            }
        }
        for (id, (m, &c)) in self.metas.iter().zip(&children).enumerate() {
            if m.children != c {
                return Err(format!(
                    "block {id}: children {} but {c} linked",
                    m.children
                ));
            }
        }
        self.check_tails()
    }

    /// Retained tails: indexed exactly under their parent hash, partial, never sealed.
    fn check_tails(&self) -> Result<(), String> {
        let b = self.layout.block_tokens as u32;
        let mut indexed = 0;
        for (parent, ids) in &self.tails {
            if ids.is_empty() {
                return Err(format!("empty tail list under {parent:?}"));
            }
            for &id in ids {
                let m = &self.metas[id as usize];
                if m.tail_of != Some(*parent) || m.hash.is_some() || m.filled == 0 || m.filled >= b
                {
                    return Err(format!("tail index names block {id} wrongly"));
                }
                indexed += 1;
            }
        }
        let tails = self.metas.iter().filter(|m| m.tail_of.is_some()).count();
        if tails != indexed {
            return Err(format!("{tails} retained tails but {indexed} indexed"));
        }
        Ok(())
    }

    fn check_heaps(&self) -> Result<(), String> {
        let mut in_heap = 0;
        for (slot, n) in self.namespaces.iter().enumerate() {
            if !n.heap.is_valid(&self.metas) {
                return Err(format!("eviction heap of {} out of order", n.id));
            }
            for &id in n.heap.items() {
                let m = &self.metas[id as usize];
                if !m.evictable() || m.owner as usize != slot {
                    return Err(format!(
                        "block {id} in {}'s heap but not evictable there",
                        n.id
                    ));
                }
            }
            in_heap += n.heap.len();
        }
        let evictable = self.metas.iter().filter(|m| m.evictable()).count();
        if evictable != in_heap {
            return Err(format!(
                "{evictable} evictable blocks but {in_heap} in heaps"
            ));
        }
        if self
            .metas
            .iter()
            .any(|m| m.pin == Some(PinLevel::Pinned) && m.heap_pos != NIL)
        {
            return Err("a pinned block is in an eviction heap".into());
        }
        Ok(())
    }

    fn check_seqs(&self) -> Result<(), String> {
        let b = self.layout.block_tokens;
        for (sid, s) in &self.seqs {
            let len = s.tokens.len();
            if s.table.len() != (len + s.reserved).div_ceil(b) || s.hashes.len() != len / b {
                return Err(format!(
                    "{sid}: table {} / hashes {} for len {len}",
                    s.table.len(),
                    s.hashes.len()
                ));
            }
            let by_ns: HashMap<_, _> = self.ns_slots.iter().map(|(k, v)| (*v, *k)).collect();
            if by_ns.get(&s.ns_slot) != Some(&s.ns) {
                return Err(format!("{sid}: namespace slot mismatch"));
            }
            let mut replay = Sequence::new(s.ns, s.ns_slot, s.root, s.public.clone());
            for (i, h) in s.hashes.iter().enumerate() {
                let (want, public) = replay.block_hash(i, &s.tokens[i * b..(i + 1) * b]);
                if *h != want || self.metas[s.table[i].index()].hash != Some(want) {
                    return Err(format!("{sid}: block {i} not sealed under its chain hash"));
                }
                replay.push_hash(want, public);
            }
            if replay.n_public != s.n_public {
                return Err(format!(
                    "{sid}: {} public blocks recorded, {} by its chain",
                    s.n_public, replay.n_public
                ));
            }
        }
        Ok(())
    }
}
