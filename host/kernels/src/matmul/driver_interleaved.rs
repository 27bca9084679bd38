//! Work splitting for matmuls over [`Interleaved`] weights: each activation block's facts (its
//! `-K·Σx` and scale; the K-quants: scale and sub-block sums) computed once per matmul, then pool tasks over row groups, each group's blocks reused
//! (from L1) across up to `TOKEN_TILE` tokens per kernel call and `TOKEN_BLOCK` per pass.
//!
//! Invariant: tasks write disjoint 16-row spans of `out`; a (row, token) result never depends
//! on the tile it was computed in ([`crate::dot::avx2::interleaved`]).

use half::f16;

use super::{Interleaved, QuantizedActivations, interleave::GROUP};
use crate::dot::avx2::interleaved::{XInfo, group};
use crate::dot::avx2::interleaved_avx2::group_avx2;
use crate::dot::avx2::interleaved_avx2_k::group_k4_avx2;
use crate::dot::avx2::interleaved_avx2_k16::{group_iq4xs_avx2, group_k16_avx2};
use crate::dot::avx2::interleaved_iq4xs::{self, XsInfo, group_iq4xs};
use crate::dot::avx2::interleaved_k::{self, KInfo, Q6Info, group_q4k, group_q5k, group_q6k};
use crate::dot::avx2::interleaved_k_low::{group_q2k, group_q3k};
use crate::types::GgmlType;

/// Tokens per kernel call (8 accumulators + 8 weight vectors stay in registers).
pub(super) const TOKEN_TILE: usize = 8;
/// Tokens per pass over a task's groups (bounds the activation working set).
pub(super) const TOKEN_BLOCK: usize = 64;

