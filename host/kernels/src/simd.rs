//! Runtime SIMD level selection, detected once per process.
//!
//! Invariant: [`level`] never changes after its first call, so every kernel in a process takes
//! the same code path (a prerequisite for batch invariance). `MEMORIA_SIMD=scalar` forces the
//! scalar reference path; non-x86_64 targets always use scalar.

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

/// The SIMD level in use by this process (detected on first call).
pub fn level() -> SimdLevel {
    *LEVEL.get_or_init(|| {
        let forced_scalar = std::env::var("MEMORIA_SIMD")
            .map(|v| v.eq_ignore_ascii_case("scalar"))
            .unwrap_or(false);
        if forced_scalar {
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
