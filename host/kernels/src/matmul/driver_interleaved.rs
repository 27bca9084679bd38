//! Work splitting for matmuls over [`Interleaved`] weights: each activation block's `-K·Σx` and
//! scale computed once per matmul, then pool tasks over row groups, each group's blocks reused
//! (from L1) across up to `TOKEN_TILE` tokens per kernel call and `TOKEN_BLOCK` per pass.
//!
//! Invariant: tasks write disjoint 16-row spans of `out`; a (row, token) result never depends
//! on the tile it was computed in ([`crate::dot::avx2::interleaved`]).

use half::f16;

use super::{Interleaved, QuantizedActivations, interleave::GROUP};
use crate::dot::avx2::interleaved::{XInfo, group};
use crate::types::GgmlType;

/// Tokens per kernel call (8 accumulators + 8 weight vectors stay in registers).
const TOKEN_TILE: usize = 8;
/// Tokens per pass over a task's groups (bounds the activation working set).
const TOKEN_BLOCK: usize = 64;

thread_local! {
    static INFO: std::cell::RefCell<Vec<XInfo>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A raw pointer to `out` that tasks may share because they write disjoint spans.
#[derive(Clone, Copy)]
struct OutPtr(*mut f32);
// SAFETY: only used to write disjoint 16-row spans from different tasks (see `run`).
unsafe impl Send for OutPtr {}
// SAFETY: as above.
unsafe impl Sync for OutPtr {}

impl OutPtr {
    /// `self + i` (a method, so closures capture the whole `Sync` wrapper).
    ///
    /// # Safety
    /// `i` inside `out`.
    unsafe fn add(self, i: usize) -> *mut f32 {
        // SAFETY: the caller's contract.
        unsafe { self.0.add(i) }
    }
}

/// Fills `out` (`[n, rows]`, checked by the caller) from interleaved weights.
///
/// The caller has checked that the process uses interleaved kernels
/// ([`Interleaved::in_use`]) and that `xq` holds rows of `iw.cols()` elements of the weight
/// type's `vec_dot_type`.
pub(super) fn run(iw: &Interleaved, xq: &QuantizedActivations, out: &mut [f32]) {
    let (rows, n, nb) = (iw.rows(), xq.n(), iw.cols() / 32);
    if rows == 0 || n == 0 {
        return;
    }
    // The levels' offset K per format, and the activation block's size (Q8_1 for Q4_1).
    let (k, xb) = match iw.ty() {
        GgmlType::Q8_0 => (128, 34),
        GgmlType::Q5_0 => (16, 34),
        GgmlType::Q4_1 => (0, 36),
        _ => (8, 34),
    };
    let q_off = xb - 32;
    let mut info = INFO.with(std::cell::RefCell::take);
    info.clear();
    info.resize(n * nb, XInfo::default());
    for (t, dst) in info.chunks_exact_mut(nb).enumerate() {
        for (blk, slot) in xq.row(t).chunks_exact(xb).zip(dst.iter_mut()) {
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
    let ty = iw.ty();
    crate::threads::for_each(tasks, |task| {
        let g0 = task * per_task;
        let g1 = (g0 + per_task).min(groups);
        let (xb, ib) = (xb as *const u8, ib as *const XInfo);
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
                            // features; pointers as above, group g has nb blocks of `ty`.
                            unsafe { group::<$c>(ty, wp, nb, x, inf, o) }
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
    INFO.with(|s| *s.borrow_mut() = info);
}
