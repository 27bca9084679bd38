//! The byte arena holding every block's K/V rows: one anonymous memory mapping reserved at pool
//! construction (page-aligned, zero-filled, blocks laid end to end `[n_blocks][block_bytes]`)
//! whose pages the OS commits only when a block is first written, so resident memory follows the
//! blocks in use rather than the budget.
//!
//! Invariant: [`Arena::committed_blocks`] is the high-water mark of block ids handed out by the
//! pool (`note_used`); pages past it have never been touched and hold no resident memory.

use memmap2::MmapMut;

use crate::error::PoolError;

#[derive(Debug)]
pub(crate) struct Arena {
    map: MmapMut,
    block_bytes: usize,
    committed_blocks: usize,
}

impl Arena {
    pub fn new(n_blocks: usize, block_bytes: usize) -> Result<Self, PoolError> {
        let bytes = n_blocks
            .checked_mul(block_bytes)
            .ok_or(PoolError::ArenaAlloc { bytes: usize::MAX })?;
        let map = MmapMut::map_anon(bytes.max(1)).map_err(|_| PoolError::ArenaAlloc { bytes })?;
        Ok(Self {
            map,
            block_bytes,
            committed_blocks: 0,
        })
    }

    /// Records that block `id` is about to be used (allocation): its pages become resident.
    pub fn note_used(&mut self, id: u32) {
        self.committed_blocks = self.committed_blocks.max(id as usize + 1);
    }

    /// Blocks whose memory may be resident: one past the highest id ever used.
    pub fn committed_blocks(&self) -> usize {
        self.committed_blocks
    }

    pub fn block(&self, id: u32) -> &[u8] {
        let at = id as usize * self.block_bytes;
        &self.map[at..at + self.block_bytes]
    }

    pub fn block_mut(&mut self, id: u32) -> &mut [u8] {
        let at = id as usize * self.block_bytes;
        &mut self.map[at..at + self.block_bytes]
    }

    /// Copies `len` bytes at `off` within block `src` to the same offset in block `dst`.
    pub fn copy_range(&mut self, src: u32, dst: u32, off: usize, len: usize) {
        let s = src as usize * self.block_bytes + off;
        let d = dst as usize * self.block_bytes + off;
        self.map.copy_within(s..s + len, d);
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
