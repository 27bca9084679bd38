//! Work splitting for matmul: row ranges per pool task ([`crate::threads`]), a few weight
//! rows × up to `TOKEN_TILE` tokens per kernel call, the weight tile reused (from L1) across
//! all token tiles.
//!
//! Invariant: tasks write disjoint `(t, r)` entries of `out`; row tiles cut short by the range end
//! repeat the last row pointer (extra results discarded), so the per-pair arithmetic never
//! depends on tile edges.

use super::{QuantizedActivations, WeightMatrix};
use crate::dot::vec_dot_scalar;
use crate::simd::{self, SimdLevel};
#[cfg(target_arch = "x86_64")]
use crate::types::GgmlType;

/// Weight rows per kernel call for batches (n > 1): `ROW_TILE_WIDE` for the 32-element int8
/// formats (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q8_1, IQ4_NL, MXFP4), `ROW_TILE`
/// for the others (measured on AVX2: 16 accumulators spill less than the K-quant tiles do);
/// `ROW_TILE_DECODE` for single tokens (more independent accumulators while streaming).
/// `per_task` is a multiple of all of them.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
const ROW_TILE: usize = 2;
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
const ROW_TILE_WIDE: usize = 4;
const ROW_TILE_DECODE: usize = 8;
/// Tokens per pass over a task's rows (bounds the activation working set).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
const TOKEN_BLOCK: usize = 64;
/// Maximum tokens per kernel call.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
const TOKEN_TILE: usize = 4;

/// A raw pointer to `out` that tasks may share because they write disjoint entries.
#[derive(Clone, Copy)]
struct OutPtr(*mut f32);
// SAFETY: only used to write disjoint (t, r) entries from different tasks (see `run`).
unsafe impl Send for OutPtr {}
// SAFETY: as above; no entry is read or written by two tasks.
unsafe impl Sync for OutPtr {}

