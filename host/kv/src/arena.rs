//! The byte arena holding every block's K/V rows: one allocation made at pool construction,
//! 64-byte aligned at its start, blocks laid end to end (`[n_blocks][block_bytes]`).

use crate::error::PoolError;

const ALIGN: usize = 64;

#[derive(Debug)]
pub(crate) struct Arena {
    buf: Vec<u8>,
    base: usize,
    block_bytes: usize,
}

impl Arena {
    pub fn new(n_blocks: usize, block_bytes: usize) -> Result<Self, PoolError> {
        let bytes = n_blocks
            .checked_mul(block_bytes)
            .and_then(|n| n.checked_add(ALIGN))
            .ok_or(PoolError::ArenaAlloc { bytes: usize::MAX })?;
        let mut buf = Vec::new();
        buf.try_reserve_exact(bytes)
            .map_err(|_| PoolError::ArenaAlloc { bytes })?;
        buf.resize(bytes, 0);
        let base = buf.as_ptr().align_offset(ALIGN).min(ALIGN);
        Ok(Self {
            buf,
            base,
            block_bytes,
        })
    }

    pub fn block(&self, id: u32) -> &[u8] {
        let at = self.base + id as usize * self.block_bytes;
        &self.buf[at..at + self.block_bytes]
    }

    pub fn block_mut(&mut self, id: u32) -> &mut [u8] {
        let at = self.base + id as usize * self.block_bytes;
        &mut self.buf[at..at + self.block_bytes]
    }

    /// Copies `len` bytes at `off` within block `src` to the same offset in block `dst`.
    pub fn copy_range(&mut self, src: u32, dst: u32, off: usize, len: usize) {
        let s = self.base + src as usize * self.block_bytes + off;
        let d = self.base + dst as usize * self.block_bytes + off;
        self.buf.copy_within(s..s + len, d);
    }
}
