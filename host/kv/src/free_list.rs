//! The intrusive doubly-linked list of free blocks, threaded through `BlockMeta::{prev,next}`.
//! Invariant: it holds exactly the blocks in state `Free`, each once. The pool pushes never-used
//! blocks to the back in id order and freed ones to the front, so allocation reuses memory that is
//! already resident before touching new pages of the arena.

use crate::ids::NIL;
use crate::meta::BlockMeta;

#[derive(Debug)]
pub(crate) struct FreeList {
    head: u32,
    tail: u32,
    len: usize,
}

impl FreeList {
    pub fn new() -> Self {
        Self {
            head: NIL,
            tail: NIL,
            len: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn head(&self) -> u32 {
        self.head
    }

    pub fn push_back(&mut self, metas: &mut [BlockMeta], id: u32) {
        let m = &mut metas[id as usize];
        m.prev = self.tail;
        m.next = NIL;
        if self.tail == NIL {
            self.head = id;
        } else {
            metas[self.tail as usize].next = id;
        }
        self.tail = id;
        self.len += 1;
    }

    pub fn push_front(&mut self, metas: &mut [BlockMeta], id: u32) {
        let m = &mut metas[id as usize];
        m.prev = NIL;
        m.next = self.head;
        if self.head == NIL {
            self.tail = id;
        } else {
            metas[self.head as usize].prev = id;
        }
        self.head = id;
        self.len += 1;
    }

    pub fn pop_front(&mut self, metas: &mut [BlockMeta]) -> Option<u32> {
        let id = self.head;
        if id == NIL {
            return None;
        }
        let next = metas[id as usize].next;
        self.head = next;
        if next == NIL {
            self.tail = NIL;
        } else {
            metas[next as usize].prev = NIL;
        }
        let m = &mut metas[id as usize];
        m.prev = NIL;
        m.next = NIL;
        self.len -= 1;
        Some(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_order() {
        let mut metas = vec![BlockMeta::new(); 4];
        let mut l = FreeList::new();
        for i in [2, 0, 3] {
            l.push_back(&mut metas, i);
        }
        assert_eq!(l.len(), 3);
        assert_eq!(l.pop_front(&mut metas), Some(2));
        l.push_back(&mut metas, 1);
        assert_eq!(l.pop_front(&mut metas), Some(0));
        assert_eq!(l.pop_front(&mut metas), Some(3));
        assert_eq!(l.pop_front(&mut metas), Some(1));
        assert_eq!(l.pop_front(&mut metas), None);
        assert_eq!(l.len(), 0);
    }

    #[test]
    fn freed_blocks_are_reused_first() {
        let mut metas = vec![BlockMeta::new(); 4];
        let mut l = FreeList::new();
        for i in 0..4 {
            l.push_back(&mut metas, i);
        }
        assert_eq!(l.pop_front(&mut metas), Some(0));
        assert_eq!(l.pop_front(&mut metas), Some(1));
        l.push_front(&mut metas, 0);
        assert_eq!(l.pop_front(&mut metas), Some(0));
        l.push_front(&mut metas, 1);
        l.push_front(&mut metas, 0);
        let order: Vec<_> = std::iter::from_fn(|| l.pop_front(&mut metas)).collect();
        assert_eq!(order, [0, 1, 2, 3]);
        assert_eq!(l.len(), 0);
    }
}
