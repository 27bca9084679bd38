//! Runtime SIMD level selection, detected once per process.
//!
//! Invariant: [`level`] never changes after its first call, so every kernel in a process takes
//! the same code path (a prerequisite for batch invariance). `MEMORIA_SIMD=scalar` forces the
//! scalar reference path, `MEMORIA_SIMD=avx2` AVX2 without VNNI or AVX-512, `MEMORIA_SIMD=vnni`
//! AVX2 tiles with 256-bit VNNI but no 512-bit tiles; non-x86_64 targets always use scalar.
//! [`vnni`] only picks between builds whose results are bit-identical; [`avx512`] picks the
//! 512-bit int8 tiles, whose results differ from the AVX2 build by float reassociation (fixed
//! once per process, so every kernel of a process still agrees with itself).

use std::sync::OnceLock;

/// Which implementation the dispatching kernels use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SimdLevel {
    /// Portable scalar code, the same formulas as ggml's generic C.
    Scalar,
    /// x86_64 AVX2 + FMA + F16C.
    Avx2,
}

static LEVEL: OnceLock<SimdLevel> = OnceLock::new();
static VNNI: OnceLock<bool> = OnceLock::new();
static AVX512: OnceLock<bool> = OnceLock::new();

fn forced() -> Option<String> {
    std::env::var("MEMORIA_SIMD")
        .ok()
        .map(|v| v.to_ascii_lowercase())
}

/// The SIMD level in use by this process (detected on first call).
pub fn level() -> SimdLevel {
    *LEVEL.get_or_init(|| {
        if forced().as_deref() == Some("scalar") {
            SimdLevel::Scalar
        } else {
            detected()
        }
    })
}

/// The best level this CPU supports, ignoring the environment override.
pub fn detected() -> SimdLevel {
    #[cfg(target_arch = "x86_64")]
    {
        if is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("fma")
            && is_x86_feature_detected!("f16c")
        {
            return SimdLevel::Avx2;
        }
    }
    SimdLevel::Scalar
}

/// Whether the AVX2 int8 tiles (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q8_1, Q8_K, IQ4_NL) use AVX-512
/// VNNI on 256-bit vectors: the CPU has avx512vnni + avx512vl, the level is AVX2, and
/// `MEMORIA_SIMD` is not `avx2` or `scalar`. Fixed on first call.
pub fn vnni() -> bool {
    *VNNI.get_or_init(|| {
        level() == SimdLevel::Avx2 && forced().as_deref() != Some("avx2") && vnni_detected()
    })
}

/// Whether this CPU has avx512vnni and avx512vl, ignoring the environment.
pub fn vnni_detected() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        detected() == SimdLevel::Avx2
            && is_x86_feature_detected!("avx512vnni")
            && is_x86_feature_detected!("avx512vl")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether the 32-element int8 formats (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1) use the 512-bit VNNI tiles
/// (`dot::avx512`): [`vnni`] holds, the CPU has avx512f + avx512bw, and `MEMORIA_SIMD` is not
/// `vnni` (nor `avx2` / `scalar`, which already turn [`vnni`] off). Fixed on first call.
pub fn avx512() -> bool {
    *AVX512.get_or_init(|| vnni() && forced().as_deref() != Some("vnni") && avx512_detected())
}

/// Whether this CPU has everything the 512-bit tiles need (avx512f/bw/vl/vnni plus the AVX2
/// level), ignoring the environment.
pub fn avx512_detected() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        vnni_detected()
            && is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}
