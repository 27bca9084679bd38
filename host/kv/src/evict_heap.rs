//! An indexed binary min-heap of evictable blocks, ordered by `BlockMeta::evict_key` then id.
//! Each block's position is kept in `BlockMeta::heap_pos`, so removal and re-keying are
//! O(log n) without searching. Invariant: holds exactly its namespace's blocks that are cached,
//! leaf (no resident children) and not pinned. A `Vec<u32>` grown to the namespace's peak,
//! never a per-block allocation.

use crate::ids::NIL;
use crate::meta::BlockMeta;

#[derive(Debug, Default)]
pub(crate) struct EvictHeap {
    items: Vec<u32>,
}

fn less(metas: &[BlockMeta], a: u32, b: u32) -> bool {
    (metas[a as usize].evict_key(), a) < (metas[b as usize].evict_key(), b)
}

impl EvictHeap {
    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn items(&self) -> &[u32] {
        &self.items
    }

    pub fn peek(&self) -> Option<u32> {
        self.items.first().copied()
    }

    pub fn push(&mut self, metas: &mut [BlockMeta], id: u32) {
        debug_assert_eq!(metas[id as usize].heap_pos, NIL);
        self.items.push(id);
        let pos = self.items.len() - 1;
        metas[id as usize].heap_pos = pos as u32;
        self.sift_up(metas, pos);
    }

    pub fn remove(&mut self, metas: &mut [BlockMeta], id: u32) {
        let pos = metas[id as usize].heap_pos as usize;
        debug_assert_eq!(self.items.get(pos), Some(&id));
        let last = self.items.len() - 1;
        self.swap(metas, pos, last);
        self.items.pop();
        metas[id as usize].heap_pos = NIL;
        if pos < self.items.len() {
            self.fix_at(metas, pos);
        }
    }

    /// Restores order after many keys changed.
    pub fn rebuild(&mut self, metas: &mut [BlockMeta]) {
        for pos in (0..self.items.len() / 2).rev() {
            self.sift_down(metas, pos);
        }
    }

    /// Whether the heap order and position back-links hold.
    pub fn is_valid(&self, metas: &[BlockMeta]) -> bool {
        self.items.iter().enumerate().all(|(pos, &id)| {
            metas[id as usize].heap_pos as usize == pos
                && (pos == 0 || !less(metas, id, self.items[(pos - 1) / 2]))
        })
    }

    fn fix_at(&mut self, metas: &mut [BlockMeta], pos: usize) {
        if pos > 0 && less(metas, self.items[pos], self.items[(pos - 1) / 2]) {
            self.sift_up(metas, pos);
        } else {
            self.sift_down(metas, pos);
        }
    }

    fn swap(&mut self, metas: &mut [BlockMeta], a: usize, b: usize) {
        self.items.swap(a, b);
        metas[self.items[a] as usize].heap_pos = a as u32;
        metas[self.items[b] as usize].heap_pos = b as u32;
    }

    fn sift_up(&mut self, metas: &mut [BlockMeta], mut pos: usize) {
        while pos > 0 {
            let parent = (pos - 1) / 2;
            if !less(metas, self.items[pos], self.items[parent]) {
                break;
            }
            self.swap(metas, pos, parent);
            pos = parent;
        }
    }

    fn sift_down(&mut self, metas: &mut [BlockMeta], mut pos: usize) {
        loop {
            let (l, r) = (2 * pos + 1, 2 * pos + 2);
            let mut min = pos;
            if l < self.items.len() && less(metas, self.items[l], self.items[min]) {
                min = l;
            }
            if r < self.items.len() && less(metas, self.items[r], self.items[min]) {
                min = r;
            }
            if min == pos {
                break;
            }
            self.swap(metas, pos, min);
            pos = min;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_in_key_order_with_removals_and_rekeys() {
        let mut metas = vec![BlockMeta::new(); 8];
        for (i, m) in metas.iter_mut().enumerate() {
            m.last = (i as u64 * 5) % 8;
            m.penult = (i as u64 * 3) % 4;
        }
        let mut h = EvictHeap::default();
        for i in 0..8 {
            h.push(&mut metas, i);
        }
        h.remove(&mut metas, 3);
        h.remove(&mut metas, 5);
        metas[5].eff_prio = -1;
        h.push(&mut metas, 5);
        assert!(h.is_valid(&metas));
        let mut out = Vec::new();
        while let Some(id) = h.peek() {
            h.remove(&mut metas, id);
            assert!(h.is_valid(&metas));
            out.push(id);
        }
        let mut want: Vec<u32> = (0..8).filter(|&i| i != 3).collect();
        want.sort_by_key(|&i| (metas[i as usize].evict_key(), i));
        assert_eq!(out, want);
        assert_eq!(out[0], 5);
    }
}
