//! Intel AMX int8 tiles behind a small safe wrapper ([`HwTiles`]), and a software model of the
//! same operations ([`SoftTiles`]) that lets the tile GEMM's layout and arithmetic be checked
//! on CPUs without tiles.
//!
//! A [`TileUnit`] holds three tiles: `A` (`m` × `k` signed bytes, the activations), `B` (`k/4`
//! rows of 64 unsigned bytes, VNNI order: row `j`, bytes `4n..4n + 4` are column `n`'s
//! elements `4j..4j + 4`) and `C` (`m` × 16 i32). `dot` is `TDPBSUD`:
//! `C[i][n] += Σ_j Σ_q A[i][4j + q] · B[j][4n + q]` (signed × unsigned, i32 wrapping) — the sums
//! `vpdpbusd` forms in [`crate::dot::avx2::interleaved`], exact for every block format here.
//!
//! SAFETY (the one place the tile instructions' contract is argued):
//! - Tile data may only be touched after Linux granted XTILEDATA to the process
//!   (`arch_prctl(ARCH_REQ_XCOMP_PERM)`, per process, inherited by every thread): otherwise the
//!   first tile instruction is refused with SIGILL. [`HwTiles::new`] exists only when
//!   [`crate::simd::amx_usable`] saw the grant, so that holds for every thread of the process.
//! - Every tile instruction needs a valid tile configuration on *this* thread (it is per-thread
//!   register state): [`HwTiles::new`] loads one with `ldtilecfg` (palette 1, shapes within
//!   16 rows × 64 bytes, `A.colsb = 4·B.rows`, `C` as `A.rows` × 64) and the type is neither
//!   `Send` nor `Sync`, so every later instruction runs on the configuring thread; `Drop`
//!   runs `tilerelease` (returns the tile state to its init state, so context switches stay
//!   cheap). One [`HwTiles`] at a time per thread (a second would reconfigure the first's
//!   tiles under it, and its loads would read other shapes): `new` panics while one is held
//!   (`HELD`); the kernels create one per task and keep it local.
//! - Loads and stores touch exactly `rows` × `colsb` bytes at `base + i·stride`: the callers
//!   of [`TileUnit::load_a`] / [`TileUnit::load_b`] promise those are readable; the store
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

/// The tile operations of the GEMM (see the module doc for the shapes).
pub(crate) trait TileUnit {
    /// `C = 0`.
    fn zero_c(&mut self);
    /// Loads `A`: `m` rows of `k` bytes, row `i` at `a + i·stride`.
    ///
    /// # Safety
    /// Those `m · k` bytes are readable.
    unsafe fn load_a(&mut self, a: *const u8, stride: usize);
    /// Loads `B`: `k/4` rows of 64 bytes, row `j` at `b + 64·j`.
    ///
    /// # Safety
    /// Those bytes are readable.
    unsafe fn load_b(&mut self, b: *const u8);
    /// `C += A · B` (signed × unsigned bytes, `TDPBSUD`).
    fn dot(&mut self);
    /// Stores `C` into `out` (its first `m` rows).
    fn store_c(&mut self, out: &mut CBuf);
}

