//! Batch-invariant matrix × batch-of-vectors product: `out[t][r] = dot(w.row(r), x[t])`, with
//! activations converted once to the weight's `vec_dot_type`, parallel over row tiles
//! ([`crate::threads`] pool).
//!
//! Invariant (batch invariance): `out[t][r]` is bit-identical whatever `n`, the position of `t`
//! in the batch, the tiling and the thread count. Every (row, token) pair is computed by the
//! same per-pair kernel (`dot::avx2::tile` accumulates each pair independently; the scalar path
//! calls the reference per pair); tiles only decide which pairs share weight loads. Matrices
//! with an [`Interleaved`] copy (on AVX-512 VNNI CPUs: Q4_0, Q8_0, Q5_0, Q4_1, Q5_1, IQ4_NL,
//! MXFP4, the K-quants Q2_K..Q6_K and IQ4_XS) are read through it, for every batch size alike,
//! in the order of [`crate::dot::sequential`].

// Index loops mirror ggml's reference C, which keeps the formulas easy to compare.
#![allow(clippy::needless_range_loop)]

mod activations;
mod driver;
#[cfg(target_arch = "x86_64")]
mod driver_amx;
#[cfg(target_arch = "x86_64")]
mod driver_interleaved;
pub(crate) mod interleave;
mod weights;

use std::cell::RefCell;

pub use activations::QuantizedActivations;
pub use interleave::Interleaved;
pub use weights::{WeightMatrix, get_rows};

use crate::simd::{self, SimdLevel};

thread_local! {
    static SCRATCH: RefCell<QuantizedActivations> = RefCell::new(QuantizedActivations::new());
}

/// `out = x · wᵀ`: `x` is `[n, w.cols]`, `out` is `[n, w.rows]`. Panics on shape mismatch.
pub fn matmul(w: &WeightMatrix, x: &[f32], n: usize, out: &mut [f32]) {
    matmul_with(simd::level(), w, x, n, out)
}

/// [`matmul`] on an explicit SIMD path (tests and benches compare paths with it).
pub fn matmul_with(level: SimdLevel, w: &WeightMatrix, x: &[f32], n: usize, out: &mut [f32]) {
    // Taken out of the cell while in use: a nested matmul on this thread (a rayon task stealing
    // work while we wait) then simply gets a fresh buffer instead of a borrow panic.
    let mut xq = SCRATCH.with(RefCell::take);
    xq.quantize(w.ty.vec_dot_type(), x, n, w.cols);
    matmul_prequantized_with(level, w, &xq, out);
    SCRATCH.with(|s| *s.borrow_mut() = xq);
}

/// `out = xq · wᵀ` for activations already converted with
/// `xq.quantize(w.ty.vec_dot_type(), x, n, w.cols)`; `out` is `[xq.n(), w.rows]`.
/// Panics if `xq` has the wrong type or width, or `out` the wrong length.
pub fn matmul_prequantized(w: &WeightMatrix, xq: &QuantizedActivations, out: &mut [f32]) {
    matmul_prequantized_with(simd::level(), w, xq, out)
}

/// [`matmul_prequantized`] on an explicit SIMD path.
pub fn matmul_prequantized_with(
    level: SimdLevel,
    w: &WeightMatrix,
    xq: &QuantizedActivations,
    out: &mut [f32],
) {
    assert_eq!(
        xq.ty(),
        w.ty.vec_dot_type(),
        "matmul: activations must be {}",
        w.ty.vec_dot_type()
    );
    assert_eq!(xq.cols(), w.cols, "matmul: activation width != weight cols");
    assert_eq!(out.len(), xq.n() * w.rows, "matmul: out must be [n, rows]");
    driver::run(level, w, xq, out);
}

#[cfg(all(test, target_arch = "x86_64"))]
mod amx_tests;
#[cfg(test)]
mod interleave_tests;
#[cfg(test)]
mod tests;
