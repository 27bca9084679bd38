//! Runtime SIMD level selection, detected once per process.
//!
//! Invariant: [`level`] never changes after its first call, so every kernel in a process takes
//! the same code path (a prerequisite for batch invariance). `MEMORIA_SIMD=scalar` forces the
//! scalar reference path, `MEMORIA_SIMD=avx2` AVX2 without VNNI or AVX-512 (interleaved
//! 32-element-block weights on the AVX2 group kernels, as on CPUs without AVX-512), `MEMORIA_SIMD=vnni`
//! AVX2 tiles with 256-bit VNNI (the VNNI kernels alone), `MEMORIA_SIMD=avx512` adds the
//! 512-bit int8 tiles, `MEMORIA_SIMD=amx` requires AMX tiles for every interleaved format's
//! prefill ([`amx`]; an error where the CPU or kernel refuses tiles); unset, the VNNI kernels
//! with AMX tiles where the kernel grants them; non-x86_64 targets always use scalar.
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

/// Whether the AVX2 int8 tiles (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q8_1, Q8_K, IQ4_NL, MXFP4) use
/// AVX-512 VNNI on 256-bit vectors: the CPU has avx512vnni + avx512vl, the level is AVX2, and
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
/// (`dot::avx512`): `MEMORIA_SIMD=avx512` asks for them, [`vnni`] holds and the CPU has
/// avx512f + avx512bw. Opt-in for now: they prefill ~1.2x faster, but their summation order
/// puts SmolLM2's teacher-forced top-1 agreement with llama.cpp at 96.9% (441/455), under the
/// 97% the fidelity tests require (the 256-bit build: 97.1%). Fixed on first call.
pub fn avx512() -> bool {
    *AVX512.get_or_init(|| vnni() && forced().as_deref() == Some("avx512") && avx512_detected())
}

/// Whether attention's row loops and f16 roundings use their 512-bit forms (`ops::rows`, the
/// same bits as the AVX2 ones): [`vnni`] holds (so not under `MEMORIA_SIMD=avx2|scalar`) and
/// the CPU has avx512f + avx512bw. Fixed on first call.
pub fn avx512_rows() -> bool {
    static ROWS: OnceLock<bool> = OnceLock::new();
    *ROWS.get_or_init(|| vnni() && avx512_detected())
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

static AMX: OnceLock<bool> = OnceLock::new();

/// `MEMORIA_SIMD` asks for something this process cannot give.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("MEMORIA_SIMD={asked}: {why}")]
pub struct Unavailable {
    pub asked: String,
    pub why: &'static str,
}

/// Checks that `MEMORIA_SIMD` names a path and that the path can run here: `amx` needs AMX tiles granted by
/// the kernel ([`amx_usable`]) and the interleaved AVX-512 VNNI kernels they extend. Binaries
/// call it at startup so a refused request is an error message, not a panic in [`amx`].
pub fn check_forced() -> Result<(), Unavailable> {
    match forced().as_deref() {
        Some("amx") => {}
        None | Some("scalar" | "avx2" | "vnni" | "avx512") => return Ok(()),
        Some(other) => {
            return Err(Unavailable {
                asked: other.to_owned(),
                why: "not a SIMD path: use scalar, avx2, vnni (the default), avx512 or amx",
            });
        }
    }
    let why = if !(vnni() && avx512_detected()) {
        "this CPU lacks the AVX-512 VNNI kernels the tile path extends"
    } else if !amx_usable() {
        "this CPU or kernel does not grant AMX tiles (AMX-TILE/AMX-INT8 with XTILEDATA permission)"
    } else {
        return Ok(());
    };
    Err(Unavailable {
        asked: "amx".into(),
        why,
    })
}

/// Whether matmuls over interleaved weights of 8 tokens or more run on AMX tiles
/// (`dot::avx2::interleaved_amx`: the same bits as the VNNI kernels by construction, tested):
/// by default wherever the kernel grants tiles and the VNNI kernels they extend are in use
/// (`MEMORIA_SIMD` unset), for the formats where tiles measured faster ([`amx_all`] says
/// whether the rest run on them too); always under `MEMORIA_SIMD=amx`, which panics when tiles
/// are refused ([`check_forced`] says so as an error first); never under another
/// `MEMORIA_SIMD`. Fixed on first call.
pub fn amx() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| match forced().as_deref() {
        Some("amx") => {
            if let Err(e) = check_forced() {
                panic!("{e}");
            }
            true
        }
        None => vnni() && avx512_detected() && amx_usable(),
        Some(_) => false,
    })
}

/// Whether every interleaved format runs on tiles, the ones not faster there than on the VNNI
/// kernels too (Q6_K, Q3_K, Q2_K: a whole tile product per 16-element sub-block, about the
/// VNNI kernels' speed): only under `MEMORIA_SIMD=amx`, so its tests cover every tile kernel.
/// By default the 32-element formats (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL), Q4_K, Q5_K and
/// IQ4_XS.
pub fn amx_all() -> bool {
    amx() && forced().as_deref() == Some("amx")
}

