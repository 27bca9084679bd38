//! [`QuantizedActivations`]: a batch of activation rows converted once to a weight type's
//! `vec_dot_type`, reusable across matmuls that share the input (q/k/v projections).
//!
//! Invariant: the buffer is backed by `u64`s so rows of Q8_K (f32 fields) and f16/f32 start
//! 8-aligned whenever the row size allows; kernels never rely on it (all reads are unaligned).
//! Each row is quantized independently, so a row's bytes do not depend on the batch.

use crate::quant::quantize_row;
use crate::types::GgmlType;

/// Below this many elements a batch is quantized on the calling thread (dispatch overhead).
const PARALLEL_MIN_ELEMS: usize = 1 << 14;
/// Rows per pool task when quantizing in parallel.
const ROWS_PER_TASK: usize = 4;

/// `n` activation rows of `cols` elements, stored as `ty` (`[n, ty.row_bytes(cols)]`).
#[derive(Clone, Debug)]
pub struct QuantizedActivations {
    ty: GgmlType,
    n: usize,
    cols: usize,
    row_bytes: usize,
    buf: Vec<u64>,
}

impl Default for QuantizedActivations {
    fn default() -> Self {
        Self::new()
    }
}

impl QuantizedActivations {
    /// An empty buffer (F32, no rows).
    pub fn new() -> Self {
        QuantizedActivations {
            ty: GgmlType::F32,
            n: 0,
            cols: 0,
            row_bytes: 0,
            buf: Vec::new(),
        }
    }

    /// Converts `x` (`[n, cols]`) to `ty`, reusing the buffer. Panics if `x.len() != n * cols`
    /// or `cols` is not a multiple of `ty`'s block size.
    pub fn quantize(&mut self, ty: GgmlType, x: &[f32], n: usize, cols: usize) {
        assert_eq!(
            x.len(),
            n * cols,
            "QuantizedActivations::quantize: x must be [n, cols]"
        );
        let row_bytes = ty
            .row_bytes(cols)
            .unwrap_or_else(|| panic!("{cols} columns are not a multiple of {ty}'s block size"));
        let total = n * row_bytes;
        self.buf.clear();
        self.buf.resize(total.div_ceil(8), 0);
        self.ty = ty;
        self.n = n;
        self.cols = cols;
        self.row_bytes = row_bytes;
        if row_bytes == 0 {
            return;
        }
        let bytes = &mut bytemuck::cast_slice_mut::<u64, u8>(&mut self.buf)[..total];
        let one = |(src, dst): (&[f32], &mut [u8])| {
            quantize_row(ty, src, dst).expect("lengths computed above");
        };
        if n * cols >= PARALLEL_MIN_ELEMS && n > 1 {
            // Each row is converted on its own, so the split never changes a byte.
            crate::threads::for_each_chunk_mut(bytes, ROWS_PER_TASK * row_bytes, |i, dst| {
                let src = &x[i * ROWS_PER_TASK * cols..][..dst.len() / row_bytes * cols];
                src.chunks_exact(cols)
                    .zip(dst.chunks_exact_mut(row_bytes))
                    .for_each(one);
            });
        } else {
            x.chunks_exact(cols)
                .zip(bytes.chunks_exact_mut(row_bytes))
                .for_each(one);
        }
    }

    /// Makes room for `n` rows of `cols` elements of any type (at most four bytes each), so
    /// converting up to that shape later does not reallocate. Address space only: no page is
    /// touched until a conversion writes it.
    pub fn reserve(&mut self, n: usize, cols: usize) {
        let words = n.saturating_mul(cols).saturating_mul(4).div_ceil(8);
        // Where the address space is refused, the buffer grows on demand instead.
        let _ = self.buf.try_reserve(words.saturating_sub(self.buf.len()));
    }

    /// Where the buffer lives and its capacity in words (a reallocation changes one of them).
    pub fn footprint(&self) -> (usize, usize) {
        (self.buf.as_ptr() as usize, self.buf.capacity())
    }

    /// The type rows are stored as.
    pub fn ty(&self) -> GgmlType {
        self.ty
    }

    /// Number of rows (tokens).
    pub fn n(&self) -> usize {
        self.n
    }

    /// Elements per row.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Bytes per row.
    pub fn row_bytes(&self) -> usize {
        self.row_bytes
    }

    /// All rows, `[n, row_bytes]`.
    pub fn bytes(&self) -> &[u8] {
        &bytemuck::cast_slice::<u64, u8>(&self.buf)[..self.n * self.row_bytes]
    }

    /// Row `t` (panics if `t >= n`).
    pub fn row(&self, t: usize) -> &[u8] {
        assert!(t < self.n, "row {t} out of range");
        &self.bytes()[t * self.row_bytes..(t + 1) * self.row_bytes]
    }
}
