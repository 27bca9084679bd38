//! Parses a GGUF v2/v3 byte image into metadata and validated tensor infos.
//!
//! Invariant: the parser never panics and never allocates more than a constant times the file
//! size, whatever the input: every count is checked against the bytes left, array nesting is
//! capped, and every tensor is checked for shape, alignment, bounds and overlap. A tensor of a
//! type memoria does not compute with is kept aside ([`UnsupportedTensor`]): its shape, alignment
//! and start are checked, its extent (unknown) is taken as one byte for bounds and overlap.

use std::collections::HashMap;

use memoria_kernels::GgmlType;

use super::cursor::Cursor;
use super::error::GgufError;
use super::tensor::{MAX_DIMS, TensorInfo, UnsupportedTensor, check_dims, data_size};
use super::value::{MetaArray, MetaValue, ValueType};

/// Alignment of the data section when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// Deepest array nesting accepted (an array of arrays of arrays).
pub const MAX_ARRAY_DEPTH: u32 = 3;
/// Fewest bytes of one metadata record: empty key, type id, one-byte value.
const MIN_KV_BYTES: u64 = 8 + 4 + 1;
/// Fewest bytes of one tensor info: empty name, n_dims, one dim, type id, offset.
const MIN_TENSOR_INFO_BYTES: u64 = 8 + 4 + 8 + 4 + 8;

/// The parsed, validated structure of a GGUF file.
pub(crate) struct Parsed {
    pub version: u32,
    pub alignment: u64,
    pub data_offset: u64,
    pub metadata: Vec<(String, MetaValue)>,
    pub key_index: HashMap<String, usize>,
    pub tensors: Vec<TensorInfo>,
    pub tensor_index: HashMap<String, usize>,
    pub unsupported: Vec<UnsupportedTensor>,
}

pub(crate) fn parse(buf: &[u8]) -> Result<Parsed, GgufError> {
    let mut cur = Cursor::new(buf);
    let version = read_header(&mut cur)?;
    let at = cur.offset();
    let tensor_count = cur.u64(&|| "tensor count".to_owned())?;
    let kv_count = cur.u64(&|| "metadata key/value count".to_owned())?;
    cur.check_count(kv_count, MIN_KV_BYTES, at + 8, &|| {
        "metadata key/value count".to_owned()
    })?;
    let left_for_tensors = cur.remaining() - kv_count * MIN_KV_BYTES;
    let tensor_limit = left_for_tensors / MIN_TENSOR_INFO_BYTES;
    if tensor_count > tensor_limit {
        return Err(GgufError::TooLarge {
            what: "tensor count".to_owned(),
            count: tensor_count,
            limit: tensor_limit,
            offset: at,
        });
    }

    let (metadata, key_index) = read_metadata(&mut cur, kv_count)?;
    let alignment = alignment_of(&metadata, &key_index)?;
    let raw = read_tensor_infos(&mut cur, tensor_count)?;
    let data_offset = cur
        .offset()
        .checked_next_multiple_of(alignment)
        .ok_or(GgufError::BadAlignment { alignment })?;
    let Tensors {
        tensors,
        index: tensor_index,
        unsupported,
    } = place_tensors(raw, alignment, data_offset, buf.len() as u64)?;
    Ok(Parsed {
        version,
        alignment,
        data_offset,
        metadata,
        key_index,
        tensors,
        tensor_index,
        unsupported,
    })
}

/// Magic and version; rejects v1, unknown versions and big-endian files.
fn read_header(cur: &mut Cursor<'_>) -> Result<u32, GgufError> {
    let magic = cur.take(4, &|| "magic".to_owned())?;
    let be_magic = magic == b"FUGG";
    if magic != b"GGUF" && !be_magic {
        return Err(GgufError::BadMagic {
            found: magic.to_vec(),
        });
    }
    let version = cur.u32(&|| "version".to_owned())?;
    let swapped = version.swap_bytes();
    if be_magic || (version & 0xFFFF == 0 && (1..=3).contains(&swapped)) {
        return Err(GgufError::BigEndian { version: swapped });
    }
    if version != 2 && version != 3 {
        return Err(GgufError::UnsupportedVersion { version });
    }
    Ok(version)
}

type Metadata = (Vec<(String, MetaValue)>, HashMap<String, usize>);

fn read_metadata(cur: &mut Cursor<'_>, kv_count: u64) -> Result<Metadata, GgufError> {
    // kv_count was bounded by the file size in `parse`.
    let mut metadata = Vec::with_capacity(kv_count as usize);
    let mut index = HashMap::with_capacity(kv_count as usize);
    for i in 0..kv_count {
        let at = cur.offset();
        let key = cur.string(&|| format!("metadata key #{i}"))?;
        if index.contains_key(&key) {
            return Err(GgufError::DuplicateKey { key, offset: at });
        }
        let what = || format!("value of metadata key '{key}'");
        let type_at = cur.offset();
        let type_id = cur.u32(&what)?;
        let value = read_value(cur, type_id, type_at, 0, &what)?;
        index.insert(key.clone(), metadata.len());
        metadata.push((key, value));
    }
    Ok((metadata, index))
}

