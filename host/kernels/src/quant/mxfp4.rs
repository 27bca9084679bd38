//! MXFP4 quantize/dequantize (`quantize_row_mxfp4_ref`, `dequantize_row_mxfp4`) and the E8M0
//! scale decoding they share with the dot products (`GGML_E8M0_TO_FP32_HALF`).
//!
//! A block is 32 E2M1 codes (4 bits: sign, 2-bit exponent, 1-bit mantissa) with one E8M0
//! exponent `e`. ggml stores the E2M1 values doubled as small integers ([`KVALUES_MXFP4`]) and
//! halves the scale instead, so element `j` is `KVALUES_MXFP4[code_j] * 2^(e - 128)`.
//! Invariant: the quantizer's bytes equal llama.cpp's and gguf-py's for every finite input; the
//! exponent is `floor(log2f(amax)) + 125` exactly as glibc's `log2f` rounds it.

use super::blocks::BlockMxfp4;
use crate::types::QK32;

/// `kvalues_mxfp4`: the 16 E2M1 values, doubled (code 8 is negative zero, read as 0).
pub const KVALUES_MXFP4: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

/// `GGML_E8M0_TO_FP32_HALF`: `2^(e - 128)`, i.e. half the E8M0 value `2^(e - 127)`, built from
/// its bits as ggml does (subnormal patterns for `e` < 2; `e` = 255, E8M0's NaN, gives 2^127).
#[inline(always)]
pub const fn e8m0_to_f32_half(e: u8) -> f32 {
    let bits = if e < 2 {
        0x0020_0000u32 << e
    } else {
        ((e as u32) - 1) << 23
    };
    f32::from_bits(bits)
}

/// The shared exponent llama.cpp picks for a block whose largest magnitude is `amax` (≥ 0, not
/// NaN): `(uint8_t)(floorf(log2f(amax)) - 2 + 127)`, 0 for an all-zero block.
///
/// `log2f` is evaluated as the f64 `log2` rounded to f32: for every positive finite f32 its
/// floor equals glibc's `floorf(log2f(x))` (checked exhaustively), including the values just
/// below a power of two whose `log2f` rounds up to the next integer. Exponents outside a u8
/// (amax below 2^-125, undefined in C) wrap as x86's truncating conversion does, and an
/// infinite `amax` gives 0 like llama.cpp's x86 builds and gguf-py.
fn shared_exponent(amax: f32) -> u8 {
    if amax <= 0.0 || amax.is_infinite() {
        return 0;
    }
    let log2 = (amax as f64).log2() as f32;
    // In [-24, 252]: exact in i32, the low byte is what the C conversion keeps.
    (log2.floor() - 2.0 + 127.0) as i32 as u8
}

/// `best_index_mxfp4`: the first code whose value times `d` is nearest `x` (a NaN `x` or an
/// infinite error keeps code 0).
fn best_index(x: f32, d: f32) -> u8 {
    let mut best = 0u8;
    let mut best_err = (KVALUES_MXFP4[0] as f32 * d - x).abs();
    for (i, &k) in KVALUES_MXFP4.iter().enumerate().skip(1) {
        let err = (k as f32 * d - x).abs();
        if err < best_err {
            best = i as u8;
            best_err = err;
        }
    }
    best
}

pub fn quantize(src: &[f32], dst: &mut [BlockMxfp4]) {
    for (x, y) in src.as_chunks::<QK32>().0.iter().zip(dst.iter_mut()) {
        // NaN never compares greater, so it does not enter the maximum (as in C).
        let mut amax = 0.0f32;
        for &v in x {
            if amax < v.abs() {
                amax = v.abs();
            }
        }
        let e = shared_exponent(amax);
        let d = e8m0_to_f32_half(e);
        y.e = e;
        for j in 0..16 {
            y.qs[j] = best_index(x[j], d) | (best_index(x[j + 16], d) << 4);
        }
    }
}

pub fn dequantize(src: &[BlockMxfp4], dst: &mut [f32]) {
    for (b, y) in src.iter().zip(dst.as_chunks_mut::<QK32>().0.iter_mut()) {
        let d = e8m0_to_f32_half(b.e);
        for j in 0..16 {
            y[j] = KVALUES_MXFP4[(b.qs[j] & 0xF) as usize] as f32 * d;
            y[j + 16] = KVALUES_MXFP4[(b.qs[j] >> 4) as usize] as f32 * d;
        }
    }
}