/// Whether AMX tiles (AMX-TILE + AMX-INT8) could be used by this process: the CPU lists them,
/// the OS enabled their state in XCR0 (bits 17, 18), and Linux granted this process permission
/// for XTILEDATA (`arch_prctl(ARCH_REQ_XCOMP_PERM)`, then confirmed by `ARCH_GET_XCOMP_PERM`).
/// False wherever any step is refused (as in VMs that list AMX but do not enable it). Only
/// detection: no kernel uses AMX, so the answer changes no result. Fixed on first call.
pub fn amx_usable() -> bool {
    *AMX.get_or_init(amx_detect)
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn amx_detect() -> bool {
    use std::arch::x86_64::{__cpuid, __cpuid_count};
    let (max_leaf, leaf1, leaf7) = (__cpuid(0).eax, __cpuid(1), __cpuid_count(7, 0));
    let (amx_tile, amx_int8) = (1 << 24, 1 << 25);
    if max_leaf < 7 || leaf7.edx & (amx_tile | amx_int8) != (amx_tile | amx_int8) {
        return false;
    }
    if leaf1.ecx & (1 << 27) == 0 {
        return false; // no OSXSAVE: XCR0 cannot be read
    }
    // SAFETY: OSXSAVE checked above, so xgetbv is enabled.
    let xcr0 = unsafe { xgetbv0() };
    if xcr0 & (0b11 << 17) != (0b11 << 17) {
        return false;
    }
    const SYS_ARCH_PRCTL: i64 = 158;
    const ARCH_GET_XCOMP_PERM: i64 = 0x1022;
    const ARCH_REQ_XCOMP_PERM: i64 = 0x1023;
    const XFEATURE_XTILEDATA: i64 = 18;
    // SAFETY: arch_prctl with these codes only reads its integer argument / writes the u64
    // behind the pointer; an old kernel answers -EINVAL.
    unsafe {
        if syscall2(SYS_ARCH_PRCTL, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0 {
            return false;
        }
        let mut perm = 0u64;
        let got = syscall2(SYS_ARCH_PRCTL, ARCH_GET_XCOMP_PERM, (&raw mut perm) as i64);
        got == 0 && perm & (1 << XFEATURE_XTILEDATA) != 0
    }
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
fn amx_detect() -> bool {
    false
}

/// XCR0 (the OS-enabled state components).
///
/// # Safety
/// CPUID.1:ECX.OSXSAVE must be set.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
unsafe fn xgetbv0() -> u64 {
    let (lo, hi): (u32, u32);
    // SAFETY: xgetbv with ecx = 0 is enabled when OSXSAVE is set (caller); no memory access.
    unsafe {
        std::arch::asm!("xgetbv", in("ecx") 0u32, out("eax") lo, out("edx") hi,
            options(nomem, nostack, preserves_flags));
    }
    ((hi as u64) << 32) | lo as u64
}

/// A raw Linux x86_64 system call with two arguments; returns the kernel's result.
///
/// # Safety
/// The call must be safe to make with these arguments.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
unsafe fn syscall2(nr: i64, a: i64, b: i64) -> i64 {
    let ret: i64;
    // SAFETY: forwarded; the syscall instruction clobbers rcx and r11 only.
    unsafe {
        std::arch::asm!("syscall", inlateout("rax") nr => ret, in("rdi") a, in("rsi") b,
            lateout("rcx") _, lateout("r11") _, options(nostack));
    }
    ret
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amx_detection_is_stable_and_implies_the_cpu_features() {
        let first = amx_usable();
        assert_eq!(first, amx_usable());
        #[cfg(target_arch = "x86_64")]
        if first {
            let edx = std::arch::x86_64::__cpuid_count(7, 0).edx;
            assert_eq!(edx & (0b11 << 24), 0b11 << 24);
        }
    }

    #[test]
    fn amx_runs_only_where_granted_and_a_refusal_is_an_error() {
        match check_forced() {
            Ok(()) => {
                if amx() {
                    assert!(amx_usable() && vnni() && avx512_detected());
                }
            }
            Err(e) => {
                assert_eq!(forced().as_deref(), Some("amx"));
                assert!(!amx_usable() || !avx512_detected(), "{e}");
                eprintln!("skipped: {e} (a run under MEMORIA_SIMD=amx would stop with it)");
            }
        }
    }

    #[test]
    fn avx512_implies_vnni_and_the_avx2_level() {
        if avx512() {
            assert!(vnni());
            assert_eq!(level(), SimdLevel::Avx2);
            assert!(avx512_detected());
        }
    }
}