fn value_type(type_id: u32, at: u64, what: &dyn Fn() -> String) -> Result<ValueType, GgufError> {
    ValueType::from_id(type_id).ok_or_else(|| GgufError::UnknownValueType {
        what: what(),
        type_id,
        offset: at,
    })
}

/// One value of on-disk type `type_id` (read at `type_at`); `depth` is the array nesting so far.
fn read_value(
    cur: &mut Cursor<'_>,
    type_id: u32,
    type_at: u64,
    depth: u32,
    what: &dyn Fn() -> String,
) -> Result<MetaValue, GgufError> {
    Ok(match value_type(type_id, type_at, what)? {
        ValueType::U8 => MetaValue::U8(cur.u8(what)?),
        ValueType::I8 => MetaValue::I8(cur.u8(what)? as i8),
        ValueType::U16 => MetaValue::U16(cur.u16(what)?),
        ValueType::I16 => MetaValue::I16(cur.u16(what)? as i16),
        ValueType::U32 => MetaValue::U32(cur.u32(what)?),
        ValueType::I32 => MetaValue::I32(cur.u32(what)? as i32),
        ValueType::F32 => MetaValue::F32(f32::from_bits(cur.u32(what)?)),
        ValueType::Bool => MetaValue::Bool(cur.u8(what)? != 0),
        ValueType::String => MetaValue::String(cur.string(what)?),
        ValueType::U64 => MetaValue::U64(cur.u64(what)?),
        ValueType::I64 => MetaValue::I64(cur.u64(what)? as i64),
        ValueType::F64 => MetaValue::F64(f64::from_bits(cur.u64(what)?)),
        ValueType::Array => MetaValue::Array(read_array(cur, depth + 1, what)?),
    })
}

/// An array body (item type, count, items) at nesting level `depth` (1 = top-level array).
fn read_array(
    cur: &mut Cursor<'_>,
    depth: u32,
    what: &dyn Fn() -> String,
) -> Result<MetaArray, GgufError> {
    let at = cur.offset();
    if depth > MAX_ARRAY_DEPTH {
        return Err(GgufError::NestingTooDeep {
            what: what(),
            limit: MAX_ARRAY_DEPTH,
            offset: at,
        });
    }
    let item_id = cur.u32(what)?;
    let item = value_type(item_id, at, what)?;
    let count_at = cur.offset();
    let count = cur.u64(what)?;
    cur.check_count(count, item.min_size(), count_at, &|| {
        format!("{} (array count)", what())
    })?;
    // Bounded by the bytes left: count * min_size <= remaining.
    let n = count as usize;
    Ok(match item {
        ValueType::U8 => MetaArray::U8(fixed(cur, n, what, |b: [u8; 1]| b[0])?),
        ValueType::I8 => MetaArray::I8(fixed(cur, n, what, |b: [u8; 1]| b[0] as i8)?),
        ValueType::Bool => MetaArray::Bool(fixed(cur, n, what, |b: [u8; 1]| b[0] != 0)?),
        ValueType::U16 => MetaArray::U16(fixed(cur, n, what, u16::from_le_bytes)?),
        ValueType::I16 => MetaArray::I16(fixed(cur, n, what, i16::from_le_bytes)?),
        ValueType::U32 => MetaArray::U32(fixed(cur, n, what, u32::from_le_bytes)?),
        ValueType::I32 => MetaArray::I32(fixed(cur, n, what, i32::from_le_bytes)?),
        ValueType::F32 => MetaArray::F32(fixed(cur, n, what, f32::from_le_bytes)?),
        ValueType::U64 => MetaArray::U64(fixed(cur, n, what, u64::from_le_bytes)?),
        ValueType::I64 => MetaArray::I64(fixed(cur, n, what, i64::from_le_bytes)?),
        ValueType::F64 => MetaArray::F64(fixed(cur, n, what, f64::from_le_bytes)?),
        ValueType::String => {
            let mut v = Vec::with_capacity(n);
            for _ in 0..n {
                v.push(cur.string(what)?);
            }
            MetaArray::String(v)
        }
        ValueType::Array => {
            let mut v = Vec::with_capacity(n);
            for _ in 0..n {
                v.push(read_array(cur, depth + 1, what)?);
            }
            MetaArray::Array(v)
        }
    })
}

/// `n` fixed-size little-endian items decoded with `decode`.
fn fixed<T, const N: usize>(
    cur: &mut Cursor<'_>,
    n: usize,
    what: &dyn Fn() -> String,
    decode: impl Fn([u8; N]) -> T,
) -> Result<Vec<T>, GgufError> {
    let bytes = cur.take((n * N) as u64, what)?;
    Ok(bytes
        .chunks_exact(N)
        .map(|c| {
            let mut a = [0u8; N];
            a.copy_from_slice(c);
            decode(a)
        })
        .collect())
}

