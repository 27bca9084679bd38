//! `GgufWriter`: builds a GGUF v3 file from metadata and tensors, in memory or atomically on disk.
//! A tensor's bytes are given up front or produced row by row while the file is written
//! ([`RowFill`]), so a file larger than memory streams to disk.
//!
//! Invariant: tensors are checked (dims, block alignment, data length, unique name) when added,
//! so everything `to_bytes`/`write_to` emit is a file `GgufFile` accepts, provided any
//! `general.alignment` set by the caller is a u32 power of two (otherwise 32 is used for layout
//! and the key is written as given, which the reader rejects), and every fill writes its rows.

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use memoria_kernels::GgmlType;

use super::error::GgufError;
use super::reader::DEFAULT_ALIGNMENT;
use super::stream::{TensorData, write_data};
use super::tensor::{check_dims, data_size};
use super::value::{MetaArray, MetaValue};

pub use super::stream::RowFill;

/// Version written by the writer.
pub const WRITE_VERSION: u32 = 3;
const MAGIC: &[u8; 4] = b"GGUF";

struct PendingTensor {
    name: String,
    dims: Vec<u64>,
    /// ggml type id as written; `ty` is its type when memoria knows it.
    type_id: u32,
    ty: Option<GgmlType>,
    data: TensorData,
}

impl PendingTensor {
    pub(super) fn data(&self) -> &TensorData {
        &self.data
    }
}

/// Accumulates metadata and tensors for a GGUF file.
#[derive(Default)]
pub struct GgufWriter {
    metadata: Vec<(String, MetaValue)>,
    tensors: Vec<PendingTensor>,
}

impl GgufWriter {
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `key`; replacing an existing key keeps its position.
    pub fn set(&mut self, key: &str, value: MetaValue) -> &mut Self {
        match self.metadata.iter_mut().find(|(k, _)| k == key) {
            Some((_, v)) => *v = value,
            None => self.metadata.push((key.to_owned(), value)),
        }
        self
    }

    pub fn get(&self, key: &str) -> Option<&MetaValue> {
        self.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Metadata in the order it will be written.
    pub fn metadata(&self) -> &[(String, MetaValue)] {
        &self.metadata
    }

    /// Adds a tensor (ggml `ne` order: `dims[0]` is the row length) with its encoded data.
    pub fn add_tensor(
        &mut self,
        name: &str,
        dims: &[u64],
        ty: GgmlType,
        data: Vec<u8>,
    ) -> Result<(), GgufError> {
        self.check_new_name(name)?;
        let expected = data_size(name, dims, ty)?;
        if data.len() as u64 != expected {
            return Err(GgufError::WrongDataLength {
                tensor: name.to_owned(),
                expected,
                got: data.len() as u64,
            });
        }
        self.tensors.push(PendingTensor {
            name: name.to_owned(),
            dims: dims.to_vec(),
            type_id: ty.id(),
            ty: Some(ty),
            data: TensorData::Bytes(data),
        });
        Ok(())
    }

    /// Adds a tensor (ggml `ne` order) whose rows `fill` encodes while the file is written, a
    /// bounded number of rows at a time, on another thread than the one writing.
    pub fn add_tensor_rows(
        &mut self,
        name: &str,
        dims: &[u64],
        ty: GgmlType,
        fill: RowFill,
    ) -> Result<(), GgufError> {
        self.check_new_name(name)?;
        let size = data_size(name, dims, ty)?;
        // data_size checked that dims[0] fits and is block-aligned.
        let row_bytes = ty.row_bytes(dims[0] as usize).unwrap_or(1).max(1);
        self.tensors.push(PendingTensor {
            name: name.to_owned(),
            dims: dims.to_vec(),
            type_id: ty.id(),
            ty: Some(ty),
            data: TensorData::Rows {
                size,
                row_bytes,
                fill,
            },
        });
        Ok(())
    }

    /// Adds a tensor of a raw ggml type id, which may be one memoria does not compute with
    /// (the file then opens, but does not load as a model). For a known id this is
    /// [`GgufWriter::add_tensor`]; otherwise the dims are checked and `data` (nonempty) is
    /// written as given.
    pub fn add_raw_tensor(
        &mut self,
        name: &str,
        dims: &[u64],
        type_id: u32,
        data: Vec<u8>,
    ) -> Result<(), GgufError> {
        if let Some(ty) = GgmlType::from_id(type_id) {
            return self.add_tensor(name, dims, ty, data);
        }
        self.check_new_name(name)?;
        check_dims(name, dims)?;
        if data.is_empty() {
            return Err(GgufError::WrongDataLength {
                tensor: name.to_owned(),
                expected: 1,
                got: 0,
            });
        }
        self.tensors.push(PendingTensor {
            name: name.to_owned(),
            dims: dims.to_vec(),
            type_id,
            ty: None,
            data: TensorData::Bytes(data),
        });
        Ok(())
    }

    fn check_new_name(&self, name: &str) -> Result<(), GgufError> {
        if self.tensors.iter().any(|t| t.name == name) {
            return Err(GgufError::DuplicateTensor {
                tensor: name.to_owned(),
                offset: 0,
            });
        }
        Ok(())
    }

    /// Number of tensors added.
    pub fn tensor_count(&self) -> usize {
        self.tensors.len()
    }

    /// Names, dims and types of the tensors added with a known type, in order.
    pub fn tensor_shapes(&self) -> impl Iterator<Item = (&str, &[u64], GgmlType)> {
        self.tensors
            .iter()
            .filter_map(|t| Some((t.name.as_str(), t.dims.as_slice(), t.ty?)))
    }

    /// Layout alignment: `general.alignment` if it is a u32 power of two, else 32.
    pub fn alignment(&self) -> u64 {
        match self.get("general.alignment") {
            Some(MetaValue::U32(a)) if a.is_power_of_two() => u64::from(*a),
            _ => DEFAULT_ALIGNMENT,
        }
    }

    /// The whole file in memory.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write_into(&mut out)
            .expect("writing to a Vec cannot fail");
        out
    }

