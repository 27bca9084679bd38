//! memoria-kernels: the CPU compute layer. GGML block formats (bit-exact with llama.cpp),
//! quantize/dequantize, dot products with a scalar reference beside every SIMD path, a
//! batch-invariant matrix × batch-of-vectors product, and the small ops of a llama layer.
//!
//! Invariant: every kernel gives bit-identical results for a given row whatever the batch size,
//! chunking or thread count, so cached and recomputed K/V never differ.

#[cfg(target_arch = "x86_64")]
pub mod amx;
pub mod dot;
pub mod matmul;
pub mod ops;
pub mod pages;
pub mod quant;
pub mod simd;
pub mod threads;
pub mod types;

#[cfg(test)]
mod testutil;

pub use dot::vec_dot;
pub use matmul::{QuantizedActivations, WeightMatrix, get_rows, matmul, matmul_prequantized};
pub use quant::{dequantize_row, quantize_row};
pub use types::GgmlType;

/// Errors from kernel entry points that take data from outside (files, callers).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum KernelError {
    #[error("{ty}: row length {cols} is not a multiple of the block size {block}")]
    RowNotBlockAligned {
        ty: GgmlType,
        cols: usize,
        block: usize,
    },
    #[error("{ty}: expected {expected} bytes for {rows}x{cols}, got {got}")]
    WrongDataLength {
        ty: GgmlType,
        rows: usize,
        cols: usize,
        expected: usize,
        got: usize,
    },
    #[error("{ty} is not supported here: {what}")]
    Unsupported { ty: GgmlType, what: &'static str },
}