/// `general.alignment`, or the default; must be a nonzero power of two.
fn alignment_of(
    metadata: &[(String, MetaValue)],
    index: &HashMap<String, usize>,
) -> Result<u64, GgufError> {
    const KEY: &str = "general.alignment";
    let Some(&i) = index.get(KEY) else {
        return Ok(DEFAULT_ALIGNMENT);
    };
    let value = &metadata[i].1;
    let alignment = value.as_u64().ok_or_else(|| GgufError::WrongValueType {
        key: KEY.to_owned(),
        expected: "u32",
        found: value.type_name(),
    })?;
    if !alignment.is_power_of_two() || alignment > u64::from(u32::MAX) {
        return Err(GgufError::BadAlignment { alignment });
    }
    Ok(alignment)
}

/// A tensor info as stored: offset still relative to the data section.
struct RawTensor {
    name: String,
    dims: Vec<u64>,
    type_id: u32,
    rel_offset: u64,
    at: u64,
}

fn read_tensor_infos(cur: &mut Cursor<'_>, tensor_count: u64) -> Result<Vec<RawTensor>, GgufError> {
    // tensor_count was bounded by the file size in `parse`.
    let mut out = Vec::with_capacity(tensor_count as usize);
    for j in 0..tensor_count {
        let at = cur.offset();
        let name = cur.string(&|| format!("name of tensor info #{j}"))?;
        let what = || format!("tensor info '{name}'");
        let n_dims = cur.u32(&what)?;
        if n_dims == 0 || n_dims as usize > MAX_DIMS {
            return Err(GgufError::BadDims {
                tensor: name,
                dims: Vec::new(),
                reason: format!("n_dims = {n_dims}, expected 1 to {MAX_DIMS}"),
            });
        }
        let mut dims = Vec::with_capacity(n_dims as usize);
        for _ in 0..n_dims {
            dims.push(cur.u64(&what)?);
        }
        let type_id = cur.u32(&what)?;
        let rel_offset = cur.u64(&what)?;
        out.push(RawTensor {
            name,
            dims,
            type_id,
            rel_offset,
            at,
        });
    }
    Ok(out)
}

/// Placed tensors: the ones with a known type (by name in `index`), and the others.
struct Tensors {
    tensors: Vec<TensorInfo>,
    index: HashMap<String, usize>,
    unsupported: Vec<UnsupportedTensor>,
}

/// Resolves types, sizes and absolute offsets; checks alignment, bounds, duplicates and overlap.
fn place_tensors(
    raw: Vec<RawTensor>,
    alignment: u64,
    data_offset: u64,
    file_size: u64,
) -> Result<Tensors, GgufError> {
    let mut tensors = Vec::with_capacity(raw.len());
    let mut index = HashMap::with_capacity(raw.len());
    let mut unsupported = Vec::new();
    let mut names = std::collections::HashSet::with_capacity(raw.len());
    for t in raw {
        if !names.insert(t.name.clone()) {
            return Err(GgufError::DuplicateTensor {
                tensor: t.name,
                offset: t.at,
            });
        }
        let ty = GgmlType::from_id(t.type_id);
        // Every tensor has at least one element of at least one byte.
        let size = match ty {
            Some(ty) => data_size(&t.name, &t.dims, ty)?,
            None => check_dims(&t.name, &t.dims).map(|_| 1)?,
        };
        if !t.rel_offset.is_multiple_of(alignment) {
            return Err(GgufError::MisalignedTensor {
                tensor: t.name,
                offset: t.rel_offset,
                alignment,
            });
        }
        let end = data_offset
            .checked_add(t.rel_offset)
            .and_then(|o| o.checked_add(size));
        match end {
            Some(end) if end <= file_size => {}
            _ => {
                return Err(GgufError::TensorOutOfBounds {
                    tensor: t.name,
                    end: end.unwrap_or(u64::MAX),
                    file_size,
                });
            }
        }
        let offset = data_offset + t.rel_offset;
        match ty {
            Some(ty) => {
                index.insert(t.name.clone(), tensors.len());
                tensors.push(TensorInfo {
                    name: t.name,
                    dims: t.dims,
                    ty,
                    offset,
                    size,
                });
            }
            None => unsupported.push(UnsupportedTensor {
                name: t.name,
                dims: t.dims,
                type_id: t.type_id,
                offset,
            }),
        }
    }
    check_overlap(&tensors, &unsupported)?;
    Ok(Tensors {
        tensors,
        index,
        unsupported,
    })
}

/// No two data ranges share a byte; an unsupported tensor counts as its first byte.
fn check_overlap(
    tensors: &[TensorInfo],
    unsupported: &[UnsupportedTensor],
) -> Result<(), GgufError> {
    let mut order: Vec<(u64, u64, &str)> = tensors
        .iter()
        .map(|t| (t.offset, t.size, t.name.as_str()))
        .chain(unsupported.iter().map(|t| (t.offset, 1, t.name.as_str())))
        .collect();
    order.sort_unstable();
    for pair in order.windows(2) {
        let ((a_off, a_size, a), (b_off, _, b)) = (pair[0], pair[1]);
        if a_off + a_size > b_off {
            return Err(GgufError::TensorsOverlap {
                a: a.to_owned(),
                b: b.to_owned(),
            });
        }
    }
    Ok(())
}