    /// Bytes of the whole file.
    pub fn file_size(&self) -> u64 {
        let align = self.alignment();
        let data: u64 = self
            .tensors
            .iter()
            .map(|t| t.data.size().next_multiple_of(align))
            .sum();
        (self.header().len() as u64).next_multiple_of(align) + data
    }

    /// Writes the file to `path` atomically: a `.tmp` sibling is written, synced, then renamed.
    pub fn write_to(&self, path: impl AsRef<Path>) -> Result<(), GgufError> {
        self.write_to_reporting(path, &mut |_| {})
    }

    /// [`GgufWriter::write_to`], calling `progress` with the bytes written so far as the file
    /// grows.
    pub fn write_to_reporting(
        &self,
        path: impl AsRef<Path>,
        progress: &mut dyn FnMut(u64),
    ) -> Result<(), GgufError> {
        let path = path.as_ref();
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        let result = self
            .write_file(&tmp, progress)
            .and_then(|()| fs::rename(&tmp, path));
        result.map_err(|error| {
            // Best effort: the temp file is useless after a failure.
            let _ = fs::remove_file(&tmp);
            GgufError::Io {
                path: path.to_owned(),
                error,
            }
        })
    }

    fn write_file(&self, tmp: &Path, progress: &mut dyn FnMut(u64)) -> io::Result<()> {
        let mut w = BufWriter::with_capacity(1 << 20, File::create(tmp)?);
        self.write_reporting(&mut w, progress)?;
        let file = w.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()
    }

    /// Streams the file to `w`.
    pub fn write_into(&self, w: &mut impl Write) -> io::Result<()> {
        self.write_reporting(w, &mut |_| {})
    }

    fn write_reporting(&self, w: &mut impl Write, progress: &mut dyn FnMut(u64)) -> io::Result<()> {
        let align = self.alignment();
        let header = self.header();
        w.write_all(&header)?;
        if self.tensors.is_empty() {
            return w.flush();
        }
        // Each tensor starts aligned, so only its own length decides the padding after it.
        let zeros = vec![0u8; align as usize];
        let start = header.len() as u64;
        w.write_all(&zeros[..padding(start, align)])?;
        let data: Vec<&TensorData> = self.tensors.iter().map(PendingTensor::data).collect();
        let first = start.next_multiple_of(align);
        progress(first);
        write_data(w, &data, align, &mut |done| progress(first + done))?;
        w.flush()
    }

