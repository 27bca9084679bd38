//! Unit tests of the GGUF reader and writer: round trips and a corpus of malformed files, each
//! pinned to the error variant it must produce.

use memoria_kernels::GgmlType;
use proptest::prelude::*;

use super::writer::{encode_value, put_string};
use super::*;

/// A small valid file: mixed metadata (incl. nested arrays) and two tensors of different types.
fn small_writer() -> GgufWriter {
    let mut w = GgufWriter::new();
    w.set("general.architecture", MetaValue::String("llama".into()))
        .set("general.name", MetaValue::String("tiny ✓".into()))
        .set("llama.block_count", MetaValue::U32(2))
        .set("x.neg", MetaValue::I32(-5))
        .set("x.i64", MetaValue::I64(7))
        .set("x.f64", MetaValue::F64(0.25))
        .set("x.flag", MetaValue::Bool(true))
        .set(
            "x.tokens",
            MetaValue::Array(MetaArray::String(vec!["a".into(), "▁b".into(), "".into()])),
        )
        .set(
            "x.scores",
            MetaValue::Array(MetaArray::F32(vec![0.5, -1.0])),
        )
        .set(
            "x.nested",
            MetaValue::Array(MetaArray::Array(vec![
                MetaArray::I32(vec![1, 2]),
                MetaArray::U8(vec![3]),
            ])),
        );
    let f32_data: Vec<u8> = (0..16).flat_map(|i| (i as f32).to_le_bytes()).collect();
    w.add_tensor("a.weight", &[8, 2], GgmlType::F32, f32_data)
        .unwrap();
    w.add_tensor("b.weight", &[32, 1], GgmlType::Q8_0, vec![7u8; 34])
        .unwrap();
    w
}

fn small_file() -> Vec<u8> {
    small_writer().to_bytes()
}

/// Hand-built file: header, metadata and tensor infos exactly as given, then padding to 32 and
/// `data_len` zero bytes. Tensors are (name, dims, type id, relative offset).
fn raw_file(
    version: u32,
    kvs: &[(&str, MetaValue)],
    tensors: &[(&str, &[u64], u32, u64)],
    data_len: usize,
) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(b"GGUF");
    b.extend_from_slice(&version.to_le_bytes());
    b.extend_from_slice(&(tensors.len() as u64).to_le_bytes());
    b.extend_from_slice(&(kvs.len() as u64).to_le_bytes());
    for (k, v) in kvs {
        put_string(&mut b, k);
        b.extend_from_slice(&v.value_type().id().to_le_bytes());
        encode_value(&mut b, v);
    }
    for (name, dims, ty, off) in tensors {
        put_string(&mut b, name);
        b.extend_from_slice(&(dims.len() as u32).to_le_bytes());
        for d in *dims {
            b.extend_from_slice(&d.to_le_bytes());
        }
        b.extend_from_slice(&ty.to_le_bytes());
        b.extend_from_slice(&off.to_le_bytes());
    }
    b.resize(b.len().next_multiple_of(32) + data_len, 0);
    b
}

fn err(bytes: Vec<u8>) -> GgufError {
    GgufFile::from_bytes(bytes).expect_err("malformed file was accepted")
}

fn header_only(version: u32, tensor_count: u64, kv_count: u64, tail: &[u8]) -> Vec<u8> {
    let mut b = b"GGUF".to_vec();
    b.extend_from_slice(&version.to_le_bytes());
    b.extend_from_slice(&tensor_count.to_le_bytes());
    b.extend_from_slice(&kv_count.to_le_bytes());
    b.extend_from_slice(tail);
    b
}

