//! GGUF errors. Every variant says what is wrong and where: a byte offset, a metadata key or a
//! tensor name, so a bad file can be diagnosed from the message alone.

use std::path::PathBuf;

/// Everything that can go wrong reading or writing a GGUF file.
#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    /// The OS error is part of the message (not a `source`, so an error chain prints it once).
    #[error("{path}: {error}")]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("not a GGUF file: magic {found:02x?} at offset 0 (expected \"GGUF\")")]
    BadMagic { found: Vec<u8> },
    #[error(
        "GGUF version {version} is not supported (memoria reads v2 and v3; v1 files predate \
         2023-08 and must be re-converted with a current llama.cpp)"
    )]
    UnsupportedVersion { version: u32 },
    #[error(
        "big-endian GGUF (version field reads {version} when byte-swapped) is not supported; \
         convert the file to little-endian"
    )]
    BigEndian { version: u32 },
    #[error(
        "truncated file: {what} needs {needed} bytes at offset {offset}, only {available} left"
    )]
    Truncated {
        what: String,
        offset: u64,
        needed: u64,
        available: u64,
    },
    #[error("{what}: {count} exceeds the limit of {limit} (at offset {offset})")]
    TooLarge {
        what: String,
        count: u64,
        limit: u64,
        offset: u64,
    },
    #[error("{what}: invalid UTF-8 at offset {offset}")]
    BadUtf8 { what: String, offset: u64 },
    #[error("{what}: unknown metadata value type {type_id} at offset {offset}")]
    UnknownValueType {
        what: String,
        type_id: u32,
        offset: u64,
    },
    #[error("{what}: arrays nested deeper than {limit} levels at offset {offset}")]
    NestingTooDeep {
        what: String,
        limit: u32,
        offset: u64,
    },
    #[error("metadata key '{key}' appears twice (second at offset {offset})")]
    DuplicateKey { key: String, offset: u64 },
    #[error("metadata key '{key}' has type {found}, expected {expected}")]
    WrongValueType {
        key: String,
        expected: &'static str,
        found: &'static str,
    },
    #[error("general.alignment = {alignment}: must be a nonzero power of two")]
    BadAlignment { alignment: u64 },
    #[error(
        "tensor '{tensor}': data offset {offset} is not a multiple of the alignment {alignment}"
    )]
    MisalignedTensor {
        tensor: String,
        offset: u64,
        alignment: u64,
    },
    #[error("tensor '{tensor}': type {type_id} ({type_name}) is not supported")]
    UnknownTensorType {
        tensor: String,
        type_id: u32,
        type_name: &'static str,
    },
    #[error("tensor '{tensor}': bad dimensions {dims:?}: {reason}")]
    BadDims {
        tensor: String,
        dims: Vec<u64>,
        reason: String,
    },
    #[error(
        "tensor '{tensor}': data ends at byte {end}, past the end of the file ({file_size} bytes)"
    )]
    TensorOutOfBounds {
        tensor: String,
        end: u64,
        file_size: u64,
    },
    #[error("tensors '{a}' and '{b}' overlap in the data section")]
    TensorsOverlap { a: String, b: String },
    #[error("tensor '{tensor}' appears twice (second at offset {offset})")]
    DuplicateTensor { tensor: String, offset: u64 },
    #[error("tensor '{tensor}': expected {expected} bytes of data, got {got}")]
    WrongDataLength {
        tensor: String,
        expected: u64,
        got: u64,
    },
}
