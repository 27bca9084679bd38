//! Fuzz harness of the GGUF reader (`cargo test -p memoria-model --test fuzz_gguf`): a small
//! valid file from the project's own `GgufWriter`, then its header, metadata (key and string
//! lengths, value and item types, array counts, scalar values) and tensor infos (name lengths,
//! n_dims, dims, types, offsets) overwritten with boundary and random numbers; byte edits of
//! the whole file; arbitrary bytes behind a valid magic; and generated metadata that must round
//! trip. Every input must open or fail with a `GgufError`, never panic, and never make an
//! allocation larger than a constant times the file size. `MEMORIA_FUZZ_CASES` raises the case
//! counts for long runs.

use memoria_fuzz::{TrackingAlloc, largest_allocation};
use memoria_kernels::GgmlType;
use memoria_model::gguf::{GgufError, GgufFile, GgufWriter, MetaArray, MetaValue, ValueType};
use proptest::prelude::*;
use proptest::sample::Index;

#[global_allocator]
static ALLOC: TrackingAlloc = TrackingAlloc;

/// A numeric field of the valid file: its byte offset and width (4 or 8; 1 and 2 for scalars).
#[derive(Clone, Copy, Debug)]
struct Field {
    at: usize,
    width: usize,
}

/// The valid file: every metadata type, nested arrays, an explicit alignment, three tensors.
fn valid_writer() -> GgufWriter {
    let mut w = GgufWriter::new();
    w.set("general.architecture", MetaValue::String("llama".into()))
        .set("general.alignment", MetaValue::U32(32))
        .set("a.u8", MetaValue::U8(1))
        .set("a.i16", MetaValue::I16(-2))
        .set("a.u64", MetaValue::U64(1 << 40))
        .set("a.f32", MetaValue::F32(0.5))
        .set("a.bool", MetaValue::Bool(true))
        .set(
            "a.tokens",
            MetaValue::Array(MetaArray::String(vec!["<s>".into(), "▁x".into()])),
        )
        .set("a.ids", MetaValue::Array(MetaArray::I32(vec![1, -1, 3])))
        .set(
            "a.nested",
            MetaValue::Array(MetaArray::Array(vec![
                MetaArray::U16(vec![4, 5]),
                MetaArray::String(vec!["y".into()]),
            ])),
        );
    let f32s: Vec<u8> = (0..16).flat_map(|i| (i as f32).to_le_bytes()).collect();
    w.add_tensor("t.f32", &[8, 2], GgmlType::F32, f32s).unwrap();
    w.add_tensor("t.q8", &[32, 1], GgmlType::Q8_0, vec![7; 34])
        .unwrap();
    w.add_tensor("t.f16", &[4, 2, 2], GgmlType::F16, vec![0; 32])
        .unwrap();
    w
}

/// Walks a valid file's header, recording every numeric field the reader interprets.
struct Walker<'a> {
    b: &'a [u8],
    at: usize,
    fields: Vec<Field>,
}

impl Walker<'_> {
    fn num(&mut self, width: usize) -> u64 {
        self.fields.push(Field { at: self.at, width });
        let mut x = [0u8; 8];
        x[..width].copy_from_slice(&self.b[self.at..self.at + width]);
        self.at += width;
        u64::from_le_bytes(x)
    }

    fn string(&mut self) {
        let n = self.num(8) as usize;
        self.at += n;
    }

    fn value(&mut self, ty: ValueType) {
        match ty {
            ValueType::String => self.string(),
            ValueType::Array => {
                let item = ValueType::from_id(self.num(4) as u32).unwrap();
                let count = self.num(8);
                for _ in 0..count {
                    self.value(item);
                }
            }
            fixed => {
                let width = fixed.min_size() as usize;
                self.num(width);
            }
        }
    }

    fn walk(b: &[u8]) -> Vec<Field> {
        let mut w = Walker {
            b,
            at: 4,
            fields: Vec::new(),
        };
        w.num(4);
        let tensors = w.num(8);
        let kvs = w.num(8);
        for _ in 0..kvs {
            w.string();
            let ty = ValueType::from_id(w.num(4) as u32).unwrap();
            w.value(ty);
        }
        for _ in 0..tensors {
            w.string();
            let n_dims = w.num(4);
            for _ in 0..n_dims {
                w.num(8);
            }
            w.num(4);
            w.num(8);
        }
        w.fields
    }
}

