//! K/V element types and the byte layout of one block: `[layer][K=0|V=1][slot 0..B][row_bytes]`.
//! A validated layout always has whole quant blocks per row and sizes that fit in `usize`.

use crate::error::PoolError;

/// Largest block size accepted (slot counts are kept in `u32`; larger blocks defeat sharing).
pub const MAX_BLOCK_TOKENS: usize = 4096;

/// Element type of the cached K and V rows (llama.cpp's `-ctk/-ctv`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KvElem {
    /// 4 bytes per element.
    F32,
    /// IEEE half, 2 bytes per element.
    F16,
    /// GGML q8_0: 32 elements in 34 bytes (f16 scale + 32 i8).
    Q8_0,
    /// GGML q4_0: 32 elements in 18 bytes (f16 scale + 16 nibble pairs).
    Q4_0,
}

impl KvElem {
    /// The stable name hashed into root hashes; never change these strings.
    pub fn name(self) -> &'static str {
        match self {
            KvElem::F32 => "f32",
            KvElem::F16 => "f16",
            KvElem::Q8_0 => "q8_0",
            KvElem::Q4_0 => "q4_0",
        }
    }

    /// Bytes of one row of `kv_dim` elements; quantized types need `kv_dim % 32 == 0`.
    pub fn row_bytes(self, kv_dim: usize) -> Result<usize, PoolError> {
        let bad = |why: String| PoolError::BadLayout { why };
        if kv_dim == 0 {
            return Err(bad("kv_dim is 0".into()));
        }
        let (per, bytes) = match self {
            KvElem::F32 => (1, 4),
            KvElem::F16 => (1, 2),
            KvElem::Q8_0 => (32, 34),
            KvElem::Q4_0 => (32, 18),
        };
        if !kv_dim.is_multiple_of(per) {
            return Err(bad(format!(
                "kv_dim {kv_dim} is not a multiple of {per}, as {} rows need",
                self.name()
            )));
        }
        (kv_dim / per)
            .checked_mul(bytes)
            .ok_or_else(|| bad(format!("kv_dim {kv_dim} overflows the row size")))
    }
}

/// Which half of the cache a row belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KvPart {
    /// Keys.
    K = 0,
    /// Values.
    V = 1,
}

/// Shape of the cached state of one model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KvLayout {
    /// Transformer layers.
    pub n_layer: usize,
    /// Elements per K (and per V) row: `n_head_kv * head_dim`.
    pub kv_dim: usize,
    /// Tokens per block (B).
    pub block_tokens: usize,
    /// Element type of the rows.
    pub elem: KvElem,
}

impl KvLayout {
    /// Default block size in tokens.
    pub const DEFAULT_BLOCK_TOKENS: usize = 16;

    /// A layout with the default block size.
    pub fn new(n_layer: usize, kv_dim: usize, elem: KvElem) -> Self {
        Self {
            n_layer,
            kv_dim,
            block_tokens: Self::DEFAULT_BLOCK_TOKENS,
            elem,
        }
    }

    /// This layout with another block size.
    pub fn with_block_tokens(self, block_tokens: usize) -> Self {
        Self {
            block_tokens,
            ..self
        }
    }

    /// Bytes of one row; checks the layout.
    pub fn row_bytes(&self) -> Result<usize, PoolError> {
        self.elem.row_bytes(self.kv_dim)
    }

    /// Bytes of one block (`n_layer * 2 * B * row_bytes`); checks the layout.
    pub fn block_bytes(&self) -> Result<usize, PoolError> {
        let bad = |why: String| PoolError::BadLayout { why };
        if self.n_layer == 0 {
            return Err(bad("n_layer is 0".into()));
        }
        if self.block_tokens == 0 || self.block_tokens > MAX_BLOCK_TOKENS {
            return Err(bad(format!(
                "block_tokens {} is outside 1..={MAX_BLOCK_TOKENS}",
                self.block_tokens
            )));
        }
        let row = self.row_bytes()?;
        self.n_layer
            .checked_mul(2)
            .and_then(|n| n.checked_mul(self.block_tokens))
            .and_then(|n| n.checked_mul(row))
            .ok_or_else(|| bad("block size overflows usize".into()))
    }

    /// Byte offset of a row inside a block; the layout must be valid and the indices in range.
    pub(crate) fn row_offset(
        &self,
        row_bytes: usize,
        layer: usize,
        part: KvPart,
        slot: usize,
    ) -> usize {
        ((layer * 2 + part as usize) * self.block_tokens + slot) * row_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_sizes() {
        assert_eq!(KvElem::F32.row_bytes(64), Ok(256));
        assert_eq!(KvElem::F16.row_bytes(64), Ok(128));
        assert_eq!(KvElem::Q8_0.row_bytes(64), Ok(68));
        assert_eq!(KvElem::Q4_0.row_bytes(64), Ok(36));
        assert!(matches!(
            KvElem::Q8_0.row_bytes(48),
            Err(PoolError::BadLayout { .. })
        ));
        assert!(matches!(
            KvElem::Q4_0.row_bytes(20),
            Err(PoolError::BadLayout { .. })
        ));
    }

    #[test]
    fn block_size_and_offsets() {
        let l = KvLayout::new(3, 32, KvElem::F16).with_block_tokens(4);
        assert_eq!(l.block_bytes(), Ok(3 * 2 * 4 * 64));
        assert_eq!(l.row_offset(64, 0, KvPart::V, 1), (4 + 1) * 64);
        assert_eq!(l.row_offset(64, 2, KvPart::K, 3), (2 * 2 * 4 + 3) * 64);
        assert!(KvLayout::new(0, 32, KvElem::F32).block_bytes().is_err());
        assert!(
            KvLayout::new(1, 32, KvElem::F32)
                .with_block_tokens(0)
                .block_bytes()
                .is_err()
        );
    }
}
