//! GGUF v2/v3 files: a hardened, memory-mapped reader (`GgufFile`) and a writer (`GgufWriter`).
//!
//! Invariant: GGUF is a trust boundary. Any byte sequence given to the reader yields either a
//! fully validated `GgufFile` or a `GgufError` naming the offset, key or tensor at fault; never
//! a panic, and never an allocation larger than a small multiple of the file size.

mod cursor;
mod error;
mod file;
mod reader;
mod stream;
mod tensor;
mod value;
mod writer;

#[cfg(test)]
mod tests;

pub use error::GgufError;
pub use file::GgufFile;
pub use reader::{DEFAULT_ALIGNMENT, MAX_ARRAY_DEPTH};
pub use tensor::{MAX_DIMS, TensorInfo, UnsupportedTensor};
pub use value::{MetaArray, MetaValue, ValueType};
pub use writer::{GgufWriter, RowFill, WRITE_VERSION};