/// The valid file and its numeric fields (built once).
fn valid() -> &'static (Vec<u8>, Vec<Field>) {
    static VALID: std::sync::OnceLock<(Vec<u8>, Vec<Field>)> = std::sync::OnceLock::new();
    VALID.get_or_init(|| {
        let bytes = valid_writer().to_bytes();
        let fields = Walker::walk(&bytes);
        (bytes, fields)
    })
}

/// A replacement for a field: boundary numbers, numbers near the original and the file size,
/// or anything.
#[derive(Clone, Debug)]
enum Number {
    Fixed(u64),
    Near(i8),
    NearLen(i8),
    Any(u64),
}

fn number() -> impl Strategy<Value = Number> {
    let edges = [
        0,
        1,
        2,
        3,
        7,
        8,
        12,
        13,
        31,
        32,
        33,
        255,
        256,
        0x7fff_ffff,
        0x8000_0000,
        0xffff_ffff,
        1 << 32,
        1 << 62,
        u64::MAX - 31,
        u64::MAX,
    ];
    prop_oneof![
        3 => prop::sample::select(edges.to_vec()).prop_map(Number::Fixed),
        2 => any::<i8>().prop_map(Number::Near),
        1 => any::<i8>().prop_map(Number::NearLen),
        2 => any::<u64>().prop_map(Number::Any),
    ]
}

fn set_field(bytes: &mut [u8], f: Field, n: &Number) {
    let mut cur = [0u8; 8];
    cur[..f.width].copy_from_slice(&bytes[f.at..f.at + f.width]);
    let v = match *n {
        Number::Fixed(v) | Number::Any(v) => v,
        Number::Near(d) => u64::from_le_bytes(cur).wrapping_add_signed(d.into()),
        Number::NearLen(d) => (bytes.len() as u64).wrapping_add_signed(d.into()),
    };
    bytes[f.at..f.at + f.width].copy_from_slice(&v.to_le_bytes()[..f.width]);
}

/// Opens `bytes` under the allocation probe and checks the reader's contract.
fn open_checked(bytes: Vec<u8>) -> Result<(), TestCaseError> {
    let len = bytes.len();
    let (result, largest) = largest_allocation(|| GgufFile::from_bytes(bytes));
    let limit = 16 * len + 4096;
    prop_assert!(
        largest <= limit,
        "a {len}-byte file made a {largest}-byte allocation (limit {limit}); result: {:?}",
        result.as_ref().err()
    );
    match result {
        Ok(f) => {
            for t in f.tensors() {
                prop_assert_eq!(f.tensor_data(t).len() as u64, t.size);
                prop_assert!(t.offset >= f.data_offset());
            }
            for (k, _) in f.metadata() {
                prop_assert!(f.get(k).is_some());
            }
            let _ = f.check_tensor_types();
        }
        Err(e) => {
            // A clean error renders without panicking.
            prop_assert!(!e.to_string().is_empty());
        }
    }
    Ok(())
}

/// Any metadata value the writer can write (nesting within the reader's depth limit).
fn meta_array(depth: u32) -> BoxedStrategy<MetaArray> {
    let leaf = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..8).prop_map(MetaArray::U8),
        prop::collection::vec(any::<i16>(), 0..8).prop_map(MetaArray::I16),
        prop::collection::vec(any::<u32>(), 0..8).prop_map(MetaArray::U32),
        prop::collection::vec(any::<i64>(), 0..8).prop_map(MetaArray::I64),
        prop::collection::vec(any::<bool>(), 0..8).prop_map(MetaArray::Bool),
        prop::collection::vec(".{0,6}", 0..4).prop_map(MetaArray::String),
    ];
    if depth >= 3 {
        return leaf.boxed();
    }
    prop_oneof![
        4 => leaf,
        1 => prop::collection::vec(meta_array(depth + 1), 0..3).prop_map(MetaArray::Array),
    ]
    .boxed()
}