#[test]
fn gguf_round_trip_preserves_metadata_and_tensors() {
    let w = small_writer();
    let f = GgufFile::from_bytes(w.to_bytes()).unwrap();
    assert_eq!(f.version(), 3);
    assert_eq!(f.alignment(), 32);
    assert_eq!(f.metadata(), w.metadata());
    assert_eq!(f.get_str("general.architecture"), Some("llama"));
    assert_eq!(f.get_u32("llama.block_count"), Some(2));
    assert_eq!(f.get_u64("x.i64"), Some(7));
    assert_eq!(f.get_u64("x.neg"), None);
    assert_eq!(f.get_f32("x.f64"), Some(0.25));
    assert_eq!(f.get_bool("x.flag"), Some(true));
    assert_eq!(
        f.get_array("x.tokens").unwrap().as_strings().unwrap()[1],
        "▁b"
    );
    assert_eq!(
        f.get_array("x.scores").unwrap().as_f32(),
        Some(&[0.5f32, -1.0][..])
    );
    assert_eq!(f.get("missing"), None);
    let a = f.tensor("a.weight").unwrap();
    assert_eq!(
        (a.dims.as_slice(), a.ty, a.cols(), a.rows(), a.n_elements()),
        (&[8u64, 2][..], GgmlType::F32, 8, 2, 16)
    );
    assert_eq!(a.offset % 32, 0);
    assert_eq!(f.tensor_data(a)[4..8], 1f32.to_le_bytes());
    let b = f.tensor("b.weight").unwrap();
    assert_eq!((b.ty, b.size), (GgmlType::Q8_0, 34));
    assert_eq!(f.tensor_data(b), &[7u8; 34][..]);
    assert_eq!(f.tensors().len(), 2);
    assert_eq!(f.file_size(), w.to_bytes().len() as u64);
}

#[test]
fn gguf_writer_set_replaces_in_place_and_honours_alignment() {
    let mut w = small_writer();
    w.set("llama.block_count", MetaValue::U32(9));
    assert_eq!(
        w.metadata()[2],
        ("llama.block_count".to_owned(), MetaValue::U32(9))
    );
    w.set("general.alignment", MetaValue::U32(64));
    let f = GgufFile::from_bytes(w.to_bytes()).unwrap();
    assert_eq!(f.alignment(), 64);
    assert!(f.tensors().iter().all(|t| t.offset % 64 == 0));
    assert_eq!(f.get_u32("llama.block_count"), Some(9));
}

#[test]
fn gguf_writer_rejects_bad_tensors() {
    let mut w = GgufWriter::new();
    assert!(matches!(
        w.add_tensor("t", &[4], GgmlType::F32, vec![0; 15]),
        Err(GgufError::WrongDataLength { .. })
    ));
    assert!(matches!(
        w.add_tensor("t", &[31], GgmlType::Q8_0, vec![0; 34]),
        Err(GgufError::BadDims { .. })
    ));
    assert!(matches!(
        w.add_tensor("t", &[1, 1, 1, 1, 1], GgmlType::F32, vec![0; 4]),
        Err(GgufError::BadDims { .. })
    ));
    w.add_tensor("t", &[1], GgmlType::F32, vec![0; 4]).unwrap();
    assert!(matches!(
        w.add_tensor("t", &[1], GgmlType::F32, vec![0; 4]),
        Err(GgufError::DuplicateTensor { .. })
    ));
}