thread_local! {
    static INFO: std::cell::RefCell<Vec<XInfo>> = const { std::cell::RefCell::new(Vec::new()) };
    static K_INFO: std::cell::RefCell<Vec<KInfo>> = const { std::cell::RefCell::new(Vec::new()) };
    static Q6_INFO: std::cell::RefCell<Vec<Q6Info>> = const { std::cell::RefCell::new(Vec::new()) };
    static XS_INFO: std::cell::RefCell<Vec<XsInfo>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A raw pointer to `out` that tasks may share because they write disjoint spans.
#[derive(Clone, Copy)]
pub(super) struct OutPtr(pub(super) *mut f32);
// SAFETY: only used to write disjoint 16-row spans from different tasks (see `run`).
unsafe impl Send for OutPtr {}
// SAFETY: as above.
unsafe impl Sync for OutPtr {}

impl OutPtr {
    /// `self + i` (a method, so closures capture the whole `Sync` wrapper).
    ///
    /// # Safety
    /// `i` inside `out`.
    pub(super) unsafe fn add(self, i: usize) -> *mut f32 {
        // SAFETY: the caller's contract.
        unsafe { self.0.add(i) }
    }
}

/// The per-format halves of an interleaved matmul: the per-(token, block) activation facts and
/// the group kernel.
pub(super) trait GroupKernel: Sync {
    type Info: Copy + Default + Send + Sync;
    /// The infos of one activation row (`dst.len()` blocks).
    fn infos(&self, row: &[u8], dst: &mut [Self::Info]);
    /// One group × `T` tokens.
    ///
    /// # Safety
    /// The kernel's contract ([`group`], [`group_q4k`]).
    unsafe fn call<const T: usize>(
        &self,
        w: *const u8,
        nb: usize,
        x: [*const u8; T],
        info: [*const Self::Info; T],
        out: [*mut f32; T],
    );
}

/// Q4_0, Q8_0, Q5_0, Q4_1, Q5_1, IQ4_NL, MXFP4: 32-element blocks against Q8_0 / Q8_1.
pub(super) struct Block32(pub(super) GgmlType);

impl GroupKernel for Block32 {
    type Info = XInfo;
    fn infos(&self, row: &[u8], dst: &mut [XInfo]) {
        // The levels' offset K per format, and the activation block's size (Q8_1 for Q4_1).
        let (k, xb) = match self.0 {
            GgmlType::Q8_0 | GgmlType::IQ4NL | GgmlType::Mxfp4 => (128, 34),
            GgmlType::Q5_0 => (16, 34),
            GgmlType::Q4_1 | GgmlType::Q5_1 => (0, 36),
            _ => (8, 34),
        };
        let q_off = xb - 32;
        for (blk, slot) in row.chunks_exact(xb).zip(dst.iter_mut()) {
            let sum: i32 = blk[q_off..].iter().map(|&v| v as i8 as i32).sum();
            *slot = XInfo {
                base: -k * sum,
                dx: f16::from_le_bytes([blk[0], blk[1]]).to_f32(),
                sx: if xb == 36 {
                    f16::from_le_bytes([blk[2], blk[3]]).to_f32()
                } else {
                    0.0
                },
            };
        }
    }
    unsafe fn call<const T: usize>(
        &self,
        w: *const u8,
        nb: usize,
        x: [*const u8; T],
        info: [*const XInfo; T],
        out: [*mut f32; T],
    ) {
        // SAFETY: forwarded; the AVX2 kernel needs only what every interleaved process has.
        unsafe {
            if Interleaved::wide() {
                group::<T>(self.0, w, nb, x, info, out)
            } else {
                group_avx2::<T>(self.0, w, nb, x, info, out)
            }
        }
    }
}

/// Q4_K or Q5_K (`true`): 256-element super-blocks against Q8_K.
pub(super) struct SuperBlockQ4K(pub(super) bool);

impl GroupKernel for SuperBlockQ4K {
    type Info = KInfo;
    fn infos(&self, row: &[u8], dst: &mut [KInfo]) {
        interleaved_k::infos(row, dst)
    }
    unsafe fn call<const T: usize>(
        &self,
        w: *const u8,
        nb: usize,
        x: [*const u8; T],
        info: [*const KInfo; T],
        out: [*mut f32; T],
    ) {
        // SAFETY: forwarded; the AVX2 kernel needs only what every interleaved process has.
        unsafe {
            if !Interleaved::wide() {
                group_k4_avx2::<T>(self.0, w, nb, x, info, out)
            } else if self.0 {
                group_q5k::<T>(w, nb, x, info, out)
            } else {
                group_q4k::<T>(w, nb, x, info, out)
            }
        }
    }
}

/// Q6_K, Q3_K or Q2_K: 256-element super-blocks of 16-element sub-blocks against Q8_K.
pub(super) struct SuperBlock16(pub(super) GgmlType);

impl GroupKernel for SuperBlock16 {
    type Info = Q6Info;
    fn infos(&self, row: &[u8], dst: &mut [Q6Info]) {
        let k = match self.0 {
            GgmlType::Q3K => 4,
            GgmlType::Q2K => -1,
            _ => 32,
        };
        interleaved_k::sub16_infos(row, dst, k)
    }
    unsafe fn call<const T: usize>(
        &self,
        w: *const u8,
        nb: usize,
        x: [*const u8; T],
        info: [*const Q6Info; T],
        out: [*mut f32; T],
    ) {
        // SAFETY: forwarded; the AVX2 kernel needs only what every interleaved process has.
        unsafe {
            match self.0 {
                _ if !Interleaved::wide() => group_k16_avx2::<T>(self.0, w, nb, x, info, out),
                GgmlType::Q3K => group_q3k::<T>(w, nb, x, info, out),
                GgmlType::Q2K => group_q2k::<T>(w, nb, x, info, out),
                _ => group_q6k::<T>(w, nb, x, info, out),
            }
        }
    }
}

/// IQ4_XS: 256-element super-blocks against Q8_K.
pub(super) struct SuperBlockIq4Xs;

impl GroupKernel for SuperBlockIq4Xs {
    type Info = XsInfo;
    fn infos(&self, row: &[u8], dst: &mut [XsInfo]) {
        interleaved_iq4xs::infos(row, dst)
    }
    unsafe fn call<const T: usize>(
        &self,
        w: *const u8,
        nb: usize,
        x: [*const u8; T],
        info: [*const XsInfo; T],
        out: [*mut f32; T],
    ) {
        // SAFETY: forwarded; the AVX2 kernel needs only what every interleaved process has.
        unsafe {
            if Interleaved::wide() {
                group_iq4xs::<T>(w, nb, x, info, out)
            } else {
                group_iq4xs_avx2::<T>(w, nb, x, info, out)
            }
        }
    }
}

/// Fills `out` (`[n, rows]`, checked by the caller) from interleaved weights.
///
/// The caller has checked that the process uses interleaved kernels
/// ([`Interleaved::in_use`]) and that `xq` holds rows of `iw.cols()` elements of the weight
/// type's `vec_dot_type`.
pub(super) fn run(iw: &Interleaved, xq: &QuantizedActivations, out: &mut [f32]) {
    if matches!(iw.ty(), GgmlType::Q4K | GgmlType::Q5K) {
        let mut info = K_INFO.with(std::cell::RefCell::take);
        let kernel = SuperBlockQ4K(iw.ty() == GgmlType::Q5K);
        if tiles_for(xq) {
            super::driver_amx::run_tiles(&kernel, iw, xq, out, &mut info, hw_tiles);
        } else {
            run_with(&kernel, iw, xq, out, &mut info);
        }
        K_INFO.with(|s| *s.borrow_mut() = info);
    } else if iw.ty() == GgmlType::IQ4XS {
        let mut info = XS_INFO.with(std::cell::RefCell::take);
        if tiles_for(xq) {
            super::driver_amx::run_tiles(&SuperBlockIq4Xs, iw, xq, out, &mut info, hw_tiles);
        } else {
            run_with(&SuperBlockIq4Xs, iw, xq, out, &mut info);
        }
        XS_INFO.with(|s| *s.borrow_mut() = info);
    } else if matches!(iw.ty(), GgmlType::Q6K | GgmlType::Q3K | GgmlType::Q2K) {
        let mut info = Q6_INFO.with(std::cell::RefCell::take);
        let kernel = SuperBlock16(iw.ty());
        if tiles_for(xq) && crate::simd::amx_all() {
            super::driver_amx::run_tiles(&kernel, iw, xq, out, &mut info, hw_tiles);
        } else {
            run_with(&kernel, iw, xq, out, &mut info);
        }
        Q6_INFO.with(|s| *s.borrow_mut() = info);
    } else {
        let mut info = INFO.with(std::cell::RefCell::take);
        if tiles_for(xq) {
            super::driver_amx::run_tiles(&Block32(iw.ty()), iw, xq, out, &mut info, hw_tiles);
        } else {
            run_with(&Block32(iw.ty()), iw, xq, out, &mut info);
        }
        INFO.with(|s| *s.borrow_mut() = info);
    }
}

/// Whether this matmul runs on AMX tiles ([`crate::simd::amx`]; a single token never does).
fn tiles_for(xq: &QuantizedActivations) -> bool {
    xq.n() >= super::driver_amx::PARTIAL_MIN && crate::simd::amx()
}

/// This thread's tiles, configured for `A` = `m` tokens × `k` bytes.
fn hw_tiles(m: usize, k: usize) -> crate::amx::HwTiles {
    crate::amx::HwTiles::new(m, k).expect("simd::amx holds: the process has tiles")
}

/// [`run`] with the format's kernel and an info buffer to reuse.
fn run_with<K: GroupKernel>(
    kernel: &K,
    iw: &Interleaved,
    xq: &QuantizedActivations,
    out: &mut [f32],
    info: &mut Vec<K::Info>,
) {
    let (rows, n, nb) = (iw.rows(), xq.n(), iw.blocks());
    if rows == 0 || n == 0 {
        return;
    }
    info.clear();
    info.resize(n * nb, K::Info::default());
    for (t, dst) in info.chunks_exact_mut(nb).enumerate() {
        kernel.infos(xq.row(t), dst);
    }
    let groups = rows / GROUP;
    let threads = crate::threads::current_threads().max(1);
    let per_task = groups.div_ceil(threads * 4).max(1);
    let tasks = groups.div_ceil(per_task);
    let ptr = OutPtr(out.as_mut_ptr());
    let (xb, xrb, ib) = (
        xq.bytes().as_ptr() as usize,
        xq.row_bytes(),
        info.as_ptr() as usize,
    );
    crate::threads::for_each(tasks, |task| {
        let g0 = task * per_task;
        let g1 = (g0 + per_task).min(groups);
        let (xb, ib) = (xb as *const u8, ib as *const K::Info);
        for tb in (0..n).step_by(TOKEN_BLOCK) {
            let tb_end = (tb + TOKEN_BLOCK).min(n);
            for g in g0..g1 {
                let wp = iw.group_ptr(g);
                let mut t0 = tb;
                while t0 < tb_end {
                    let c = (tb_end - t0).min(TOKEN_TILE);
                    // SAFETY: t0 + i < n: row t0 + i of xq (nb blocks), its nb infos, and the
                    // 16 outputs of group g in token row t0 + i, written only by this task.
                    let xp = |i: usize| unsafe { xb.add((t0 + i) * xrb) };
                    let ip = |i: usize| unsafe { ib.add((t0 + i) * nb) };
                    let op = |i: usize| unsafe { ptr.add((t0 + i) * rows + g * GROUP) };
                    macro_rules! call {
                        ($c:literal) => {{
                            let x = std::array::from_fn(xp);
                            let inf = std::array::from_fn(ip);
                            let o = std::array::from_fn(op);
                            // SAFETY: interleaved kernels in use (caller): the CPU has the
                            // features; pointers as above, group g has nb blocks of its type.
                            unsafe { kernel.call::<$c>(wp, nb, x, inf, o) }
                        }};
                    }
                    match c {
                        1 => call!(1),
                        2 => call!(2),
                        3 => call!(3),
                        4 => call!(4),
                        5 => call!(5),
                        6 => call!(6),
                        7 => call!(7),
                        _ => call!(8),
                    }
                    t0 += c;
                }
            }
        }
    });
}
