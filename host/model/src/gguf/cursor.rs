//! Bounds-checked little-endian reads over a byte slice.
//!
//! Invariant: no read indexes past the slice, and every length or count is compared with the
//! bytes left *before* anything is allocated for it; failures carry the byte offset.

use super::error::GgufError;

/// A read position in a GGUF byte buffer.
pub(crate) struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Cursor { buf, pos: 0 }
    }

    /// Current byte offset from the start of the file.
    pub(crate) fn offset(&self) -> u64 {
        self.pos as u64
    }

    /// Bytes not yet read.
    pub(crate) fn remaining(&self) -> u64 {
        (self.buf.len() - self.pos) as u64
    }

    /// Takes the next `n` bytes; `what` names the field for the error.
    pub(crate) fn take(
        &mut self,
        n: u64,
        what: &dyn Fn() -> String,
    ) -> Result<&'a [u8], GgufError> {
        if n > self.remaining() {
            return Err(GgufError::Truncated {
                what: what(),
                offset: self.offset(),
                needed: n,
                available: self.remaining(),
            });
        }
        // n <= remaining <= usize::MAX, so the cast is exact.
        let out = &self.buf[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(out)
    }

    fn array<const N: usize>(&mut self, what: &dyn Fn() -> String) -> Result<[u8; N], GgufError> {
        let bytes = self.take(N as u64, what)?;
        let mut out = [0u8; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }

    pub(crate) fn u8(&mut self, what: &dyn Fn() -> String) -> Result<u8, GgufError> {
        Ok(self.array::<1>(what)?[0])
    }

    pub(crate) fn u16(&mut self, what: &dyn Fn() -> String) -> Result<u16, GgufError> {
        Ok(u16::from_le_bytes(self.array(what)?))
    }

    pub(crate) fn u32(&mut self, what: &dyn Fn() -> String) -> Result<u32, GgufError> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    pub(crate) fn u64(&mut self, what: &dyn Fn() -> String) -> Result<u64, GgufError> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// Checks that `count` items of at least `min_size` bytes each can still be in the file,
    /// so allocating `count` slots is bounded by the file size. `at` is the offset of the count.
    pub(crate) fn check_count(
        &self,
        count: u64,
        min_size: u64,
        at: u64,
        what: &dyn Fn() -> String,
    ) -> Result<(), GgufError> {
        let limit = self.remaining() / min_size.max(1);
        if count > limit {
            return Err(GgufError::TooLarge {
                what: what(),
                count,
                limit,
                offset: at,
            });
        }
        Ok(())
    }

    /// A GGUF string: u64 byte length then UTF-8 bytes.
    pub(crate) fn string(&mut self, what: &dyn Fn() -> String) -> Result<String, GgufError> {
        let at = self.offset();
        let len = self.u64(what)?;
        self.check_count(len, 1, at, &|| format!("{} (string length)", what()))?;
        let start = self.offset();
        let bytes = self.take(len, what)?;
        match std::str::from_utf8(bytes) {
            Ok(s) => Ok(s.to_owned()),
            Err(e) => Err(GgufError::BadUtf8 {
                what: what(),
                offset: start + e.valid_up_to() as u64,
            }),
        }
    }
}
