//! AVX2 + FMA + F16C tile kernels: `R` weight rows × `C` activation rows per call, each weight
//! block loaded and decoded once and reused for all `C` activations.
//!
//! Invariant (batch invariance): the accumulator of each (row, token) pair goes through the same
//! sequence of operations whatever `R` and `C` are, and is reduced by the same [`hsum`], so a
//! tile entry is bit-identical to the 1×1 call for that pair.

mod float;
pub(crate) mod interleaved;
pub(crate) mod interleaved_amx;
pub(crate) mod interleaved_amx_k;
pub(crate) mod interleaved_amx_pipe;
pub(crate) mod interleaved_amx_sub;
pub(crate) mod interleaved_avx2;
pub(crate) mod interleaved_avx2_k;
pub(crate) mod interleaved_avx2_k16;
pub(crate) mod interleaved_iq4xs;
pub(crate) mod interleaved_k;
pub(crate) mod interleaved_k_low;
mod iq4;
mod kquants;
mod kquants_wide;
mod q32;
mod q8;
pub(crate) mod wide;

use std::arch::x86_64::*;

use crate::types::GgmlType;

/// Which tile builds a call uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Build {
    /// AVX2 + FMA + F16C only.
    Avx2,
    /// 256-bit VNNI int8 and K-quant tiles (bit-identical to `Avx2`).
    Vnni,
    /// `Vnni`, plus the 512-bit K-quant tiles of `kquants_wide` (Q4_K, Q5_K, Q6_K; also
    /// bit-identical to `Avx2`).
    VnniWide,
    /// `VnniWide`, plus the 512-bit tiles of [`wide`] for Q8_0, Q4_0, Q5_0, Q4_1, Q5_1 (these
    /// reassociate float sums).
    Avx512,
}

/// The build this process uses ([`crate::simd::vnni`], [`crate::simd::avx512`],
/// [`crate::simd::avx512_detected`]; fixed once). The 512-bit K-quant tiles come with VNNI
/// wherever the CPU has AVX-512 F/BW: their results equal the 256-bit tiles' bit for bit.
pub(crate) fn build() -> Build {
    if crate::simd::avx512() {
        Build::Avx512
    } else if crate::simd::vnni() && crate::simd::avx512_detected() {
        Build::VnniWide
    } else if crate::simd::vnni() {
        Build::Vnni
    } else {
        Build::Avx2
    }
}

/// Computes `out[r][t] = dot(w[r], x[t])` over `n` elements, with the process's [`build`].
///
/// # Safety
/// The CPU must support avx2, fma and f16c. Each `w[r]` must point to `ty.row_bytes(n)` readable
/// bytes and each `x[t]` to `ty.vec_dot_type().row_bytes(n)` readable bytes (any alignment),
/// with `n` a multiple of `ty.block_size()`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn tile<const R: usize, const C: usize>(
    ty: GgmlType,
    w: [*const u8; R],
    x: [*const u8; C],
    n: usize,
    out: &mut [[f32; C]; R],
) {
    // SAFETY: forwarded; `build()` only names builds whose features the CPU has.
    unsafe { tile_on::<R, C>(ty, build(), w, x, n, out) }
}

