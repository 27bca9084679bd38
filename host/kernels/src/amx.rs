//! Intel AMX int8 tiles behind a small safe wrapper ([`HwTiles`]), and a software model of the
//! same operations ([`SoftTiles`]) that lets the tile GEMM's layout and arithmetic be checked
//! on CPUs without tiles.
//!
//! A [`TileUnit`] holds eight tiles: four `C` (`m` × 16 i32), two `A` (`m` × `k` signed bytes,
//! the activations) and two `B` (`k/4` rows of 64 bytes, VNNI order: row `j`, bytes
//! `4n..4n + 4` are column `n`'s elements `4j..4j + 4`). `dot_su` is `TDPBSUD` and `dot_ss`
//! `TDPBSSD`: `C[i][n] += Σ_j Σ_q A[i][4j + q] · B[j][4n + q]` (`B` unsigned or signed, i32
//! wrapping) — the sums `vpdpbusd` forms in [`crate::dot::avx2::interleaved`], exact for every
//! block format here.
//!
//! SAFETY (the one place the tile instructions' contract is argued):
//! - Tile data may only be touched after Linux granted XTILEDATA to the process
//!   (`arch_prctl(ARCH_REQ_XCOMP_PERM)`, per process, inherited by every thread): otherwise the
//!   first tile instruction is refused with SIGILL. [`HwTiles::new`] exists only when
//!   [`crate::simd::amx_usable`] saw the grant, so that holds for every thread of the process.
//! - Every tile instruction needs a valid tile configuration on *this* thread (it is per-thread
//!   register state): [`HwTiles::new`] loads one with `ldtilecfg` (palette 1, shapes within
//!   16 rows × 64 bytes, `A.colsb = 4·B.rows`, every `C` as `A.rows` × 64) and the type is neither
//!   `Send` nor `Sync`, so every later instruction runs on the configuring thread; `Drop`
//!   runs `tilerelease` (returns the tile state to its init state, so context switches stay
//!   cheap). One [`HwTiles`] at a time per thread (a second would reconfigure the first's
//!   tiles under it, and its loads would read other shapes): `new` panics while one is held
//!   (`HELD`); the kernels create one per task and keep it local.
//! - Loads and stores touch exactly `rows` × `colsb` bytes at `base + i·stride`: the callers
//!   of [`TileUnit::load`] promise those are readable; the store
//!   writes into a `&mut` buffer of the full 16 × 16 i32.

use std::marker::PhantomData;

/// Rows of `C` and `A` the kernels use (a full tile).
pub const M: usize = 16;

/// A 16 × 16 i32 tile image, 64-byte aligned (the tile store's target).
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub struct CBuf(pub [[i32; 16]; M]);

impl Default for CBuf {
    fn default() -> Self {
        CBuf([[0; 16]; M])
    }
}

/// Tile registers by role (the configuration [`Config::new`] loads): `C` tiles (`m` × 16 i32),
/// `A` tiles (`m` × `k` bytes) and `B` tiles (`k/4` rows of 64 bytes).
pub(crate) const C0: u8 = 0;
pub(crate) const C1: u8 = 1;
pub(crate) const C2: u8 = 2;
pub(crate) const C3: u8 = 3;
pub(crate) const A0: u8 = 4;
pub(crate) const A1: u8 = 5;
pub(crate) const B0: u8 = 6;
pub(crate) const B1: u8 = 7;

/// The tile operations of the GEMM (see the module doc for the shapes), on tile registers named
/// by const index: `C` in 0..4, `A` in 4..6, `B` in 6..8 (another index panics).
pub(crate) trait TileUnit {
    /// `C = 0`.
    fn zero<const C: u8>(&mut self);
    /// Loads tile `T` (an `A` or `B` tile): its rows at `p + i·stride`.
    ///
    /// # Safety
    /// Those rows (`m` × `k` bytes for `A`, `k/4` × 64 for `B`) are readable.
    unsafe fn load<const T: u8>(&mut self, p: *const u8, stride: usize);
    /// `C += A · B`, signed `A` × unsigned `B` (`TDPBSUD`).
    fn dot_su<const C: u8, const A: u8, const B: u8>(&mut self);
    /// `C += A · B`, signed `A` × signed `B` (`TDPBSSD`).
    fn dot_ss<const C: u8, const A: u8, const B: u8>(&mut self);
    /// Stores tile `C` into `out` (its first `m` rows).
    fn store<const C: u8>(&mut self, out: &mut CBuf);
}

