//! The vector form of the 32-element int8 activation quantizer (Q8_0, Q8_1) this process runs:
//! the 512-bit loops where the process uses them (`q8_simd`), else the AVX2 ones (`q8_avx2`);
//! both give the scalar loops' bytes.

/// Which vector loops quantize the 32-element blocks.
#[derive(Clone, Copy)]
pub(super) enum Block32 {
    Avx512,
    Avx2,
}

impl Block32 {
    /// The loops this process may run, if any.
    pub(super) fn pick() -> Option<Block32> {
        if super::q8_simd::available() {
            Some(Block32::Avx512)
        } else if super::q8_avx2::available() {
            Some(Block32::Avx2)
        } else {
            None
        }
    }

    /// `max |x_i|`, NaNs ignored.
    #[inline]
    pub(super) fn amax(self, x: &[f32; 32]) -> f32 {
        // SAFETY: `pick` chose the loops whose features this process has.
        unsafe {
            match self {
                Block32::Avx512 => super::q8_simd::amax32(x),
                Block32::Avx2 => super::q8_avx2::amax32(x),
            }
        }
    }

    /// `qs[i] = roundf(x[i] · id)` held to [-127, 127] (NaN: 0); returns `Σ qs`.
    #[inline]
    pub(super) fn quantize(self, x: &[f32; 32], id: f32, qs: &mut [i8; 32]) -> i32 {
        // SAFETY: as in `amax`.
        unsafe {
            match self {
                Block32::Avx512 => super::q8_simd::block32(x, id, qs),
                Block32::Avx2 => super::q8_avx2::block32(x, id, qs),
            }
        }
    }
}
