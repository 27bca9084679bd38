//! Work splitting for matmuls over interleaved weights on AMX tiles (every interleaved
//! format): the same tasks, token blocks and activation infos as
//! [`super::driver_interleaved`] (tasks hold whole pairs of groups where they can), the whole
//! 16-token tiles on the format's tile kernel ([`TileKernel`]) two groups × two tiles at a
//! time (a single group or tile where one is left), the tokens left over (fewer than 16) as
//! one partial tile per pair of groups where there are at least [`PARTIAL_MIN`] (batched
//! decode), else on its VNNI kernel. The tiles'
//! activation values are packed once per matmul ([`pack_activations`]: each tile
//! load reads 16 contiguous rows, not rows a whole activation row apart).
//!
//! Invariant: a (row, token) result has the same bits on either kernel (both are the
//! sequential reference), so the split never shows in the output; tasks write disjoint 16-row
//! spans of `out`; each task configures the tiles of the thread that runs it and releases them
//! when done.

use super::driver_interleaved::{
    Block32, GroupKernel, OutPtr, SuperBlock16, SuperBlockIq4Xs, SuperBlockQ4K, TOKEN_BLOCK,
    TOKEN_TILE,
};
use super::{Interleaved, QuantizedActivations, interleave::GROUP};
use crate::amx::{M, TileUnit};
use crate::dot::avx2::interleaved::XInfo;
use crate::dot::avx2::interleaved_amx::group_amx;
use crate::dot::avx2::interleaved_amx_k::{group_amx_iq4xs, group_amx_k4};
use crate::dot::avx2::interleaved_amx_pipe::{Scratch, TokenTile};
use crate::dot::avx2::interleaved_amx_sub::group_amx_sub16;
use crate::dot::avx2::interleaved_iq4xs::XsInfo;
use crate::dot::avx2::interleaved_k::{KInfo, Q6Info};
use crate::types::GgmlType;

/// A [`GroupKernel`] with a tile form for whole 16-token tiles.
pub(super) trait TileKernel: GroupKernel {
    /// Bytes of `A`'s rows (the elements one tile product sums: a block or sub-block).
    const K: usize = 32;
    /// Whether the kernel takes pairs of groups and tiles (the 2×2 pipeline); otherwise the
    /// driver hands it one group × one tile at a time.
    const PAIRS: bool = true;
    /// The activation blocks' layout: (block bytes, offset of its int8 values, values).
    fn a_layout(&self) -> (usize, usize, usize) {
        (292, 4, 256)
    }
    /// `GB` consecutive groups (the first at `w[0]`) × the tokens of the `TA` tiles `tt` on
    /// `tiles` (configured for `A` = `m` × [`Self::K`], `m` every tile's token count).
    ///
    /// # Safety
    /// The tile kernel's contract ([`group_amx`], [`group_amx_k4`], [`group_amx_sub16`],
    /// [`group_amx_iq4xs`]).
    unsafe fn call_tiles<U: TileUnit, const TA: usize, const GB: usize>(
        &self,
        tiles: &mut U,
        scratch: &mut Scratch,
        w: [*const u8; GB],
        nb: usize,
        tt: [TokenTile<Self::Info>; TA],
    );
}

impl TileKernel for Block32 {
    fn a_layout(&self) -> (usize, usize, usize) {
        match self.0 {
            GgmlType::Q4_1 | GgmlType::Q5_1 => (36, 4, 32),
            _ => (34, 2, 32),
        }
    }
    unsafe fn call_tiles<U: TileUnit, const TA: usize, const GB: usize>(
        &self,
        tiles: &mut U,
        scratch: &mut Scratch,
        w: [*const u8; GB],
        nb: usize,
        tt: [TokenTile<XInfo>; TA],
    ) {
        // SAFETY: forwarded.
        unsafe { group_amx::<U, TA, GB>(tiles, scratch, self.0, w, nb, tt) }
    }
}