/// The 64-byte `ldtilecfg` operand: palette 1, tmm0..tmm3 = `C` (`m` × 64 bytes), tmm4, tmm5 =
/// `A` (`m` × `k`), tmm6, tmm7 = `B` (`k/4` × 64).
#[repr(C, align(64))]
struct Config([u8; 64]);

impl Config {
    fn new(m: usize, k: usize) -> Config {
        assert!(
            (1..=M).contains(&m) && k.is_multiple_of(4) && (4..=64).contains(&k),
            "tile shape {m}x{k} out of range"
        );
        let mut c = [0u8; 64];
        c[0] = 1;
        for i in 0..8 {
            let (colsb, rows) = match i {
                0..4 => (64u16, m as u8),
                4 | 5 => (k as u16, m as u8),
                _ => (64, (k / 4) as u8),
            };
            c[16 + 2 * i..18 + 2 * i].copy_from_slice(&colsb.to_le_bytes());
            c[48 + i] = rows;
        }
        Config(c)
    }
}

thread_local! {
    /// Whether this thread holds an [`HwTiles`].
    static HELD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The CPU's tiles, configured on this thread (see the module doc's SAFETY).
pub struct HwTiles {
    /// Tile state is per thread: not `Send`, not `Sync`.
    _thread: PhantomData<*const ()>,
}

impl HwTiles {
    /// Configures this thread's tiles for `A` = `m` × `k` bytes (`1 ≤ m ≤ 16`, `k` a multiple
    /// of 4 up to 64); `None` where the process has no tile permission
    /// ([`crate::simd::amx_usable`]). Panics on a shape out of range, or while this thread
    /// already holds an [`HwTiles`].
    pub fn new(m: usize, k: usize) -> Option<HwTiles> {
        if !crate::simd::amx_usable() {
            return None;
        }
        let cfg = Config::new(m, k);
        assert!(
            !HELD.with(|h| h.replace(true)),
            "one HwTiles per thread at a time"
        );
        // SAFETY: tile permission granted (checked above); the operand is a valid palette-1
        // configuration (Config::new) in 64 readable bytes.
        unsafe {
            std::arch::asm!("ldtilecfg [{0}]", in(reg) cfg.0.as_ptr(),
                options(nostack, readonly, preserves_flags));
        }
        Some(HwTiles {
            _thread: PhantomData,
        })
    }
}

impl Drop for HwTiles {
    fn drop(&mut self) {
        HELD.with(|h| h.set(false));
        // SAFETY: tiles configured on this thread (the type's invariant); tilerelease only
        // resets tile state.
        unsafe {
            std::arch::asm!("tilerelease", options(nostack, nomem, preserves_flags));
        }
    }
}

