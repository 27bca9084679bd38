//! Quantization formats: block layouts (bit-exact with llama.cpp) and row-level
//! quantize/dequantize for every supported [`GgmlType`], following ggml's `*_ref` quantizers.
//!
//! Invariant: public entry points validate lengths and return [`KernelError`] instead of
//! panicking; a row of `n` elements of type `t` is exactly `t.row_bytes(n)` bytes.

// Index loops mirror ggml's reference C, which keeps the formulas easy to compare.
#![allow(clippy::needless_range_loop)]

mod blocks;
mod float;
mod iq4;
mod mxfp4;
mod q2k;
mod q3k;
mod q4_0;
mod q4_1;
mod q4k;
mod q5_0;
mod q5_1;
mod q5k;
mod q6k;
mod q8_0;
mod q8_1;
#[cfg(target_arch = "x86_64")]
mod q8_avx2;
#[cfg(target_arch = "x86_64")]
mod q8_simd;
#[cfg(target_arch = "x86_64")]
mod q8_vec;
mod q8k;
#[cfg(target_arch = "x86_64")]
mod q8k_simd;
mod round;
mod search;

pub use blocks::{
    BlockIq4Nl, BlockIq4Xs, BlockMxfp4, BlockQ2K, BlockQ3K, BlockQ4_0, BlockQ4_1, BlockQ4K,
    BlockQ5_0, BlockQ5_1, BlockQ5K, BlockQ6K, BlockQ8_0, BlockQ8_1, BlockQ8K, scale_min_k4,
};
pub use float::{f16_to_f32_row, f32_to_f16_row};
pub use iq4::KVALUES_IQ4NL;
pub(crate) use iq4::xs_scale;
pub use mxfp4::{KVALUES_MXFP4, e8m0_to_f32_half};
pub(crate) use q2k::unpack as unpack_q2k;
pub(crate) use q3k::{scales as q3k_scales, scales_of as q3k_scales_of, unpack as unpack_q3k};
pub(crate) use q5_0::unpack5;
pub(crate) use q5k::unpack as unpack_q5k;
pub(crate) use q6k::unpack as unpack_q6k;
pub use round::{bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16, nearest_int};

use crate::KernelError;
use crate::types::GgmlType;

/// Bytes for `n` elements of `ty`, or the error explaining why `bytes` does not fit.
pub(crate) fn check_row(ty: GgmlType, n: usize, bytes: usize) -> Result<(), KernelError> {
    let block = ty.block_size();
    let expected = ty
        .row_bytes(n)
        .ok_or(KernelError::RowNotBlockAligned { ty, cols: n, block })?;
    if expected != bytes {
        return Err(KernelError::WrongDataLength {
            ty,
            rows: 1,
            cols: n,
            expected,
            got: bytes,
        });
    }
    Ok(())
}

/// Decodes one row: `src` holds `dst.len()` elements of `ty` (`ty.row_bytes(dst.len())` bytes).
pub fn dequantize_row(ty: GgmlType, src: &[u8], dst: &mut [f32]) -> Result<(), KernelError> {
    check_row(ty, dst.len(), src.len())?;
    match ty {
        GgmlType::F32 => float::f32_bytes_to_f32(src, dst),
        GgmlType::F16 => float::f16_bytes_to_f32(src, dst),
        GgmlType::BF16 => float::bf16_bytes_to_f32(src, dst),
        GgmlType::Q4_0 => q4_0::dequantize(bytemuck::cast_slice(src), dst),
        GgmlType::Q4_1 => q4_1::dequantize(bytemuck::cast_slice(src), dst),
        GgmlType::Q5_0 => q5_0::dequantize(bytemuck::cast_slice(src), dst),
        GgmlType::Q5_1 => q5_1::dequantize(bytemuck::cast_slice(src), dst),
        GgmlType::Q8_0 => q8_0::dequantize(bytemuck::cast_slice(src), dst),
        GgmlType::Q8_1 => q8_1::dequantize(bytemuck::cast_slice(src), dst),
        GgmlType::Q2K => q2k::dequantize(bytemuck::cast_slice(src), dst),
        GgmlType::Q3K => q3k::dequantize(bytemuck::cast_slice(src), dst),
        GgmlType::Q4K => q4k::dequantize(bytemuck::cast_slice(src), dst),
        GgmlType::Q5K => q5k::dequantize(bytemuck::cast_slice(src), dst),
        GgmlType::Q6K => q6k::dequantize(bytemuck::cast_slice(src), dst),
        GgmlType::Q8K => q8k::dequantize(bytemuck::cast_slice(src), dst),
        GgmlType::IQ4NL => iq4::dequantize_nl(bytemuck::cast_slice(src), dst),
        GgmlType::IQ4XS => iq4::dequantize_xs(bytemuck::cast_slice(src), dst),
        GgmlType::Mxfp4 => mxfp4::dequantize(bytemuck::cast_slice(src), dst),
    }
    Ok(())
}

/// Encodes one row: `dst` receives `src.len()` elements of `ty` (`ty.row_bytes(src.len())`
/// bytes), quantized exactly like llama.cpp's reference quantizers.
pub fn quantize_row(ty: GgmlType, src: &[f32], dst: &mut [u8]) -> Result<(), KernelError> {
    check_row(ty, src.len(), dst.len())?;
    match ty {
        GgmlType::F32 => float::f32_to_f32_bytes(src, dst),
        GgmlType::F16 => float::f32_to_f16_bytes(src, dst),
        GgmlType::BF16 => float::f32_to_bf16_bytes(src, dst),
        GgmlType::Q4_0 => q4_0::quantize(src, bytemuck::cast_slice_mut(dst)),
        GgmlType::Q4_1 => q4_1::quantize(src, bytemuck::cast_slice_mut(dst)),
        GgmlType::Q5_0 => q5_0::quantize(src, bytemuck::cast_slice_mut(dst)),
        GgmlType::Q5_1 => q5_1::quantize(src, bytemuck::cast_slice_mut(dst)),
        GgmlType::Q8_0 => q8_0::quantize(src, bytemuck::cast_slice_mut(dst)),
        GgmlType::Q8_1 => q8_1::quantize(src, bytemuck::cast_slice_mut(dst)),
        GgmlType::Q2K => q2k::quantize(src, bytemuck::cast_slice_mut(dst)),
        GgmlType::Q3K => q3k::quantize(src, bytemuck::cast_slice_mut(dst)),
        GgmlType::Q4K => q4k::quantize(src, bytemuck::cast_slice_mut(dst)),
        GgmlType::Q5K => q5k::quantize(src, bytemuck::cast_slice_mut(dst)),
        GgmlType::Q6K => q6k::quantize(src, bytemuck::cast_slice_mut(dst)),
        GgmlType::Q8K => q8k::quantize(src, bytemuck::cast_slice_mut(dst)),
        GgmlType::IQ4NL => iq4::quantize_nl(src, bytemuck::cast_slice_mut(dst)),
        GgmlType::IQ4XS => iq4::quantize_xs(src, bytemuck::cast_slice_mut(dst)),
        GgmlType::Mxfp4 => mxfp4::quantize(src, bytemuck::cast_slice_mut(dst)),
    }
    Ok(())
}

#[cfg(test)]
mod mxfp4_tests;
#[cfg(test)]
mod tests;
