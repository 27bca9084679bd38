//! The byte arena holding every block's K/V rows: one anonymous memory mapping reserved at pool
//! construction (a [`HugeMap`]: on a 2 MiB boundary, advised for huge pages, zero-filled, blocks
//! laid end to end `[n_blocks][block_bytes]`) whose pages the OS commits only when a block is
//! first written, so resident memory follows the blocks in use rather than the budget.
//!
//! A pool's arena also keeps a bounded runway of pages past the high-water mark committed by a
//! background thread ([`crate::prefault`]), so new blocks rarely fault on the engine thread.
//!
//! Invariant: [`Arena::committed_blocks`] is the high-water mark of block ids handed out by the
//! pool (`note_used`); pages past it hold no resident memory but the prefault runway's.

use std::sync::Arc;

use memoria_kernels::pages::HugeMap;

use crate::error::PoolError;
use crate::prefault::{Prefaulter, RUNWAY_BYTES};
use crate::stats::PoolStats;

pub(crate) struct Arena {
    /// Shared with the pool's outstanding loans (`crate::loan`), which write lent blocks
    /// from another thread: the mapping outlives every one of them.
    map: Arc<HugeMap>,
    /// The mapping's first byte. Every access goes through one block's range of it, never a
    /// slice of the whole mapping, so a block lent to another thread is never aliased.
    base: *mut u8,
    block_bytes: usize,
    n_blocks: usize,
    committed_blocks: usize,
    /// Joined before `map` is unmapped (see `Drop`).
    prefault: Option<Prefaulter>,
}

// SAFETY: `base` points into `map`, which the arena shares (never mutably) and keeps alive;
// the pool, which owns the arena, is the only one to access a block not lent out, through
// `&self`/`&mut self` like any owned buffer, and a lent block only through its loan.
unsafe impl Send for Arena {}
// SAFETY: as above; `&self` hands out shared slices of blocks only.
unsafe impl Sync for Arena {}

impl std::fmt::Debug for Arena {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Arena")
            .field("bytes", &self.map.len())
            .field("block_bytes", &self.block_bytes)
            .field("committed_blocks", &self.committed_blocks)
            .field("prefault", &self.prefault.is_some())
            .finish()
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        // The prefault thread holds the mapping's address: stop it before the unmap.
        drop(self.prefault.take());
    }
}

impl Arena {
    pub fn new(n_blocks: usize, block_bytes: usize) -> Result<Self, PoolError> {
        let bytes = n_blocks
            .checked_mul(block_bytes)
            .ok_or(PoolError::ArenaAlloc { bytes: usize::MAX })?;
        let mut map = HugeMap::new(bytes).map_err(|_| PoolError::ArenaAlloc { bytes })?;
        let base = map.as_mut_ptr();
        Ok(Self {
            map: Arc::new(map),
            base,
            block_bytes,
            n_blocks,
            committed_blocks: 0,
            prefault: None,
        })
    }

    /// Starts keeping a runway of pages past the high-water mark committed (at most
    /// [`RUNWAY_BYTES`] and a quarter of the arena), reported in `stats`' committed blocks.
    pub fn start_prefault(&mut self, stats: Arc<PoolStats>) {
        let len = self.map.len();
        let runway = RUNWAY_BYTES.min(len / 4);
        // SAFETY: the mapping stays mapped while `self.prefault` lives: `Drop` drops the
        // prefaulter (joining its thread) first, and the map is never replaced.
        self.prefault =
            unsafe { Prefaulter::start(self.base, len, runway, self.block_bytes, stats) };
    }

    /// Records that block `id` is about to be used (allocation): its pages become resident.
    pub fn note_used(&mut self, id: u32) {
        self.committed_blocks = self.committed_blocks.max(id as usize + 1);
        if let Some(p) = &mut self.prefault {
            p.note_used(self.committed_blocks * self.block_bytes);
        }
    }

    /// Blocks whose memory may be resident: one past the highest id ever used.
    pub fn committed_blocks(&self) -> usize {
        self.committed_blocks
    }

    /// Where block `id` starts (panics past the arena, as an index would).
    fn at(&self, id: u32) -> *mut u8 {
        assert!((id as usize) < self.n_blocks, "block {id} past the arena");
        // SAFETY: in bounds of the mapping (`n_blocks * block_bytes` bytes from `base`).
        unsafe { self.base.add(id as usize * self.block_bytes) }
    }

    pub fn block(&self, id: u32) -> &[u8] {
        // SAFETY: one block's bytes inside the mapping, alive while `self` is; the pool reads
        // only blocks not lent out, which nothing else writes.
        unsafe { std::slice::from_raw_parts(self.at(id), self.block_bytes) }
    }

    pub fn block_mut(&mut self, id: u32) -> &mut [u8] {
        // SAFETY: as `block`; `&mut self` makes this the only slice of the arena's own blocks.
        unsafe { std::slice::from_raw_parts_mut(self.at(id), self.block_bytes) }
    }

    /// Copies `len` bytes at `off` within block `src` to the same offset in block `dst`.
    pub fn copy_range(&mut self, src: u32, dst: u32, off: usize, len: usize) {
        assert!(off.checked_add(len).is_some_and(|e| e <= self.block_bytes));
        // SAFETY: both ranges lie inside their blocks (checked above); `ptr::copy` allows
        // them to overlap.
        unsafe { std::ptr::copy(self.at(src).add(off), self.at(dst).add(off), len) }
    }

    /// What a loan of block `id` needs: the shared mapping and the block's first byte.
    pub fn lend(&self, id: u32) -> (Arc<HugeMap>, *mut u8) {
        (self.map.clone(), self.at(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_arena_is_reserved_not_committed() {
        // 8 GiB of address space: committing it would fail or take seconds on a 24 GiB host.
        let mut a = Arena::new(1 << 17, 1 << 16).expect("reserve");
        assert_eq!(a.committed_blocks(), 0);
        a.note_used(3);
        a.block_mut(3)[0] = 7;
        assert_eq!(a.block(3)[0], 7);
        assert_eq!(a.block(4)[0], 0, "untouched blocks read as zeros");
        assert_eq!(a.committed_blocks(), 4);
        a.copy_range(3, 9, 0, 1);
        assert_eq!(a.block(9)[0], 7);
    }
}