/// Fills `out` (`[n, w.rows]`, length checked by the caller).
pub(super) fn run(level: SimdLevel, w: &WeightMatrix, xq: &QuantizedActivations, out: &mut [f32]) {
    let (rows, n) = (w.rows, xq.n());
    if rows == 0 || n == 0 {
        return;
    }
    let threads = crate::threads::current_threads().max(1);
    // ~4 tasks per thread: enough to balance, few enough to keep per-call overhead low.
    // A multiple of every row tile.
    let per_task = rows.div_ceil(threads * 4).next_multiple_of(ROW_TILE_DECODE);
    let tasks = rows.div_ceil(per_task);
    let ptr = OutPtr(out.as_mut_ptr());
    let use_avx2 = level == SimdLevel::Avx2 && simd::detected() == SimdLevel::Avx2;
    // Fixed per process; read once per matmul, not per tile.
    #[cfg(target_arch = "x86_64")]
    let build = crate::dot::avx2::build();
    #[cfg(target_arch = "x86_64")]
    if let Some(iw) = w.interleaved
        && use_avx2
        && super::Interleaved::in_use()
    {
        super::driver_interleaved::run(iw, xq, out);
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if use_avx2 && build == crate::dot::avx2::Build::Avx512 && crate::dot::avx2::wide::packs(w.ty) {
        run_packed(w, xq, per_task, tasks, ptr);
        return;
    }
    crate::threads::for_each(tasks, |task| {
        let r0 = task * per_task;
        let r1 = (r0 + per_task).min(rows);
        if use_avx2 {
            #[cfg(target_arch = "x86_64")]
            match (n, w.ty) {
                (1, _) => run_rows_avx2::<ROW_TILE_DECODE, 1>(w, xq, build, r0, r1, ptr),
                // Int8 formats with cheap per-pair work: more rows per weight decode.
                (
                    _,
                    GgmlType::Q8_0
                    | GgmlType::Q4_0
                    | GgmlType::Q4_1
                    | GgmlType::Q5_0
                    | GgmlType::Q5_1
                    | GgmlType::Q8_1
                    | GgmlType::IQ4NL
                    | GgmlType::Mxfp4,
                ) => run_rows_avx2::<ROW_TILE_WIDE, TOKEN_TILE>(w, xq, build, r0, r1, ptr),
                // Formats with heavier decoded tiles (K-quants, floats): fewer rows, less spill.
                _ => run_rows_avx2::<ROW_TILE, TOKEN_TILE>(w, xq, build, r0, r1, ptr),
            }
        } else {
            run_rows_scalar(w, xq, r0, r1, ptr);
        }
    });
}

fn run_rows_scalar(w: &WeightMatrix, xq: &QuantizedActivations, r0: usize, r1: usize, out: OutPtr) {
    let rows = w.rows;
    for r in r0..r1 {
        let wr = w.row(r);
        for t in 0..xq.n() {
            let v = vec_dot_scalar(w.ty, wr, xq.row(t), w.cols);
            // SAFETY: t < n and r < rows, so the index is inside `out` ([n, rows]); this task
            // is the only writer of rows r0..r1.
            unsafe { *out.0.add(t * rows + r) = v };
        }
    }
}

#[cfg(target_arch = "x86_64")]
fn run_rows_avx2<const RT: usize, const CT: usize>(
    w: &WeightMatrix,
    xq: &QuantizedActivations,
    build: crate::dot::avx2::Build,
    r0: usize,
    r1: usize,
    out: OutPtr,
) {
    use crate::dot::avx2::tile_on;
    use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
    const { assert!(CT >= 1 && CT <= TOKEN_TILE) };
    let (rows, n, cols) = (w.rows, xq.n(), w.cols);
    let (wb, xb) = (w.data.as_ptr(), xq.bytes().as_ptr());
    let (wrb, xrb) = (w.row_bytes(), xq.row_bytes());
    // Token blocks keep the activations of one pass over this task's rows in L2.
    for tb in (0..n).step_by(TOKEN_BLOCK) {
        let tb_end = (tb + TOKEN_BLOCK).min(n);
        for rt in (r0..r1).step_by(RT) {
            let valid = (r1 - rt).min(RT);
            if n <= 2 {
                // Streaming (memory-bound) case: request the next row tile while computing this.
                let next = ((rt + RT).min(r1) * wrb)..((rt + 2 * RT).min(r1) * wrb);
                for off in next.step_by(64) {
                    // SAFETY: off < r1 * wrb <= w.data.len(); prefetching has no other effect.
                    unsafe { _mm_prefetch::<_MM_HINT_T0>(wb.add(off).cast()) };
                }
            }
            // SAFETY: rt + min(i, valid - 1) < r1 <= rows: a whole row inside `w.data`.
            let wp: [*const u8; RT] =
                std::array::from_fn(|i| unsafe { wb.add((rt + i.min(valid - 1)) * wrb) });
            let mut t0 = tb;
            while t0 < tb_end {
                let c = (tb_end - t0).min(CT);
                // SAFETY: t0 + i < n: a whole activation row inside `xq.bytes()`.
                let xp = |i: usize| unsafe { xb.add((t0 + i) * xrb) };
                let mut res = [[0.0f32; TOKEN_TILE]; RT];
                // SAFETY: AVX2/FMA/F16C detected (`use_avx2`), VNNI / AVX-512 only when
                // `simd::vnni()` / `simd::avx512()` confirmed them; pointers cover full rows of `cols`
                // elements of w.ty / its vec_dot_type (validated by WeightMatrix and the caller).
                unsafe {
                    macro_rules! call {
                        ($c:literal) => {{
                            let mut o = [[0.0f32; $c]; RT];
                            let x = std::array::from_fn(xp);
                            tile_on::<RT, $c>(w.ty, build, wp, x, cols, &mut o);
                            for (dst, src) in res.iter_mut().zip(&o) {
                                dst[..$c].copy_from_slice(src);
                            }
                        }};
                    }
                    match c {
                        1 => call!(1),
                        2 => call!(2),
                        3 => call!(3),
                        _ => call!(4),
                    }
                }
                for (i, row) in res.iter().enumerate().take(valid) {
                    for (j, &v) in row.iter().enumerate().take(c) {
                        // SAFETY: t0 + j < n, rt + i < r1 <= rows; only this task writes them.
                        unsafe { *out.0.add((t0 + j) * rows + rt + i) = v };
                    }
                }
                t0 += c;
            }
        }
    }
}

/// Weight rows × tokens per packed 512-bit kernel call for batches (measured: 2×8 beats 4×4
/// and 4×6; activations come from L1 as memory operands, so more tokens per weight decode win).
#[cfg(target_arch = "x86_64")]
const PACKED_ROWS: usize = 2;
#[cfg(target_arch = "x86_64")]
const PACKED_TOKENS: usize = 8;

#[cfg(target_arch = "x86_64")]
thread_local! {
    static PACKED: std::cell::RefCell<Vec<crate::dot::avx2::wide::XPair>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// The 512-bit path: activations packed once ([`crate::dot::avx2::wide::pack_row`],
/// same bits as the unpacked tiles), then row tasks as in [`run`].
#[cfg(target_arch = "x86_64")]
fn run_packed(
    w: &WeightMatrix,
    xq: &QuantizedActivations,
    per_task: usize,
    tasks: usize,
    ptr: OutPtr,
) {
    use crate::dot::avx2::wide::{XPair, pack_row};
    let (n, cols) = (xq.n(), w.cols);
    let pairs = (cols / 32).div_ceil(2);
    let per_task = per_task.next_multiple_of(PACKED_ROWS);
    let mut packed = PACKED.with(std::cell::RefCell::take);
    packed.clear();
    packed.resize(n * pairs, XPair::zeroed());
    let xb = xq.bytes().as_ptr();
    for t in 0..n {
        // SAFETY: avx512 build confirmed by the caller (`Build::Avx512`); row t of xq holds
        // cols elements of the vec_dot_type; slot t * pairs.. has `pairs` entries.
        unsafe {
            pack_row(
                w.ty,
                xb.add(t * xq.row_bytes()),
                cols,
                packed.as_mut_ptr().add(t * pairs),
            )
        };
    }
    let px = PackedPtr(packed.as_ptr());
    crate::threads::for_each(tasks, |task| {
        let r0 = task * per_task;
        let r1 = (r0 + per_task).min(w.rows);
        if r0 < r1 && n == 1 {
            run_rows_packed::<ROW_TILE_DECODE>(w, px, n, pairs, r0, r1, ptr);
        } else if r0 < r1 {
            run_rows_packed::<PACKED_ROWS>(w, px, n, pairs, r0, r1, ptr);
        }
    });
    PACKED.with(|s| *s.borrow_mut() = packed);
}

/// Packed activation rows shared read-only by the tasks.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
struct PackedPtr(*const crate::dot::avx2::wide::XPair);
// SAFETY: read-only while the tasks run (the buffer outlives them).
#[cfg(target_arch = "x86_64")]
unsafe impl Send for PackedPtr {}
// SAFETY: as above.
#[cfg(target_arch = "x86_64")]
unsafe impl Sync for PackedPtr {}

#[cfg(target_arch = "x86_64")]
fn run_rows_packed<const RT: usize>(
    w: &WeightMatrix,
    px: PackedPtr,
    n: usize,
    pairs: usize,
    r0: usize,
    r1: usize,
    out: OutPtr,
) {
    use crate::dot::avx2::wide::tile_packed;
    use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
    let (rows, cols) = (w.rows, w.cols);
    let (wb, wrb) = (w.data.as_ptr(), w.row_bytes());
    for tb in (0..n).step_by(TOKEN_BLOCK) {
        let tb_end = (tb + TOKEN_BLOCK).min(n);
        for rt in (r0..r1).step_by(RT) {
            let valid = (r1 - rt).min(RT);
            if n <= 2 {
                // Streaming (memory-bound) case: request the next row tile while computing this.
                let next = ((rt + RT).min(r1) * wrb)..((rt + 2 * RT).min(r1) * wrb);
                for off in next.step_by(64) {
                    // SAFETY: off < r1 * wrb <= w.data.len(); prefetching has no other effect.
                    unsafe { _mm_prefetch::<_MM_HINT_T0>(wb.add(off).cast()) };
                }
            }
            // SAFETY: rt + min(i, valid - 1) < r1 <= rows: a whole row inside `w.data`.
            let wp: [*const u8; RT] =
                std::array::from_fn(|i| unsafe { wb.add((rt + i.min(valid - 1)) * wrb) });
            let mut t0 = tb;
            while t0 < tb_end {
                let c = (tb_end - t0).min(PACKED_TOKENS);
                // SAFETY: t0 + i < n: a whole packed row of `pairs` entries.
                let xp = |i: usize| unsafe { px.0.add((t0 + i) * pairs) };
                let mut res = [[0.0f32; PACKED_TOKENS]; RT];
                // SAFETY: the avx512 build was confirmed by `run`; pointers cover full rows.
                unsafe {
                    macro_rules! call {
                        ($c:literal) => {{
                            let mut o = [[0.0f32; $c]; RT];
                            let x = std::array::from_fn(xp);
                            tile_packed::<RT, $c>(w.ty, wp, x, cols, &mut o);
                            for (dst, src) in res.iter_mut().zip(&o) {
                                dst[..$c].copy_from_slice(src);
                            }
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
                }
                for (i, row) in res.iter().enumerate().take(valid) {
                    for (j, &v) in row.iter().enumerate().take(c) {
                        // SAFETY: t0 + j < n, rt + i < r1 <= rows; only this task writes them.
                        unsafe { *out.0.add((t0 + j) * rows + rt + i) = v };
                    }
                }
                t0 += c;
            }
        }
    }
}
