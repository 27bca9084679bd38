//! Tensor descriptors and the shape/size rules shared by the reader and the writer.
//!
//! Invariant: a `TensorInfo` produced by the reader has 1..=4 dims, each >= 1, a row length that
//! is a multiple of its type's block size, and `size == ty.row_bytes(cols) * rows` computed
//! without overflow; its `offset..offset + size` lies inside the file.

use memoria_kernels::GgmlType;

use super::error::GgufError;

/// Most dimensions a ggml tensor has (`GGML_MAX_DIMS`).
pub const MAX_DIMS: usize = 4;

/// One tensor of a GGUF file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    pub name: String,
    /// ggml `ne` order: `dims[0]` is the row length (contiguous), the rest count rows.
    pub dims: Vec<u64>,
    pub ty: GgmlType,
    /// Absolute file offset of the first data byte.
    pub offset: u64,
    /// Data size in bytes.
    pub size: u64,
}

impl TensorInfo {
    /// Total number of elements (product of the dims).
    pub fn n_elements(&self) -> u64 {
        self.dims.iter().product()
    }

    /// Number of rows: the product of `dims[1..]` (1 for a vector).
    pub fn rows(&self) -> u64 {
        self.dims.iter().skip(1).product()
    }

    /// Row length: `dims[0]`.
    pub fn cols(&self) -> u64 {
        self.dims.first().copied().unwrap_or(0)
    }
}

/// A tensor whose ggml type memoria does not compute with. Its data size is unknown, so only
/// its start is placed: the file opens (metadata, tokenizer, `inspect`), loading a model fails.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnsupportedTensor {
    pub name: String,
    /// ggml `ne` order, checked as for any tensor (1..=4 dims, each >= 1, no overflow).
    pub dims: Vec<u64>,
    /// The raw ggml type id from the file.
    pub type_id: u32,
    /// Absolute file offset of the first data byte (inside the file, aligned).
    pub offset: u64,
}

impl UnsupportedTensor {
    /// The ggml name of the type (`q4_1`, `iq2_xxs`, ...) or `unknown`.
    pub fn type_name(&self) -> &'static str {
        GgmlType::name_of_id(self.type_id)
    }

    /// Total number of elements (product of the dims).
    pub fn n_elements(&self) -> u64 {
        self.dims.iter().product()
    }

    /// The error that running a model with this tensor gives.
    pub fn error(&self) -> GgufError {
        GgufError::UnknownTensorType {
            tensor: self.name.clone(),
            type_id: self.type_id,
            type_name: self.type_name(),
        }
    }
}

/// Checks a shape whatever the type: 1..=4 dims, each nonzero and <= i64::MAX, and an element
/// count that fits in u64. Returns the row count (product of `dims[1..]`).
pub(crate) fn check_dims(tensor: &str, dims: &[u64]) -> Result<u64, GgufError> {
    let bad = |reason: String| GgufError::BadDims {
        tensor: tensor.to_owned(),
        dims: dims.to_vec(),
        reason,
    };
    if dims.is_empty() || dims.len() > MAX_DIMS {
        return Err(bad(format!(
            "{} dims, expected 1 to {MAX_DIMS}",
            dims.len()
        )));
    }
    if let Some(i) = dims.iter().position(|&d| d == 0) {
        return Err(bad(format!("dimension {i} is zero")));
    }
    if dims.iter().any(|&d| d > i64::MAX as u64) {
        return Err(bad("a dimension exceeds i64::MAX".to_owned()));
    }
    let mut rows: u64 = 1;
    for &d in &dims[1..] {
        rows = rows
            .checked_mul(d)
            .ok_or_else(|| bad("element count overflows".to_owned()))?;
    }
    rows.checked_mul(dims[0])
        .ok_or_else(|| bad("element count overflows".to_owned()))?;
    Ok(rows)
}

/// Checks a tensor shape for type `ty` and returns its data size in bytes.
pub(crate) fn data_size(tensor: &str, dims: &[u64], ty: GgmlType) -> Result<u64, GgufError> {
    let rows = check_dims(tensor, dims)?;
    let bad = |reason: String| GgufError::BadDims {
        tensor: tensor.to_owned(),
        dims: dims.to_vec(),
        reason,
    };
    let cols =
        usize::try_from(dims[0]).map_err(|_| bad("row length overflows usize".to_owned()))?;
    let row_bytes = ty.row_bytes(cols).ok_or_else(|| {
        bad(format!(
            "row length {cols} is not a multiple of the {ty} block size {}",
            ty.block_size()
        ))
    })?;
    (row_bytes as u64)
        .checked_mul(rows)
        .ok_or_else(|| bad("byte size overflows".to_owned()))
}
