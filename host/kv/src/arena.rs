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
    map: HugeMap,
    block_bytes: usize,
    committed_blocks: usize,
    /// Joined before `map` is unmapped (see `Drop`).
    prefault: Option<Prefaulter>,
}

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
        let map = HugeMap::new(bytes).map_err(|_| PoolError::ArenaAlloc { bytes })?;
        Ok(Self {
            map,
            block_bytes,
            committed_blocks: 0,
            prefault: None,
        })
    }

    /// Starts keeping a runway of pages past the high-water mark committed (at most
    /// [`RUNWAY_BYTES`] and a quarter of the arena), reported in `stats`' committed blocks.
    pub fn start_prefault(&mut self, stats: Arc<PoolStats>) {
        let len = self.map.len();
        let runway = RUNWAY_BYTES.min(len / 4);
        // SAFETY: `self.map` stays mapped while `self.prefault` lives: `Drop` drops the
        // prefaulter (joining its thread) first, and the map is never replaced.
        self.prefault = unsafe {
            Prefaulter::start(self.map.as_mut_ptr(), len, runway, self.block_bytes, stats)
        };
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

    pub fn block(&self, id: u32) -> &[u8] {
        let at = id as usize * self.block_bytes;
        &self.map.as_slice()[at..at + self.block_bytes]
    }

    pub fn block_mut(&mut self, id: u32) -> &mut [u8] {
        let at = id as usize * self.block_bytes;
        &mut self.map.as_mut_slice()[at..at + self.block_bytes]
    }

    /// Copies `len` bytes at `off` within block `src` to the same offset in block `dst`.
    pub fn copy_range(&mut self, src: u32, dst: u32, off: usize, len: usize) {
        let s = src as usize * self.block_bytes + off;
        let d = dst as usize * self.block_bytes + off;
        self.map.as_mut_slice().copy_within(s..s + len, d);
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