fn meta_value() -> impl Strategy<Value = MetaValue> {
    prop_oneof![
        any::<u8>().prop_map(MetaValue::U8),
        any::<i8>().prop_map(MetaValue::I8),
        any::<u16>().prop_map(MetaValue::U16),
        any::<i32>().prop_map(MetaValue::I32),
        any::<u64>().prop_map(MetaValue::U64),
        any::<f64>()
            .prop_filter("NaN never equals itself", |v| !v.is_nan())
            .prop_map(MetaValue::F64),
        any::<bool>().prop_map(MetaValue::Bool),
        ".{0,12}".prop_map(MetaValue::String),
        meta_array(1).prop_map(MetaValue::Array),
    ]
}

proptest! {
    #![proptest_config(memoria_fuzz::config(3000))]

    /// Header counts, lengths, type ids, dims and offsets replaced by boundary or random numbers.
    #[test]
    fn gguf_fuzz_field_overwrites_open_or_fail_cleanly(
        edits in prop::collection::vec((any::<Index>(), number()), 1..4),
        cut in prop::option::weighted(0.1, any::<Index>()),
    ) {
        let (valid, fields) = valid();
        let mut bytes = valid.clone();
        for (i, n) in &edits {
            set_field(&mut bytes, fields[i.index(fields.len())], n);
        }
        if let Some(c) = cut {
            bytes.truncate(c.index(bytes.len() + 1));
        }
        open_checked(bytes)?;
    }

    /// Bit flips, overwrites, cuts, insertions and removals anywhere in the valid file.
    #[test]
    fn gguf_fuzz_byte_edits_open_or_fail_cleanly(edits in memoria_fuzz::edits(6)) {
        let mut bytes = valid().0.clone();
        memoria_fuzz::apply(&mut bytes, &edits);
        open_checked(bytes)?;
    }

    /// Arbitrary bytes, most behind a valid magic and version so the parser reads on.
    #[test]
    fn gguf_fuzz_arbitrary_bytes_open_or_fail_cleanly(
        header in prop::option::weighted(0.8, prop::sample::select(vec![2u32, 3])),
        tail in prop::collection::vec(any::<u8>(), 0..512),
    ) {
        let mut bytes = Vec::new();
        if let Some(v) = header {
            bytes.extend_from_slice(b"GGUF");
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        bytes.extend(tail);
        open_checked(bytes)?;
    }

    /// Generated metadata written by the writer reads back exactly.
    #[test]
    fn gguf_fuzz_generated_metadata_round_trips(
        kvs in prop::collection::btree_map("[a-z.]{1,12}", meta_value(), 0..8),
    ) {
        let mut w = GgufWriter::new();
        for (k, v) in &kvs {
            w.set(k, v.clone());
        }
        let bytes = w.to_bytes();
        let f = GgufFile::from_bytes(bytes.clone());
        if kvs.contains_key("general.alignment") {
            // A generated alignment may be refused; it must be refused cleanly.
            open_checked(bytes)?;
        } else {
            let f = f.map_err(|e: GgufError| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(f.metadata(), w.metadata());
        }
    }
}

/// The walker saw the whole header: it found every field the writer wrote.
#[test]
fn gguf_fuzz_walker_covers_the_valid_header() {
    let (bytes, fields) = valid();
    let f = GgufFile::from_bytes(bytes.clone()).unwrap();
    assert_eq!(f.tensors().len(), 3);
    let last = fields.last().unwrap();
    // The last field is the last tensor's offset; only padding lies before the data section.
    assert!((last.at + last.width) as u64 <= f.data_offset());
    assert!(f.data_offset() - ((last.at + last.width) as u64) < 32);
    assert!(fields.len() > 40, "{} fields", fields.len());
}