    /// Magic, counts, metadata and tensor infos.
    fn header(&self) -> Vec<u8> {
        let align = self.alignment();
        let mut header = Vec::new();
        header.extend_from_slice(MAGIC);
        header.extend_from_slice(&WRITE_VERSION.to_le_bytes());
        header.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        header.extend_from_slice(&(self.metadata.len() as u64).to_le_bytes());
        for (key, value) in &self.metadata {
            put_string(&mut header, key);
            header.extend_from_slice(&value.value_type().id().to_le_bytes());
            encode_value(&mut header, value);
        }
        let mut rel: u64 = 0;
        for t in &self.tensors {
            put_string(&mut header, &t.name);
            header.extend_from_slice(&(t.dims.len() as u32).to_le_bytes());
            for d in &t.dims {
                header.extend_from_slice(&d.to_le_bytes());
            }
            header.extend_from_slice(&t.type_id.to_le_bytes());
            header.extend_from_slice(&rel.to_le_bytes());
            rel = (rel + t.data.size()).next_multiple_of(align);
        }
        header
    }
}

pub(super) fn padding(pos: u64, align: u64) -> usize {
    (pos.next_multiple_of(align) - pos) as usize
}

pub(super) fn put_string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

pub(super) fn encode_value(out: &mut Vec<u8>, value: &MetaValue) {
    match value {
        MetaValue::U8(v) => out.push(*v),
        MetaValue::I8(v) => out.extend_from_slice(&v.to_le_bytes()),
        MetaValue::U16(v) => out.extend_from_slice(&v.to_le_bytes()),
        MetaValue::I16(v) => out.extend_from_slice(&v.to_le_bytes()),
        MetaValue::U32(v) => out.extend_from_slice(&v.to_le_bytes()),
        MetaValue::I32(v) => out.extend_from_slice(&v.to_le_bytes()),
        MetaValue::U64(v) => out.extend_from_slice(&v.to_le_bytes()),
        MetaValue::I64(v) => out.extend_from_slice(&v.to_le_bytes()),
        MetaValue::F32(v) => out.extend_from_slice(&v.to_le_bytes()),
        MetaValue::F64(v) => out.extend_from_slice(&v.to_le_bytes()),
        MetaValue::Bool(v) => out.push(u8::from(*v)),
        MetaValue::String(s) => put_string(out, s),
        MetaValue::Array(a) => encode_array(out, a),
    }
}

fn encode_array(out: &mut Vec<u8>, a: &MetaArray) {
    out.extend_from_slice(&a.item_type().id().to_le_bytes());
    out.extend_from_slice(&(a.len() as u64).to_le_bytes());
    fn each<T: Copy, const N: usize>(out: &mut Vec<u8>, v: &[T], enc: impl Fn(T) -> [u8; N]) {
        for &x in v {
            out.extend_from_slice(&enc(x));
        }
    }
    match a {
        MetaArray::U8(v) => out.extend_from_slice(v),
        MetaArray::I8(v) => each(out, v, i8::to_le_bytes),
        MetaArray::U16(v) => each(out, v, u16::to_le_bytes),
        MetaArray::I16(v) => each(out, v, i16::to_le_bytes),
        MetaArray::U32(v) => each(out, v, u32::to_le_bytes),
        MetaArray::I32(v) => each(out, v, i32::to_le_bytes),
        MetaArray::U64(v) => each(out, v, u64::to_le_bytes),
        MetaArray::I64(v) => each(out, v, i64::to_le_bytes),
        MetaArray::F32(v) => each(out, v, f32::to_le_bytes),
        MetaArray::F64(v) => each(out, v, f64::to_le_bytes),
        MetaArray::Bool(v) => each(out, v, |b| [u8::from(b)]),
        MetaArray::String(v) => v.iter().for_each(|s| put_string(out, s)),
        MetaArray::Array(v) => v.iter().for_each(|inner| encode_array(out, inner)),
    }
}