/// The 64-byte `ldtilecfg` operand: palette 1, tmm0 = `C` (`m` × 64 bytes), tmm1 = `A`
/// (`m` × `k`), tmm2 = `B` (`k/4` × 64).
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
        let colsb = [64u16, k as u16, 64];
        let rows = [m as u8, m as u8, (k / 4) as u8];
        for i in 0..3 {
            c[16 + 2 * i..18 + 2 * i].copy_from_slice(&colsb[i].to_le_bytes());
            c[48 + i] = rows[i];
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

impl TileUnit for HwTiles {
    #[inline(always)]
    fn zero_c(&mut self) {
        // SAFETY: configured on this thread (invariant); no memory access.
        unsafe { std::arch::asm!("tilezero tmm0", options(nostack, nomem, preserves_flags)) }
    }
    #[inline(always)]
    unsafe fn load_a(&mut self, a: *const u8, stride: usize) {
        // SAFETY: configured (invariant); the m × k bytes are readable (caller).
        unsafe {
            std::arch::asm!("tileloadd tmm1, [{0} + {1}*1]", in(reg) a, in(reg) stride,
                options(nostack, readonly, preserves_flags));
        }
    }
    #[inline(always)]
    unsafe fn load_b(&mut self, b: *const u8) {
        // SAFETY: configured (invariant); the k/4 rows of 64 bytes are readable (caller).
        unsafe {
            std::arch::asm!("tileloadd tmm2, [{0} + {1}*1]", in(reg) b, in(reg) 64usize,
                options(nostack, readonly, preserves_flags));
        }
    }
    #[inline(always)]
    fn dot(&mut self) {
        // SAFETY: configured with compatible shapes (Config::new); registers only.
        unsafe {
            std::arch::asm!(
                "tdpbsud tmm0, tmm1, tmm2",
                options(nostack, nomem, preserves_flags)
            )
        }
    }
    #[inline(always)]
    fn store_c(&mut self, out: &mut CBuf) {
        // SAFETY: configured (invariant); writes at most 16 rows of 64 bytes into `out`.
        unsafe {
            std::arch::asm!("tilestored [{0} + {1}*1], tmm0", in(reg) out.0.as_mut_ptr(),
                in(reg) 64usize, options(nostack, preserves_flags));
        }
    }
}

/// The tile operations computed by plain code, exactly as `TDPBSUD` defines them.
#[cfg(test)]
#[derive(Clone)]
pub(crate) struct SoftTiles {
    m: usize,
    k: usize,
    a: [[u8; 64]; M],
    b: [[u8; 64]; M],
    c: [[i32; 16]; M],
}

#[cfg(test)]
impl SoftTiles {
    /// As [`HwTiles::new`], on any CPU.
    pub(crate) fn new(m: usize, k: usize) -> SoftTiles {
        let _ = Config::new(m, k);
        SoftTiles {
            m,
            k,
            a: [[0; 64]; M],
            b: [[0; 64]; M],
            c: [[0; 16]; M],
        }
    }
}

#[cfg(test)]
impl TileUnit for SoftTiles {
    fn zero_c(&mut self) {
        self.c = [[0; 16]; M];
    }
    unsafe fn load_a(&mut self, a: *const u8, stride: usize) {
        for i in 0..self.m {
            // SAFETY: readable (caller).
            let row = unsafe { std::slice::from_raw_parts(a.add(i * stride), self.k) };
            self.a[i][..self.k].copy_from_slice(row);
        }
    }
    unsafe fn load_b(&mut self, b: *const u8) {
        for j in 0..self.k / 4 {
            // SAFETY: readable (caller).
            let row = unsafe { std::slice::from_raw_parts(b.add(64 * j), 64) };
            self.b[j].copy_from_slice(row);
        }
    }
    fn dot(&mut self) {
        for i in 0..self.m {
            for n in 0..16 {
                let mut s = self.c[i][n];
                for j in 0..self.k / 4 {
                    for q in 0..4 {
                        let a = self.a[i][4 * j + q] as i8 as i32;
                        let b = self.b[j][4 * n + q] as i32;
                        s = s.wrapping_add(a * b);
                    }
                }
                self.c[i][n] = s;
            }
        }
    }
    fn store_c(&mut self, out: &mut CBuf) {
        out.0[..self.m].copy_from_slice(&self.c[..self.m]);
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
        t.zero_c();
        // SAFETY: 3 rows of 8 bytes at stride 8; 2 rows of 64 bytes.
        unsafe {
            t.load_a(a.as_ptr(), 8);
            t.load_b(b.as_ptr());
        }
        t.dot();
        t.dot();
        t.store_c(&mut out);
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
        let (mut x, mut y) = (CBuf::default(), CBuf::default());
        for t in [&mut hw as &mut dyn TileUnit, &mut sw] {
            t.zero_c();
            // SAFETY: 16 rows of 32 bytes at stride 40 inside `a`; 8 rows of 64 in `b`.
            unsafe {
                t.load_a(a.as_ptr(), 40);
                t.load_b(b.as_ptr());
            }
            t.dot();
        }
        hw.store_c(&mut x);
        sw.store_c(&mut y);
        assert_eq!(x.0, y.0);
        drop(hw);
        assert!(peak_loop(10).is_some());
        let again = HwTiles::new(M, 16).expect("released: a new one configures");
        drop(again);
    }
}