impl TileKernel for SuperBlockQ4K {
    const PAIRS: bool = false;
    unsafe fn call_tiles<U: TileUnit, const TA: usize, const GB: usize>(
        &self,
        tiles: &mut U,
        scratch: &mut Scratch,
        w: [*const u8; GB],
        nb: usize,
        tt: [TokenTile<KInfo>; TA],
    ) {
        for_each_single(w, tt, |w, tile| {
            // SAFETY: forwarded, one group and tile of the caller's.
            unsafe { group_amx_k4(tiles, scratch, self.0, w, nb, tile) }
        })
    }
}

impl TileKernel for SuperBlock16 {
    const K: usize = 16;
    unsafe fn call_tiles<U: TileUnit, const TA: usize, const GB: usize>(
        &self,
        tiles: &mut U,
        scratch: &mut Scratch,
        w: [*const u8; GB],
        nb: usize,
        tt: [TokenTile<Q6Info>; TA],
    ) {
        // SAFETY: forwarded.
        unsafe { group_amx_sub16::<U, TA, GB>(tiles, scratch, self.0, w, nb, tt) }
    }
}

impl TileKernel for SuperBlockIq4Xs {
    const PAIRS: bool = false;
    unsafe fn call_tiles<U: TileUnit, const TA: usize, const GB: usize>(
        &self,
        tiles: &mut U,
        scratch: &mut Scratch,
        w: [*const u8; GB],
        nb: usize,
        tt: [TokenTile<XsInfo>; TA],
    ) {
        for_each_single(w, tt, |w, tile| {
            // SAFETY: forwarded, one group and tile of the caller's.
            unsafe { group_amx_iq4xs(tiles, scratch, w, nb, tile) }
        })
    }
}

/// `f(w, tile)` for each group of `w` × each tile of `tt` (group `g`'s outputs 16 past the
/// previous group's).
fn for_each_single<I: Copy, const TA: usize, const GB: usize>(
    w: [*const u8; GB],
    tt: [TokenTile<I>; TA],
    mut f: impl FnMut(*const u8, TokenTile<I>),
) {
    for (g, &wg) in w.iter().enumerate() {
        for tile in tt {
            let out = tile.out.wrapping_add(16 * g);
            f(wg, TokenTile { out, ..tile });
        }
    }
}

/// Tokens left after the whole 16-token tiles from which they run as one partial tile (`m`
/// rows) rather than on the VNNI kernel: a tile product costs about as much for fewer rows, so
/// below 8 tokens the VNNI kernels are faster (measured with the `matmul_shapes` example).
pub(super) const PARTIAL_MIN: usize = 8;