/// A tile dot product `$ins` (`"tdpbsud"`, `"tdpbssd"`) on const indices `(C, A, B)`: `C` in
/// 0..4, `A` in 4..6, `B` in 6..8 (another combination panics).
macro_rules! tile_dot {
    ($ins:literal, $sel:expr) => {
        match $sel {
            (0, 4, 6) => std::arch::asm!(
                concat!($ins, " tmm0, tmm4, tmm6"),
                options(nostack, nomem, preserves_flags)
            ),
            (0, 4, 7) => std::arch::asm!(
                concat!($ins, " tmm0, tmm4, tmm7"),
                options(nostack, nomem, preserves_flags)
            ),
            (0, 5, 6) => std::arch::asm!(
                concat!($ins, " tmm0, tmm5, tmm6"),
                options(nostack, nomem, preserves_flags)
            ),
            (0, 5, 7) => std::arch::asm!(
                concat!($ins, " tmm0, tmm5, tmm7"),
                options(nostack, nomem, preserves_flags)
            ),
            (1, 4, 6) => std::arch::asm!(
                concat!($ins, " tmm1, tmm4, tmm6"),
                options(nostack, nomem, preserves_flags)
            ),
            (1, 4, 7) => std::arch::asm!(
                concat!($ins, " tmm1, tmm4, tmm7"),
                options(nostack, nomem, preserves_flags)
            ),
            (1, 5, 6) => std::arch::asm!(
                concat!($ins, " tmm1, tmm5, tmm6"),
                options(nostack, nomem, preserves_flags)
            ),
            (1, 5, 7) => std::arch::asm!(
                concat!($ins, " tmm1, tmm5, tmm7"),
                options(nostack, nomem, preserves_flags)
            ),
            (2, 4, 6) => std::arch::asm!(
                concat!($ins, " tmm2, tmm4, tmm6"),
                options(nostack, nomem, preserves_flags)
            ),
            (2, 4, 7) => std::arch::asm!(
                concat!($ins, " tmm2, tmm4, tmm7"),
                options(nostack, nomem, preserves_flags)
            ),
            (2, 5, 6) => std::arch::asm!(
                concat!($ins, " tmm2, tmm5, tmm6"),
                options(nostack, nomem, preserves_flags)
            ),
            (2, 5, 7) => std::arch::asm!(
                concat!($ins, " tmm2, tmm5, tmm7"),
                options(nostack, nomem, preserves_flags)
            ),
            (3, 4, 6) => std::arch::asm!(
                concat!($ins, " tmm3, tmm4, tmm6"),
                options(nostack, nomem, preserves_flags)
            ),
            (3, 4, 7) => std::arch::asm!(
                concat!($ins, " tmm3, tmm4, tmm7"),
                options(nostack, nomem, preserves_flags)
            ),
            (3, 5, 6) => std::arch::asm!(
                concat!($ins, " tmm3, tmm5, tmm6"),
                options(nostack, nomem, preserves_flags)
            ),
            (3, 5, 7) => std::arch::asm!(
                concat!($ins, " tmm3, tmm5, tmm7"),
                options(nostack, nomem, preserves_flags)
            ),
            _ => panic!("tile index out of its role"),
        }
    };
}

impl TileUnit for HwTiles {
    #[inline(always)]
    fn zero<const C: u8>(&mut self) {
        // SAFETY: configured on this thread (invariant); no memory access.
        unsafe {
            match C {
                0 => std::arch::asm!("tilezero tmm0", options(nostack, nomem, preserves_flags)),
                1 => std::arch::asm!("tilezero tmm1", options(nostack, nomem, preserves_flags)),
                2 => std::arch::asm!("tilezero tmm2", options(nostack, nomem, preserves_flags)),
                3 => std::arch::asm!("tilezero tmm3", options(nostack, nomem, preserves_flags)),
                _ => panic!("not a C tile"),
            }
        }
    }
    #[inline(always)]
    unsafe fn load<const T: u8>(&mut self, p: *const u8, stride: usize) {
        // SAFETY: configured (invariant); the tile's rows are readable (caller).
        unsafe {
            match T {
                4 => {
                    std::arch::asm!("tileloadd tmm4, [{0} + {1}*1]", in(reg) p, in(reg) stride, options(nostack, readonly, preserves_flags))
                }
                5 => {
                    std::arch::asm!("tileloadd tmm5, [{0} + {1}*1]", in(reg) p, in(reg) stride, options(nostack, readonly, preserves_flags))
                }
                6 => {
                    std::arch::asm!("tileloadd tmm6, [{0} + {1}*1]", in(reg) p, in(reg) stride, options(nostack, readonly, preserves_flags))
                }
                7 => {
                    std::arch::asm!("tileloadd tmm7, [{0} + {1}*1]", in(reg) p, in(reg) stride, options(nostack, readonly, preserves_flags))
                }
                _ => panic!("not an A or B tile"),
            }
        }
    }
    #[inline(always)]
    fn dot_su<const C: u8, const A: u8, const B: u8>(&mut self) {
        // SAFETY: configured with compatible shapes (Config::new); registers only.
        unsafe { tile_dot!("tdpbsud", (C, A, B)) }
    }
    #[inline(always)]
    fn dot_ss<const C: u8, const A: u8, const B: u8>(&mut self) {
        // SAFETY: as in dot_su.
        unsafe { tile_dot!("tdpbssd", (C, A, B)) }
    }
    #[inline(always)]
    fn store<const C: u8>(&mut self, out: &mut CBuf) {
        // SAFETY: configured (invariant); writes at most 16 rows of 64 bytes into `out`.
        unsafe {
            match C {
                0 => {
                    std::arch::asm!("tilestored [{0} + {1}*1], tmm0", in(reg) out.0.as_mut_ptr(), in(reg) 64usize, options(nostack, preserves_flags))
                }
                1 => {
                    std::arch::asm!("tilestored [{0} + {1}*1], tmm1", in(reg) out.0.as_mut_ptr(), in(reg) 64usize, options(nostack, preserves_flags))
                }
                2 => {
                    std::arch::asm!("tilestored [{0} + {1}*1], tmm2", in(reg) out.0.as_mut_ptr(), in(reg) 64usize, options(nostack, preserves_flags))
                }
                3 => {
                    std::arch::asm!("tilestored [{0} + {1}*1], tmm3", in(reg) out.0.as_mut_ptr(), in(reg) 64usize, options(nostack, preserves_flags))
                }
                _ => panic!("not a C tile"),
            }
        }
    }
}

