//! Dot products of a weight row with an activation row already converted to the weight type's
//! `vec_dot_type`, with a scalar reference ([`reference`]) beside every AVX2 kernel.
//!
//! Invariant: the SIMD kernels differ from the reference only by float reassociation (integer
//! block sums are exact), and [`vec_dot`] uses the very same per-(row, token) kernel as
//! `matmul` on GGML rows, so a dot product computed here equals the matching matmul output bit
//! for bit (interleaved matrices follow [`sequential`] instead).
//! Activation rows must come from this crate's quantizers (int8 values in [-127, 127]).

// Index loops mirror ggml's reference C, which keeps the formulas easy to compare.
#![allow(clippy::needless_range_loop)]

#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2;
pub mod reference;
mod scalar_bytes;
pub mod sequential;

use half::f16;

use crate::simd::{self, SimdLevel};
use crate::types::GgmlType;

pub(crate) use scalar_bytes::vec_dot_scalar;

/// Dot product of `n` elements: `a` is a row of weight type `ty`, `b` a row of
/// `ty.vec_dot_type()`. Panics if `n` is not block-aligned or a length does not match
/// (`ty.row_bytes(n)` / `ty.vec_dot_type().row_bytes(n)`).
pub fn vec_dot(ty: GgmlType, a: &[u8], b: &[u8], n: usize) -> f32 {
    check_dot_lengths(ty, a.len(), b.len(), n);
    vec_dot_unchecked_lengths(ty, simd::level(), a, b, n)
}

/// [`vec_dot`] on an explicit path (tests and benches compare paths with it).
pub fn vec_dot_with(level: SimdLevel, ty: GgmlType, a: &[u8], b: &[u8], n: usize) -> f32 {
    check_dot_lengths(ty, a.len(), b.len(), n);
    vec_dot_unchecked_lengths(ty, level, a, b, n)
}

/// `a · b` for f32 rows of equal length (panics otherwise).
pub fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "dot_f32: length mismatch");
    let n = a.len();
    vec_dot_unchecked_lengths(
        GgmlType::F32,
        simd::level(),
        bytemuck::cast_slice(a),
        bytemuck::cast_slice(b),
        n,
    )
}

/// `a · b` for f16 rows of equal length, accumulated in f32 (panics if lengths differ).
pub fn dot_f16(a: &[f16], b: &[f16]) -> f32 {
    assert_eq!(a.len(), b.len(), "dot_f16: length mismatch");
    let n = a.len();
    vec_dot_unchecked_lengths(
        GgmlType::F16,
        simd::level(),
        bytemuck::cast_slice(a),
        bytemuck::cast_slice(b),
        n,
    )
}

fn check_dot_lengths(ty: GgmlType, a: usize, b: usize, n: usize) {
    let ea = ty.row_bytes(n);
    let eb = ty.vec_dot_type().row_bytes(n);
    assert!(
        ea.is_some() && eb.is_some(),
        "vec_dot: {n} is not a multiple of {ty}'s block size"
    );
    assert_eq!(
        Some(a),
        ea,
        "vec_dot: weight row of {ty} has the wrong length"
    );
    assert_eq!(Some(b), eb, "vec_dot: activation row has the wrong length");
}

/// Dispatch once lengths are known to be right.
fn vec_dot_unchecked_lengths(ty: GgmlType, level: SimdLevel, a: &[u8], b: &[u8], n: usize) -> f32 {
    match level {
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx2 if simd::detected() == SimdLevel::Avx2 => {
            let mut out = [[0.0f32; 1]; 1];
            // SAFETY: AVX2/FMA/F16C are present (checked just above); `a` and `b` hold exactly
            // the bytes of one row of `n` elements of `ty` / its vec_dot_type (checked by callers).
            unsafe { avx2::tile::<1, 1>(ty, [a.as_ptr()], [b.as_ptr()], n, &mut out) };
            out[0][0]
        }
        _ => vec_dot_scalar(ty, a, b, n),
    }
}

#[cfg(test)]
mod mxfp4_tests;
#[cfg(test)]
mod tests;
