//! Resolving one tensor of the file as the forward pass reads it: a matrix checked for name,
//! shape, type and byte length and used in place (an expert of a 3-D tensor is a matrix over
//! its own slice of the bytes), or a small vector dequantized to f32; then the interleaved
//! copies of every matrix the kernels read that way.

use std::sync::Arc;

use memoria_kernels::{WeightMatrix, matmul::Interleaved, quant::dequantize_row};

use super::super::ModelError;
use crate::gguf::{GgufFile, TensorInfo};

/// A 2-D weight `[rows, cols]` (GGUF dims `[cols, rows]`) living in the mapping.
#[derive(Clone, Debug)]
pub struct MatDesc {
    /// The tensor (for an expert: its slice, under the 3-D tensor's name).
    pub info: TensorInfo,
    pub rows: usize,
    pub cols: usize,
    /// The interleaved copy matmul reads instead of the file's rows, when the kernels use one.
    pub interleaved: Option<Arc<Interleaved>>,
}

impl MatDesc {
    /// The matrix view over the file's bytes (and the interleaved copy, if any).
    pub fn view<'a>(&'a self, file: &'a GgufFile) -> WeightMatrix<'a> {
        WeightMatrix {
            ty: self.info.ty,
            data: file.tensor_data(&self.info),
            rows: self.rows,
            cols: self.cols,
            interleaved: None,
        }
        .with_interleaved(self.interleaved.as_deref())
    }
}

/// Gives every matrix in `mats` its interleaved copy for matmul, when the kernels use one (all
/// in one huge-page mapping), letting the file's pages of each matrix go once it is copied.
pub(crate) fn interleave(mats: Vec<&mut MatDesc>, file: &GgufFile) {
    let views: Vec<_> = mats.iter().map(|m| m.view(file)).collect();
    let built = Interleaved::build_all(&views, |i| file.release(&mats[i].info));
    drop(views);
    for (m, copy) in mats.into_iter().zip(built) {
        m.interleaved = copy.map(Arc::new);
    }
}

pub(crate) fn find<'a>(f: &'a GgufFile, name: &str) -> Result<&'a TensorInfo, ModelError> {
    f.tensor(name)
        .ok_or_else(|| ModelError::MissingTensor(name.to_string()))
}

fn bad(name: &str, why: String) -> ModelError {
    ModelError::BadTensor {
        name: name.into(),
        why,
    }
}

/// Checks that `info` is a weight matrix `rows × cols` and describes it.
fn describe(
    info: TensorInfo,
    data: &[u8],
    rows: usize,
    cols: usize,
) -> Result<MatDesc, ModelError> {
    if info.ty.is_activation_only() {
        return Err(bad(&info.name, format!("{} is not a weight type", info.ty)));
    }
    WeightMatrix::new(info.ty, data, rows, cols).map_err(|e| bad(&info.name, e.to_string()))?;
    Ok(MatDesc {
        info,
        rows,
        cols,
        interleaved: None,
    })
}

/// A matrix with GGUF dims `[cols, rows]`.
pub(crate) fn mat(
    f: &GgufFile,
    name: &str,
    cols: usize,
    rows: usize,
) -> Result<MatDesc, ModelError> {
    let info = find(f, name)?;
    let want = [cols as u64, rows as u64];
    if info.dims.as_slice() != want {
        return Err(bad(
            name,
            format!("dims {:?}, expected {want:?}", info.dims),
        ));
    }
    describe(info.clone(), f.tensor_data(info), rows, cols)
}

/// A matrix if the file has the tensor.
pub(crate) fn opt_mat(
    f: &GgufFile,
    name: &str,
    cols: usize,
    rows: usize,
) -> Result<Option<MatDesc>, ModelError> {
    f.tensor(name).map(|_| mat(f, name, cols, rows)).transpose()
}

/// The `n` experts of a 3-D tensor with GGUF dims `[cols, rows, n]`, each a matrix over its own
/// slice of the tensor's bytes (ggml's `mul_mat_id` reads expert `e` at `e * nb[2]`).
pub(crate) fn experts(
    f: &GgufFile,
    name: &str,
    cols: usize,
    rows: usize,
    n: usize,
) -> Result<Vec<MatDesc>, ModelError> {
    let info = find(f, name)?;
    let want = [cols as u64, rows as u64, n as u64];
    if info.dims.as_slice() != want {
        return Err(bad(
            name,
            format!("dims {:?}, expected {want:?}", info.dims),
        ));
    }
    let per = info
        .ty
        .row_bytes(cols)
        .and_then(|rb| rb.checked_mul(rows))
        .ok_or_else(|| bad(name, format!("rows of {cols} {} do not fit", info.ty)))?;
    if per.checked_mul(n) != usize::try_from(info.size).ok() {
        return Err(bad(
            name,
            format!("{} bytes for {n} experts of {per}", info.size),
        ));
    }
    (0..n)
        .map(|e| {
            let slice = TensorInfo {
                name: info.name.clone(),
                dims: vec![cols as u64, rows as u64],
                ty: info.ty,
                offset: info.offset + (e * per) as u64,
                size: per as u64,
            };
            let data = f.tensor_data(&slice);
            describe(slice.clone(), data, rows, cols)
        })
        .collect()
}

/// A tensor of exactly `dims`, dequantized to f32 (norm weights, biases, sinks, factors).
fn values(f: &GgufFile, name: &str, dims: &[u64]) -> Result<Vec<f32>, ModelError> {
    let info = find(f, name)?;
    if info.dims.as_slice() != dims {
        return Err(bad(
            name,
            format!("dims {:?}, expected {dims:?}", info.dims),
        ));
    }
    let len = dims.iter().product::<u64>() as usize;
    let row = dims[0] as usize;
    let mut out = vec![0.0f32; len];
    let data = f.tensor_data(info);
    let row_bytes = info.ty.row_bytes(row).unwrap_or(0);
    for (i, dst) in out.chunks_exact_mut(row.max(1)).enumerate() {
        let src = data.get(i * row_bytes..(i + 1) * row_bytes).unwrap_or(&[]);
        dequantize_row(info.ty, src, dst).map_err(|e| bad(name, e.to_string()))?;
    }
    Ok(out)
}

/// A 1-D tensor of `len` elements, dequantized to f32.
pub(crate) fn vector(f: &GgufFile, name: &str, len: usize) -> Result<Vec<f32>, ModelError> {
    values(f, name, &[len as u64])
}

/// A 1-D tensor if the file has it.
pub(crate) fn opt_vector(
    f: &GgufFile,
    name: &str,
    len: usize,
) -> Result<Option<Vec<f32>>, ModelError> {
    f.tensor(name).map(|_| vector(f, name, len)).transpose()
}

/// A 2-D tensor `[rows][cols]` (GGUF dims `[cols, rows]`) as f32 rows (per-expert biases).
pub(crate) fn table(
    f: &GgufFile,
    name: &str,
    cols: usize,
    rows: usize,
) -> Result<Vec<f32>, ModelError> {
    values(f, name, &[cols as u64, rows as u64])
}