/// The tile operations computed by plain code, exactly as `TDPBSUD` / `TDPBSSD` define them.
#[cfg(test)]
#[derive(Clone)]
pub(crate) struct SoftTiles {
    m: usize,
    k: usize,
    /// tmm4..tmm7 (`A` and `B` tiles) as rows of bytes.
    ab: [[[u8; 64]; M]; 4],
    /// tmm0..tmm3.
    c: [[[i32; 16]; M]; 4],
}

#[cfg(test)]
impl SoftTiles {
    /// As [`HwTiles::new`], on any CPU.
    pub(crate) fn new(m: usize, k: usize) -> SoftTiles {
        let _ = Config::new(m, k);
        SoftTiles {
            m,
            k,
            ab: [[[0; 64]; M]; 4],
            c: [[[0; 16]; M]; 4],
        }
    }

    fn dot_any<const C: u8, const A: u8, const B: u8>(&mut self, signed_b: bool) {
        assert!(C < 4 && (4..6).contains(&A) && (6..8).contains(&B));
        let (a, b) = (self.ab[A as usize - 4], self.ab[B as usize - 4]);
        let c = &mut self.c[C as usize];
        for i in 0..self.m {
            for n in 0..16 {
                let mut s = c[i][n];
                for j in 0..self.k / 4 {
                    for q in 0..4 {
                        let x = a[i][4 * j + q] as i8 as i32;
                        let w = b[j][4 * n + q];
                        let w = if signed_b { w as i8 as i32 } else { w as i32 };
                        s = s.wrapping_add(x * w);
                    }
                }
                c[i][n] = s;
            }
        }
    }
}

#[cfg(test)]
impl TileUnit for SoftTiles {
    fn zero<const C: u8>(&mut self) {
        self.c[C as usize] = [[0; 16]; M];
    }
    unsafe fn load<const T: u8>(&mut self, p: *const u8, stride: usize) {
        assert!((4..8).contains(&T));
        let (rows, cols) = if T < 6 {
            (self.m, self.k)
        } else {
            (self.k / 4, 64)
        };
        for i in 0..rows {
            // SAFETY: readable (caller).
            let row = unsafe { std::slice::from_raw_parts(p.add(i * stride), cols) };
            self.ab[T as usize - 4][i][..cols].copy_from_slice(row);
        }
    }
    fn dot_su<const C: u8, const A: u8, const B: u8>(&mut self) {
        self.dot_any::<C, A, B>(false)
    }
    fn dot_ss<const C: u8, const A: u8, const B: u8>(&mut self) {
        self.dot_any::<C, A, B>(true)
    }
    fn store<const C: u8>(&mut self, out: &mut CBuf) {
        out.0[..self.m].copy_from_slice(&self.c[C as usize][..self.m]);
    }
}