#[test]
fn gguf_writer_writes_atomically_and_open_maps_it() {
    let dir = std::env::temp_dir().join(format!("memoria-gguf-unit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("small.gguf");
    small_writer().write_to(&path).unwrap();
    assert!(!dir.join("small.gguf.tmp").exists());
    let f = GgufFile::open(&path).unwrap();
    assert_eq!(f.get_str("general.name"), Some("tiny ✓"));
    // The content hash read from the file equals the hash of the mapped (and in-memory) bytes.
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(f.content_hash(), *blake3::hash(&bytes).as_bytes());
    assert_eq!(
        GgufFile::from_bytes(bytes.clone()).unwrap().content_hash(),
        *blake3::hash(&bytes).as_bytes()
    );
    assert!(matches!(
        GgufFile::open(dir.join("absent.gguf")),
        Err(GgufError::Io { .. })
    ));
    // A directory is named as one (mapping it would say "No such device"), and the OS error
    // appears once in the error chain.
    let Err(e) = GgufFile::open(&dir) else {
        panic!("a directory is refused");
    };
    assert!(e.to_string().contains("is a directory"), "{e}");
    let Err(absent) = GgufFile::open(dir.join("absent.gguf")) else {
        panic!("absent");
    };
    assert!(std::error::Error::source(&absent).is_none(), "{absent}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn gguf_every_truncated_prefix_is_an_error() {
    let full = small_file();
    let f = GgufFile::from_bytes(full.clone()).unwrap();
    let data_end = f.tensors().iter().map(|t| t.offset + t.size).max().unwrap() as usize;
    for len in 0..data_end {
        assert!(
            GgufFile::from_bytes(full[..len].to_vec()).is_err(),
            "prefix of {len} bytes accepted"
        );
    }
    // Only trailing padding after the last tensor may be cut.
    for len in data_end..=full.len() {
        GgufFile::from_bytes(full[..len].to_vec()).unwrap();
    }
}

#[test]
fn gguf_rejects_bad_magic_v1_and_big_endian() {
    assert!(matches!(
        err(b"GGML\x03\0\0\0".to_vec()),
        GgufError::BadMagic { .. }
    ));
    assert!(matches!(
        err(header_only(1, 0, 0, &[])),
        GgufError::UnsupportedVersion { version: 1 }
    ));
    assert!(matches!(
        err(header_only(4, 0, 0, &[])),
        GgufError::UnsupportedVersion { version: 4 }
    ));
    let mut be = b"GGUF".to_vec();
    be.extend_from_slice(&3u32.to_be_bytes());
    be.extend_from_slice(&[0; 16]);
    assert!(matches!(err(be), GgufError::BigEndian { version: 3 }));
    assert!(matches!(err(b"GGU".to_vec()), GgufError::Truncated { .. }));
    // v2 parses like v3.
    assert_eq!(
        GgufFile::from_bytes(header_only(2, 0, 0, &[]))
            .unwrap()
            .version(),
        2
    );
}

#[test]
fn gguf_rejects_huge_counts_and_lengths() {
    assert!(matches!(
        err(header_only(3, u64::MAX, 0, &[])),
        GgufError::TooLarge { .. }
    ));
    assert!(matches!(
        err(header_only(3, 0, u64::MAX, &[])),
        GgufError::TooLarge { .. }
    ));
    assert!(matches!(
        err(header_only(3, 1 << 40, 1 << 40, &[0; 64])),
        GgufError::TooLarge { .. }
    ));
    // One key whose string length claims 2^62 bytes.
    let mut tail = (1u64 << 62).to_le_bytes().to_vec();
    tail.extend_from_slice(&[b'k'; 16]);
    assert!(matches!(
        err(header_only(3, 0, 1, &tail)),
        GgufError::TooLarge { .. }
    ));
    // A string value with a huge length.
    let mut tail = Vec::new();
    put_string(&mut tail, "k");
    tail.extend_from_slice(&8u32.to_le_bytes());
    tail.extend_from_slice(&u64::MAX.to_le_bytes());
    tail.extend_from_slice(b"abc");
    assert!(matches!(
        err(header_only(3, 0, 1, &tail)),
        GgufError::TooLarge { .. }
    ));
    // An array of u32 with a huge count.
    let mut tail = Vec::new();
    put_string(&mut tail, "k");
    tail.extend_from_slice(&9u32.to_le_bytes());
    tail.extend_from_slice(&4u32.to_le_bytes());
    tail.extend_from_slice(&(u64::MAX / 2).to_le_bytes());
    tail.extend_from_slice(&[0; 64]);
    match err(header_only(3, 0, 1, &tail)) {
        GgufError::TooLarge { what, .. } => assert!(what.contains("'k'"), "{what}"),
        e => panic!("{e}"),
    }
}

#[test]
fn gguf_rejects_unknown_value_types_deep_nesting_and_bad_utf8() {
    let mut tail = Vec::new();
    put_string(&mut tail, "k");
    tail.extend_from_slice(&99u32.to_le_bytes());
    tail.extend_from_slice(&[0; 8]);
    assert!(matches!(
        err(header_only(3, 0, 1, &tail)),
        GgufError::UnknownValueType { type_id: 99, .. }
    ));
    // Unknown item type inside an array.
    let mut tail = Vec::new();
    put_string(&mut tail, "k");
    tail.extend_from_slice(&9u32.to_le_bytes());
    tail.extend_from_slice(&13u32.to_le_bytes());
    tail.extend_from_slice(&1u64.to_le_bytes());
    tail.extend_from_slice(&[0; 8]);
    assert!(matches!(
        err(header_only(3, 0, 1, &tail)),
        GgufError::UnknownValueType { type_id: 13, .. }
    ));
    // Arrays nested four deep.
    let deep = MetaArray::Array(vec![MetaArray::Array(vec![MetaArray::Array(vec![
        MetaArray::U8(vec![1]),
    ])])]);
    assert!(matches!(
        err(raw_file(3, &[("k", MetaValue::Array(deep))], &[], 0)),
        GgufError::NestingTooDeep { .. }
    ));
    let three = MetaArray::Array(vec![MetaArray::Array(vec![MetaArray::U8(vec![1])])]);
    GgufFile::from_bytes(raw_file(3, &[("k", MetaValue::Array(three))], &[], 0)).unwrap();
    // Bad UTF-8 in a key.
    let mut tail = 2u64.to_le_bytes().to_vec();
    tail.extend_from_slice(&[0xC3, 0x28]);
    tail.extend_from_slice(&4u32.to_le_bytes());
    tail.extend_from_slice(&[0; 4]);
    match err(header_only(3, 0, 1, &tail)) {
        GgufError::BadUtf8 { what, offset } => {
            assert_eq!((what.as_str(), offset), ("metadata key #0", 32))
        }
        e => panic!("{e}"),
    }
}

#[test]
fn gguf_rejects_duplicates() {
    let kv = ("k", MetaValue::U8(1));
    assert!(matches!(
        err(raw_file(3, &[kv.clone(), kv], &[], 0)),
        GgufError::DuplicateKey { .. }
    ));
    let t = ("t", &[8u64][..], 0, 0);
    let t2 = ("t", &[8u64][..], 0, 32);
    assert!(matches!(
        err(raw_file(3, &[], &[t, t2], 64)),
        GgufError::DuplicateTensor { .. }
    ));
}

#[test]
fn gguf_rejects_bad_alignment() {
    let a = |v| [("general.alignment", MetaValue::U32(v))];
    assert!(matches!(
        err(raw_file(3, &a(48), &[], 0)),
        GgufError::BadAlignment { alignment: 48 }
    ));
    assert!(matches!(
        err(raw_file(3, &a(0), &[], 0)),
        GgufError::BadAlignment { alignment: 0 }
    ));
    let s = [("general.alignment", MetaValue::String("32".into()))];
    assert!(matches!(
        err(raw_file(3, &s, &[], 0)),
        GgufError::WrongValueType { .. }
    ));
    let t = ("t", &[4u64][..], 0, 16);
    match err(raw_file(3, &[], &[t], 64)) {
        GgufError::MisalignedTensor {
            tensor,
            offset,
            alignment,
        } => {
            assert_eq!((tensor.as_str(), offset, alignment), ("t", 16, 32))
        }
        e => panic!("{e}"),
    }
}

#[test]
fn gguf_rejects_bad_tensor_types_and_dims() {
    let dims_err = |dims: &[u64], ty: u32| err(raw_file(3, &[], &[("w", dims, ty, 0)], 64));
    assert!(matches!(
        dims_err(&[1, 1, 1, 1, 1], 0),
        GgufError::BadDims { .. }
    ));
    assert!(matches!(dims_err(&[], 0), GgufError::BadDims { .. }));
    assert!(matches!(dims_err(&[4, 0], 0), GgufError::BadDims { .. }));
    assert!(matches!(
        dims_err(&[1 << 32, 1 << 32, 1 << 32], 0),
        GgufError::BadDims { .. }
    ));
    assert!(matches!(
        dims_err(&[u64::MAX], 0),
        GgufError::BadDims { .. }
    ));
    assert!(matches!(
        dims_err(&[1 << 40, 1 << 22], 0),
        GgufError::BadDims { .. }
    ));
    assert!(matches!(dims_err(&[31], 8), GgufError::BadDims { .. }));
}

#[test]
fn gguf_rejects_out_of_bounds_and_overlapping_tensors() {
    match err(raw_file(3, &[], &[("w", &[16], 0, 0)], 32)) {
        GgufError::TensorOutOfBounds {
            tensor,
            end,
            file_size,
        } => {
            assert_eq!(tensor, "w");
            assert_eq!(end, file_size + 32);
        }
        e => panic!("{e}"),
    }
    assert!(matches!(
        err(raw_file(3, &[], &[("w", &[4], 0, u64::MAX - 31)], 32)),
        GgufError::TensorOutOfBounds { .. }
    ));
    let tensors = [("a", &[16u64][..], 0, 0), ("b", &[8u64][..], 0, 32)];
    match err(raw_file(3, &[], &tensors, 128)) {
        GgufError::TensorsOverlap { a, b } => assert_eq!((a.as_str(), b.as_str()), ("a", "b")),
        e => panic!("{e}"),
    }
    // Same layout without overlap is fine, in any order of infos.
    let tensors = [("b", &[8u64][..], 0, 64), ("a", &[16u64][..], 0, 0)];
    GgufFile::from_bytes(raw_file(3, &[], &tensors, 128)).unwrap();
}

#[test]
fn gguf_value_display_is_short() {
    assert_eq!(MetaValue::U32(5).to_string(), "5");
    assert_eq!(MetaValue::String("hi".into()).to_string(), "\"hi\"");
    let long = MetaValue::String("x".repeat(100)).to_string();
    assert!(long.len() < 70 && long.ends_with("..."), "{long}");
    let arr = MetaValue::Array(MetaArray::I32(vec![1, 2, 3, 4, 5, 6]));
    assert_eq!(arr.to_string(), "[i32; 6] [1, 2, 3, 4, ...]");
    assert_eq!(arr.type_name(), "array");
    assert_eq!(
        MetaValue::Array(MetaArray::String(vec![])).to_string(),
        "[string; 0]"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn gguf_random_mutations_never_panic(
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
        do_cut in any::<bool>(),
    ) {
        let mut bytes = small_file();
        for (at, byte) in edits {
            let i = at.index(bytes.len());
            bytes[i] = byte;
        }
        if do_cut {
            bytes.truncate(cut.index(bytes.len() + 1));
        }
        if let Ok(f) = GgufFile::from_bytes(bytes) {
            for t in f.tensors() {
                prop_assert_eq!(f.tensor_data(t).len() as u64, t.size);
            }
        }
    }
}

/// A tensor of a type memoria does not compute with: the file opens (metadata and the other
/// tensors usable), the tensor is listed apart, and `check_tensor_types` names it and its type.
#[test]
fn gguf_unsupported_tensor_type_opens_and_is_listed_apart() {
    let tensors = [
        ("a", &[8u64][..], 0, 0),
        ("iq", &[256u64, 2][..], 16, 32),
        ("b", &[4u64][..], 0, 96),
    ];
    let kv = [("general.name", MetaValue::String("lenient".into()))];
    let f = GgufFile::from_bytes(raw_file(3, &kv, &tensors, 128)).unwrap();
    assert_eq!(f.get_str("general.name"), Some("lenient"));
    let names: Vec<&str> = f.tensors().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["a", "b"]);
    assert!(f.tensor("iq").is_none());
    let u = f.unsupported_tensors();
    assert_eq!(u.len(), 1);
    assert_eq!(
        (u[0].name.as_str(), u[0].type_id, u[0].dims.as_slice()),
        ("iq", 16, &[256u64, 2][..])
    );
    assert_eq!(u[0].offset, f.data_offset() + 32);
    assert_eq!(u[0].n_elements(), 512);
    assert_eq!(u[0].type_name(), GgmlType::name_of_id(16));
    let e = f.check_tensor_types().unwrap_err();
    assert!(matches!(
        e,
        GgufError::UnknownTensorType { type_id: 16, .. }
    ));
    assert_eq!(
        e.to_string(),
        format!(
            "tensor 'iq': type 16 ({}) is not supported",
            GgmlType::name_of_id(16)
        )
    );
    // No unsupported tensor: the check passes.
    let f = GgufFile::from_bytes(raw_file(3, &[], &tensors[..1], 64)).unwrap();
    f.check_tensor_types().unwrap();
}

/// Every check but the data size still applies to a tensor of an unsupported type.
#[test]
fn gguf_unsupported_tensor_type_keeps_other_checks() {
    let one = |dims: &'static [u64], off: u64, data: usize| {
        err(raw_file(3, &[], &[("iq", dims, 16, off)], data))
    };
    assert!(matches!(one(&[], 0, 64), GgufError::BadDims { .. }));
    assert!(matches!(one(&[4, 0], 0, 64), GgufError::BadDims { .. }));
    assert!(matches!(
        one(&[1 << 32, 1 << 32, 1 << 32], 0, 64),
        GgufError::BadDims { .. }
    ));
    assert!(matches!(
        one(&[4], 16, 64),
        GgufError::MisalignedTensor { .. }
    ));
    // Its first byte must lie inside the file.
    assert!(matches!(
        one(&[4], 64, 64),
        GgufError::TensorOutOfBounds { .. }
    ));
    assert!(matches!(
        one(&[4], u64::MAX - 31, 64),
        GgufError::TensorOutOfBounds { .. }
    ));
    // It may not start inside another tensor's data, nor share a name.
    let overlap = [("a", &[16u64][..], 0, 0), ("iq", &[4u64][..], 16, 32)];
    assert!(matches!(
        err(raw_file(3, &[], &overlap, 128)),
        GgufError::TensorsOverlap { .. }
    ));
    let twice = [("iq", &[4u64][..], 16, 0), ("iq", &[4u64][..], 0, 32)];
    assert!(matches!(
        err(raw_file(3, &[], &twice, 128)),
        GgufError::DuplicateTensor { .. }
    ));
}

/// The writer writes tensors of raw type ids; the reader lists them apart.
#[test]
fn gguf_writer_raw_tensor_round_trip() {
    let mut w = GgufWriter::new();
    w.add_tensor("a", &[4], GgmlType::F32, vec![0; 16]).unwrap();
    w.add_raw_tensor("iq", &[256, 3], 16, vec![7; 200]).unwrap();
    // A known id goes through the size check.
    assert!(matches!(
        w.add_raw_tensor("b", &[4], 0, vec![0; 3]),
        Err(GgufError::WrongDataLength { .. })
    ));
    assert!(w.add_raw_tensor("c", &[4], 16, Vec::new()).is_err());
    assert!(w.add_raw_tensor("c", &[0], 16, vec![1]).is_err());
    assert!(matches!(
        w.add_raw_tensor("iq", &[4], 16, vec![1]),
        Err(GgufError::DuplicateTensor { .. })
    ));
    assert_eq!(w.tensor_count(), 2);
    let f = GgufFile::from_bytes(w.to_bytes()).unwrap();
    assert_eq!(f.tensors().len(), 1);
    let u = &f.unsupported_tensors()[0];
    assert_eq!((u.name.as_str(), u.type_id), ("iq", 16));
    assert_eq!(
        &f.bytes()[u.offset as usize..u.offset as usize + 200],
        &[7; 200][..]
    );
}
