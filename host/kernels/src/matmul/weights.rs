//! [`WeightMatrix`]: a borrowed `[rows, cols]` matrix of GGML rows, validated on construction.
//!
//! Invariant: `data.len() == rows * ty.row_bytes(cols)` and `cols` is a multiple of the block
//! size of both `ty` and `ty.vec_dot_type()`.

use super::Interleaved;
use crate::KernelError;
use crate::quant::dequantize_row;
use crate::types::GgmlType;

/// A weight matrix in GGML layout: `rows` rows of `cols` elements of type `ty`.
#[derive(Clone, Copy, Debug)]
pub struct WeightMatrix<'a> {
    pub ty: GgmlType,
    /// `[rows, ty.row_bytes(cols)]`
    pub data: &'a [u8],
    pub rows: usize,
    pub cols: usize,
    /// The same matrix interleaved for the AVX-512 kernels, when the process uses them; matmul
    /// then reads it instead of `data`.
    pub interleaved: Option<&'a Interleaved>,
}

impl<'a> WeightMatrix<'a> {
    /// Checks that `data` holds exactly `rows` rows of `cols` elements of `ty`.
    pub fn new(
        ty: GgmlType,
        data: &'a [u8],
        rows: usize,
        cols: usize,
    ) -> Result<Self, KernelError> {
        let block = ty.block_size().max(ty.vec_dot_type().block_size());
        if !cols.is_multiple_of(block) {
            return Err(KernelError::RowNotBlockAligned { ty, cols, block });
        }
        let expected = ty.row_bytes(cols).and_then(|rb| rb.checked_mul(rows));
        if expected != Some(data.len()) {
            return Err(KernelError::WrongDataLength {
                ty,
                rows,
                cols,
                expected: expected.unwrap_or(usize::MAX),
                got: data.len(),
            });
        }
        Ok(WeightMatrix {
            ty,
            data,
            rows,
            cols,
            interleaved: None,
        })
    }

    /// This matrix with its interleaved copy attached (ignored unless it [`Interleaved::fits`]).
    pub fn with_interleaved(mut self, iw: Option<&'a Interleaved>) -> Self {
        self.interleaved = iw.filter(|iw| iw.fits(&self));
        self
    }

    /// Bytes per row.
    pub fn row_bytes(&self) -> usize {
        self.data.len().checked_div(self.rows).unwrap_or(0)
    }

    /// The bytes of row `r` (panics if `r >= rows`).
    pub fn row(&self, r: usize) -> &'a [u8] {
        let rb = self.row_bytes();
        &self.data[r * rb..(r + 1) * rb]
    }
}

/// Embedding lookup: `out[i] = dequantize(w.row(ids[i]))`. `out` is `[ids.len(), w.cols]`.
/// Panics if `out` has the wrong length or an id is out of range.
pub fn get_rows(w: &WeightMatrix, ids: &[u32], out: &mut [f32]) {
    assert_eq!(
        out.len(),
        ids.len() * w.cols,
        "get_rows: out must be [ids.len(), cols]"
    );
    if w.cols == 0 {
        return;
    }
    for (&id, dst) in ids.iter().zip(out.chunks_exact_mut(w.cols)) {
        let id = id as usize;
        assert!(
            id < w.rows,
            "get_rows: id {id} out of range ({} rows)",
            w.rows
        );
        dequantize_row(w.ty, w.row(id), dst).expect("row length validated by WeightMatrix::new");
    }
}