/// [`tile`] with the build chosen by the caller (tests compare builds with it).
///
/// # Safety
/// As [`tile`]; with `Vnni`, the CPU must also support avx512vnni and avx512vl; with `VnniWide`
/// or `Avx512`, also avx512f and avx512bw.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn tile_on<const R: usize, const C: usize>(
    ty: GgmlType,
    build: Build,
    w: [*const u8; R],
    x: [*const u8; C],
    n: usize,
    out: &mut [[f32; C]; R],
) {
    let vnni = build != Build::Avx2;
    let wide = build == Build::Avx512;
    let kwide = matches!(build, Build::VnniWide | Build::Avx512);
    // SAFETY: forwarded from this function's contract; each kernel documents the same one.
    unsafe {
        match ty {
            GgmlType::Q4_0 if wide => wide::tile_q4_0::<R, C>(w, x, n / 32, out),
            GgmlType::Q8_0 if wide => wide::tile_q8_0::<R, C>(w, x, n / 32, out),
            GgmlType::Q4_1 if wide => wide::tile_q4_1::<R, C>(w, x, n / 32, out),
            GgmlType::Q5_0 if wide => wide::tile_q5_0::<R, C>(w, x, n / 32, out),
            GgmlType::Q5_1 if wide => wide::tile_q5_1::<R, C>(w, x, n / 32, out),
            GgmlType::F32 => float::tile_f32::<R, C>(w, x, n, out),
            GgmlType::F16 => float::tile_f16::<R, C>(w, x, n, out),
            GgmlType::BF16 => float::tile_bf16::<R, C>(w, x, n, out),
            GgmlType::Q4_0 if vnni => q8::tile_q4_0_vnni::<R, C>(w, x, n / 32, out),
            GgmlType::Q4_0 => q8::tile_q4_0::<R, C>(w, x, n / 32, out),
            GgmlType::Q8_0 if vnni => q8::tile_q8_0_vnni::<R, C>(w, x, n / 32, out),
            GgmlType::Q8_0 => q8::tile_q8_0::<R, C>(w, x, n / 32, out),
            GgmlType::Q4_1 if vnni => q32::tile_q4_1_vnni::<R, C>(w, x, n / 32, out),
            GgmlType::Q4_1 => q32::tile_q4_1::<R, C>(w, x, n / 32, out),
            GgmlType::Q5_1 if vnni => q32::tile_q5_1_vnni::<R, C>(w, x, n / 32, out),
            GgmlType::Q5_1 => q32::tile_q5_1::<R, C>(w, x, n / 32, out),
            GgmlType::Q5_0 if vnni => q32::tile_q5_0_vnni::<R, C>(w, x, n / 32, out),
            GgmlType::Q5_0 => q32::tile_q5_0::<R, C>(w, x, n / 32, out),
            GgmlType::Q8_1 if vnni => q32::tile_q8_1_vnni::<R, C>(w, x, n / 32, out),
            GgmlType::Q8_1 => q32::tile_q8_1::<R, C>(w, x, n / 32, out),
            GgmlType::Q8K if vnni => q8::tile_q8k_vnni::<R, C>(w, x, n / 256, out),
            GgmlType::Q8K => q8::tile_q8k::<R, C>(w, x, n / 256, out),
            GgmlType::Q2K if vnni => kquants::tile_q2k_vnni::<R, C>(w, x, n / 256, out),
            GgmlType::Q2K => kquants::tile_q2k::<R, C>(w, x, n / 256, out),
            GgmlType::Q3K if vnni => kquants::tile_q3k_vnni::<R, C>(w, x, n / 256, out),
            GgmlType::Q3K => kquants::tile_q3k::<R, C>(w, x, n / 256, out),
            GgmlType::IQ4NL if vnni => iq4::tile_iq4_nl_vnni::<R, C>(w, x, n / 32, out),
            GgmlType::IQ4NL => iq4::tile_iq4_nl::<R, C>(w, x, n / 32, out),
            GgmlType::Mxfp4 if vnni => iq4::tile_mxfp4_vnni::<R, C>(w, x, n / 32, out),
            GgmlType::Mxfp4 => iq4::tile_mxfp4::<R, C>(w, x, n / 32, out),
            GgmlType::IQ4XS => iq4::tile_iq4_xs::<R, C>(w, x, n / 256, out),
            GgmlType::Q4K if kwide => kquants_wide::tile_q4k::<R, C>(w, x, n / 256, out),
            GgmlType::Q4K if vnni => kquants::tile_q4k_vnni::<R, C>(w, x, n / 256, out),
            GgmlType::Q4K => kquants::tile_q4k::<R, C>(w, x, n / 256, out),
            GgmlType::Q5K if kwide => kquants_wide::tile_q5k::<R, C>(w, x, n / 256, out),
            GgmlType::Q5K if vnni => kquants::tile_q5k_vnni::<R, C>(w, x, n / 256, out),
            GgmlType::Q5K => kquants::tile_q5k::<R, C>(w, x, n / 256, out),
            GgmlType::Q6K if kwide => kquants_wide::tile_q6k::<R, C>(w, x, n / 256, out),
            GgmlType::Q6K if vnni => kquants::tile_q6k_vnni::<R, C>(w, x, n / 256, out),
            GgmlType::Q6K => kquants::tile_q6k::<R, C>(w, x, n / 256, out),
        }
    }
}

/// Horizontal sum of 8 lanes in a fixed order: (lo128 + hi128), then pairs, then the last two.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn hsum(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_movehdup_ps(s));
    _mm_cvtss_f32(s)
}

/// Reads a little-endian f16 at `p` (any alignment) as f32.
///
/// # Safety
/// `p` must point to 2 readable bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn load_f16(p: *const u8) -> f32 {
    // SAFETY: 2 readable bytes at p (caller); unaligned read.
    let bits = unsafe { p.cast::<u16>().read_unaligned() };
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(bits as i32)))
}

/// Reads a little-endian f32 at `p` (any alignment).
///
/// # Safety
/// `p` must point to 4 readable bytes.
#[inline(always)]
pub(crate) unsafe fn load_f32(p: *const u8) -> f32 {
    // SAFETY: 4 readable bytes at p (caller); unaligned read.
    unsafe { p.cast::<f32>().read_unaligned() }
}

/// Loads 32 bytes at `p` (any alignment).
///
/// # Safety
/// `p` must point to 32 readable bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn load256(p: *const u8) -> __m256i {
    // SAFETY: 32 readable bytes at p (caller); unaligned load.
    unsafe { _mm256_loadu_si256(p.cast()) }
}

/// Loads 16 bytes at `p` (any alignment).
///
/// # Safety
/// `p` must point to 16 readable bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn load128(p: *const u8) -> __m128i {
    // SAFETY: 16 readable bytes at p (caller); unaligned load.
    unsafe { _mm_loadu_si128(p.cast()) }
}