/// Fills `out` (`[n, rows]`) from interleaved weights of `kernel`'s format, each task on the
/// tile units `unit(m, K::K)` gives on its thread (`m` tokens per tile). The caller has checked
/// what [`super::driver_interleaved::run`] requires and that `unit` yields working tiles.
pub(super) fn run_tiles<K: TileKernel, U: TileUnit>(
    kernel: &K,
    iw: &Interleaved,
    xq: &QuantizedActivations,
    out: &mut [f32],
    info: &mut Vec<K::Info>,
    unit: impl Fn(usize, usize) -> U + Sync,
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
    let mut packed = PACKED.with(std::cell::RefCell::take);
    pack_activations(xq, kernel.a_layout(), K::K, &mut packed);
    let groups = rows / GROUP;
    let threads = crate::threads::current_threads().max(1);
    // Whole pairs of groups per task where possible (the kernels take two at a time).
    let per_task = groups.div_ceil(threads * 4).max(1).next_multiple_of(2);
    let tasks = groups.div_ceil(per_task);
    let ptr = OutPtr(out.as_mut_ptr());
    let (xb, xrb, ib, pb) = (
        xq.bytes().as_ptr() as usize,
        xq.row_bytes(),
        info.as_ptr() as usize,
        packed.as_ptr() as usize,
    );
    let tile_bytes = M * nb * kernel.a_layout().2;
    // The last n % 16 tokens: one partial tile after the whole ones, or the VNNI kernel.
    let rest = n % M;
    let partial = rest >= PARTIAL_MIN;
    let whole_end = if partial { n - rest } else { n };
    let task_tiles = |task: usize, scratch: &mut Scratch| {
        let g0 = task * per_task;
        let g1 = (g0 + per_task).min(groups);
        let (xb, ib) = (xb as *const u8, ib as *const K::Info);
        let tile_at = |t0: usize, m: usize, g: usize| {
            // SAFETY: t0 is a multiple of 16 and t0 + m ≤ n: tile t0 / 16 of the packed
            // activations, rows t0..t0 + m's nb infos each, and the outputs of groups g (and
            // g + 1 where the kernel takes two, g + 1 < g1) in those token rows, written only
            // by this task.
            unsafe {
                TokenTile {
                    a: (pb as *const u8).add(t0 / M * tile_bytes),
                    k: K::K,
                    m,
                    info: ib.add(t0 * nb),
                    out: ptr.add(t0 * rows + g * GROUP),
                    out_stride: rows,
                }
            }
        };
        // Groups g (and g + 1 where two are left) × tiles at t0 (and t0 + 16 where `two`).
        let call =
            |tiles: &mut U, scratch: &mut Scratch, g: usize, t0: usize, m: usize, two: bool| {
                let (w0, w1) = (iw.group_ptr(g), iw.group_ptr((g + 1).min(g1 - 1)));
                let (x0, x1) = (tile_at(t0, m, g), tile_at(t0 + M * two as usize, m, g));
                // SAFETY: the tiles' ranges as `tile_at` says; the interleaved kernels are in use
                // (caller), so the CPU has the AVX-512 features.
                unsafe {
                    match (two, K::PAIRS && g + 1 < g1) {
                        (true, true) => kernel.call_tiles(tiles, scratch, [w0, w1], nb, [x0, x1]),
                        (true, false) => kernel.call_tiles(tiles, scratch, [w0], nb, [x0, x1]),
                        (false, true) => kernel.call_tiles(tiles, scratch, [w0, w1], nb, [x0]),
                        (false, false) => kernel.call_tiles(tiles, scratch, [w0], nb, [x0]),
                    }
                }
            };
        if whole_end >= M {
            let mut tiles = unit(M, K::K);
            for tb in (0..whole_end).step_by(TOKEN_BLOCK) {
                let tb_end = (tb + TOKEN_BLOCK).min(whole_end);
                for g in (g0..g1).step_by(if K::PAIRS { 2 } else { 1 }) {
                    let mut t0 = tb;
                    while tb_end - t0 >= M {
                        let two = K::PAIRS && tb_end - t0 >= 2 * M;
                        call(&mut tiles, &mut *scratch, g, t0, M, two);
                        t0 += if two { 2 * M } else { M };
                    }
                }
            }
        }
        if partial {
            let mut tiles = unit(rest, K::K);
            for g in (g0..g1).step_by(if K::PAIRS { 2 } else { 1 }) {
                call(&mut tiles, &mut *scratch, g, whole_end, rest, false);
            }
            return;
        }
        for tb in (whole_end / TOKEN_BLOCK * TOKEN_BLOCK..n).step_by(TOKEN_BLOCK) {
            let tb_end = (tb + TOKEN_BLOCK).min(n);
            for g in g0..g1 {
                let wp = iw.group_ptr(g);
                let mut t0 = tb.max(whole_end / M * M);
                while t0 < tb_end {
                    let c = (tb_end - t0).min(TOKEN_TILE);
                    // SAFETY: as in `driver_interleaved::run_with`: row t0 + i < n of xq, its
                    // infos and group g's 16 outputs in it, written only by this task.
                    let xp = |i: usize| unsafe { xb.add((t0 + i) * xrb) };
                    let ip = |i: usize| unsafe { ib.add((t0 + i) * nb) };
                    let op = |i: usize| unsafe { ptr.add((t0 + i) * rows + g * GROUP) };
                    macro_rules! call {
                        ($c:literal) => {{
                            let x = std::array::from_fn(xp);
                            let inf = std::array::from_fn(ip);
                            let o = std::array::from_fn(op);
                            // SAFETY: the CPU has the features (caller); pointers as above.
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
    };
    crate::threads::for_each(tasks, |task| {
        let mut scratch = SCRATCH.take().unwrap_or_else(Scratch::boxed);
        task_tiles(task, &mut scratch);
        SCRATCH.set(Some(scratch));
    });
    PACKED.with(|p| *p.borrow_mut() = packed);
}

thread_local! {
    /// This thread's tile scratch (28 KiB; every buffer in it is written before it is read, so
    /// it is reused as left: no allocation once made).
    static SCRATCH: std::cell::Cell<Option<Box<Scratch>>> = const { std::cell::Cell::new(None) };
    /// The packed activations of the last tile matmul on this thread (reused: no allocation
    /// once grown).
    static PACKED: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Packs the int8 values of `xq`'s 16-token tiles (the last one partial) for tile `A` loads: tile `i`, unit `u`
/// (the `u`-th run of `k` values of a row, over blocks of `layout` = (bytes, value offset,
/// values)) is 16 rows of `k` bytes at `(i·units + u)·16·k`. One contiguous, aligned-stride
/// tile load per unit instead of 16 rows scattered `row_bytes` apart.
fn pack_activations(
    xq: &QuantizedActivations,
    (xb, q_off, vals): (usize, usize, usize),
    k: usize,
    dst: &mut Vec<u8>,
) {
    let (n, nb, per) = (xq.n(), xq.row_bytes() / xb, vals / k);
    let tiles = n.div_ceil(M);
    let units = nb * per;
    dst.clear();
    dst.resize(tiles * units * M * k, 0);
    for i in 0..tiles {
        for r in 0..M.min(n - i * M) {
            let row = xq.row(i * M + r);
            for b in 0..nb {
                let src = &row[b * xb + q_off..b * xb + q_off + vals];
                for (j, run) in src.chunks_exact(k).enumerate() {
                    let at = ((i * units + b * per + j) * M + r) * k;
                    dst[at..at + k].copy_from_slice(run);
                }
            }
        }
    }
}

/// [`run_tiles`] for `iw`'s format on the tile units `unit(k)` gives.
#[cfg(test)]
fn run_any<U: TileUnit>(
    iw: &Interleaved,
    xq: &QuantizedActivations,
    out: &mut [f32],
    unit: impl Fn(usize, usize) -> U + Sync,
) {
    match iw.ty() {
        GgmlType::Q4K | GgmlType::Q5K => {
            let kernel = SuperBlockQ4K(iw.ty() == GgmlType::Q5K);
            run_tiles(&kernel, iw, xq, out, &mut Vec::new(), unit)
        }
        GgmlType::Q6K | GgmlType::Q3K | GgmlType::Q2K => {
            run_tiles(&SuperBlock16(iw.ty()), iw, xq, out, &mut Vec::new(), unit)
        }
        GgmlType::IQ4XS => run_tiles(&SuperBlockIq4Xs, iw, xq, out, &mut Vec::new(), unit),
        ty => run_tiles(&Block32(ty), iw, xq, out, &mut Vec::new(), unit),
    }
}

/// [`run_tiles`] on the software tile model: the tile path's layout and arithmetic on any CPU
/// with the interleaved kernels (tests).
#[cfg(test)]
pub(super) fn run_soft(iw: &Interleaved, xq: &QuantizedActivations, out: &mut [f32]) {
    run_any(iw, xq, out, crate::amx::SoftTiles::new);
}

/// [`run_tiles`] on the CPU's tiles, `None` where the process has none (tests).
#[cfg(test)]
pub(super) fn run_hw(iw: &Interleaved, xq: &QuantizedActivations, out: &mut [f32]) -> Option<()> {
    crate::amx::HwTiles::new(M, 32)?;
    run_any(iw, xq, out, |m, k| {
        crate::amx::HwTiles::new(m, k).expect("granted above, for the whole process")
    });
    Some(())
}
