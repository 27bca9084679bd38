//! Scalar rounding and float-format conversions shared by the quantizers, matching ggml bit for
//! bit: `nearest_int` (round half to even via the 1.5·2^23 trick), f16 round-to-nearest-even and
//! ggml's bf16 rounding with NaN quieting.

use half::{bf16, f16};

/// ggml's `nearest_int`: rounds to nearest, ties to even, for |x| <= 4194303.
#[inline(always)]
pub fn nearest_int(x: f32) -> i32 {
    debug_assert!(x.abs() <= 4_194_303.0 || x.is_nan());
    let bits = (x + 12_582_912.0).to_bits() as i32;
    (bits & 0x007f_ffff) - 0x0040_0000
}

/// f32 -> f16 with round-to-nearest-even (what F16C `vcvtps2ph` and ggml do).
#[inline(always)]
pub fn f32_to_f16(x: f32) -> f16 {
    f16::from_f32(x)
}

/// f16 -> f32, exact.
#[inline(always)]
pub fn f16_to_f32(x: f16) -> f32 {
    x.to_f32()
}

/// `ggml_compute_fp32_to_bf16`: round to nearest even, NaNs truncated and forced quiet.
#[inline(always)]
pub fn f32_to_bf16(x: f32) -> bf16 {
    let u = x.to_bits();
    if (u & 0x7fff_ffff) > 0x7f80_0000 {
        return bf16::from_bits(((u >> 16) | 64) as u16);
    }
    bf16::from_bits((u.wrapping_add(0x7fff + ((u >> 16) & 1)) >> 16) as u16)
}

/// bf16 -> f32, exact (a 16-bit shift).
#[inline(always)]
pub fn bf16_to_f32(x: bf16) -> f32 {
    f32::from_bits((x.to_bits() as u32) << 16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_int_rounds_half_to_even() {
        assert_eq!(nearest_int(0.5), 0);
        assert_eq!(nearest_int(1.5), 2);
        assert_eq!(nearest_int(2.5), 2);
        assert_eq!(nearest_int(-0.5), 0);
        assert_eq!(nearest_int(-1.5), -2);
        assert_eq!(nearest_int(-7.49), -7);
        assert_eq!(nearest_int(127.0), 127);
    }

    #[test]
    fn bf16_rounding_and_nan() {
        assert_eq!(f32_to_bf16(1.0).to_bits(), 0x3f80);
        // 1 + 2^-8 is a tie: rounds to even (1.0).
        assert_eq!(f32_to_bf16(f32::from_bits(0x3f80_8000)).to_bits(), 0x3f80);
        assert_eq!(f32_to_bf16(f32::from_bits(0x3f81_8000)).to_bits(), 0x3f82);
        let nan = f32_to_bf16(f32::from_bits(0x7f80_0001));
        assert_eq!(nan.to_bits(), 0x7fc0);
        assert!(bf16_to_f32(nan).is_nan());
        assert_eq!(bf16_to_f32(f32_to_bf16(-2.5)), -2.5);
    }
}