/// Runs `iters` iterations of four independent 16 × 16 × 64 `TDPBSSD` products (tmm4..tmm7 +=
/// tmm0·tmm1, tmm0·tmm2, tmm3·tmm1, tmm3·tmm2) and returns the int8 multiply-adds done; `None`
/// where the process has no tile permission. Measures the tile peak (the bench times it).
/// Panics while this thread holds an [`HwTiles`] (it reconfigures the tiles).
pub fn peak_loop(iters: u64) -> Option<u64> {
    if !crate::simd::amx_usable() {
        return None;
    }
    assert!(
        !HELD.with(|h| h.get()),
        "peak_loop while this thread holds an HwTiles"
    );
    {
        let mut c = [0u8; 64];
        c[0] = 1;
        for i in 0..8 {
            c[16 + 2 * i..18 + 2 * i].copy_from_slice(&64u16.to_le_bytes());
            c[48 + i] = 16;
        }
        let cfg = Config(c);
        let data = CBuf::default();
        // SAFETY: permission granted (checked above); a valid palette-1 configuration of
        // eight 16 × 64 tiles; the loads read the 1 KiB of `data`; released before returning.
        unsafe {
            std::arch::asm!("ldtilecfg [{0}]", in(reg) cfg.0.as_ptr(), options(nostack, readonly));
            let p = data.0.as_ptr();
            std::arch::asm!(
                "tileloadd tmm0, [{p} + {s}*1]",
                "tileloadd tmm1, [{p} + {s}*1]",
                "tileloadd tmm2, [{p} + {s}*1]",
                "tileloadd tmm3, [{p} + {s}*1]",
                "tilezero tmm4", "tilezero tmm5", "tilezero tmm6", "tilezero tmm7",
                "2:",
                "tdpbssd tmm4, tmm0, tmm1",
                "tdpbssd tmm5, tmm0, tmm2",
                "tdpbssd tmm6, tmm3, tmm1",
                "tdpbssd tmm7, tmm3, tmm2",
                "dec {n}",
                "jnz 2b",
                "tilerelease",
                p = in(reg) p, s = in(reg) 64usize, n = inout(reg) iters.max(1) => _,
                options(nostack, readonly),
            );
        }
        Some(iters.max(1) * 4 * 16 * 16 * 64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A: 3 × 8 signed bytes, B: 2 rows; C computed by hand from the definition.
    #[test]
    fn the_software_model_is_the_documented_signed_by_unsigned_product() {
        let mut t = SoftTiles::new(3, 8);
        let a: Vec<u8> = (0..24).map(|i| (i as i8 - 12) as u8).collect();
        let b: Vec<u8> = (0..128).map(|i| (i * 7 % 256) as u8).collect();
        let mut out = CBuf::default();
        t.zero::<C0>();
        // SAFETY: 3 rows of 8 bytes at stride 8; 2 rows of 64 bytes.
        unsafe {
            t.load::<A0>(a.as_ptr(), 8);
            t.load::<B0>(b.as_ptr(), 64);
        }
        t.dot_su::<C0, A0, B0>();
        t.dot_su::<C0, A0, B0>();
        t.store::<C0>(&mut out);
        for i in 0..3 {
            for n in 0..16 {
                let want: i32 = (0..8)
                    .map(|e| (a[8 * i + e] as i8 as i32) * b[64 * (e / 4) + 4 * n + e % 4] as i32)
                    .sum();
                assert_eq!(out.0[i][n], 2 * want, "C[{i}][{n}]");
            }
        }
        assert_eq!(out.0[3], [0; 16], "rows past m are not written");
    }

    #[test]
    fn hardware_tiles_agree_with_the_model_where_granted() {
        let Some(mut hw) = HwTiles::new(M, 32) else {
            eprintln!("skipped: this CPU/kernel does not grant AMX tiles (simd::amx_usable)");
            return;
        };
        let mut sw = SoftTiles::new(M, 32);
        let a: Vec<u8> = (0..M * 40).map(|i| (i * 37 % 256) as u8).collect();
        let b: Vec<u8> = (0..8 * 64).map(|i| (i * 91 % 256) as u8).collect();
        fn run<U: TileUnit>(t: &mut U, a: &[u8], b: &[u8]) -> (CBuf, CBuf) {
            let (mut su, mut ss) = (CBuf::default(), CBuf::default());
            t.zero::<C0>();
            t.zero::<C3>();
            // SAFETY: 16 rows of 32 bytes at stride 40 inside `a`; 8 rows of 64 in `b`.
            unsafe {
                t.load::<A1>(a.as_ptr(), 40);
                t.load::<B1>(b.as_ptr(), 64);
            }
            t.dot_su::<C0, A1, B1>();
            t.dot_ss::<C3, A1, B1>();
            t.store::<C0>(&mut su);
            t.store::<C3>(&mut ss);
            (su, ss)
        }
        let (x, xs) = run(&mut hw, &a, &b);
        let (y, ys) = run(&mut sw, &a, &b);
        assert_eq!(xs.0, ys.0, "signed x signed");
        assert_ne!(xs.0, x.0, "the two products differ on these bytes");
        assert_eq!(x.0, y.0);
        drop(hw);
        assert!(peak_loop(10).is_some());
        let again = HwTiles::new(M, 16).expect("released: a new one configures");
        drop(again);
    }
}
