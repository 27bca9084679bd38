//! Work splitting for matmuls over interleaved weights on AMX tiles (every interleaved
//! format): the same tasks, token blocks and activation infos as
//! [`super::driver_interleaved`], each whole 16-token tile of a group on the format's tile
//! kernel ([`TileKernel`]) and the tokens left over (fewer than 16) on its VNNI kernel.
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
use crate::dot::avx2::interleaved_amx::{TokenTile, group_amx};
use crate::dot::avx2::interleaved_amx_k::group_amx_k4;
use crate::dot::avx2::interleaved_amx_sub::{group_amx_iq4xs, group_amx_sub16};
use crate::dot::avx2::interleaved_iq4xs::XsInfo;
use crate::dot::avx2::interleaved_k::{KInfo, Q6Info};

/// A [`GroupKernel`] with a tile form for whole 16-token tiles.
pub(super) trait TileKernel: GroupKernel {
    /// Bytes of `A`'s rows (the elements one tile product sums: a block or sub-block).
    const K: usize = 32;
    /// One group × the 16 tokens of `tile` on `tiles` (configured for `A` = 16 × [`Self::K`]).
    ///
    /// # Safety
    /// The tile kernel's contract ([`group_amx`], [`group_amx_k4`], [`group_amx_sub16`],
    /// [`group_amx_iq4xs`]).
    unsafe fn call_tiles<U: TileUnit>(
        &self,
        tiles: &mut U,
        w: *const u8,
        nb: usize,
        tile: TokenTile<Self::Info>,
    );
}

impl TileKernel for Block32 {
    unsafe fn call_tiles<U: TileUnit>(
        &self,
        tiles: &mut U,
        w: *const u8,
        nb: usize,
        tile: TokenTile<XInfo>,
    ) {
        // SAFETY: forwarded.
        unsafe { group_amx(tiles, self.0, w, nb, tile) }
    }
}

impl TileKernel for SuperBlockQ4K {
    unsafe fn call_tiles<U: TileUnit>(
        &self,
        tiles: &mut U,
        w: *const u8,
        nb: usize,
        tile: TokenTile<KInfo>,
    ) {
        // SAFETY: forwarded.
        unsafe { group_amx_k4(tiles, self.0, w, nb, tile) }
    }
}

impl TileKernel for SuperBlock16 {
    const K: usize = 16;
    unsafe fn call_tiles<U: TileUnit>(
        &self,
        tiles: &mut U,
        w: *const u8,
        nb: usize,
        tile: TokenTile<Q6Info>,
    ) {
        // SAFETY: forwarded.
        unsafe { group_amx_sub16(tiles, self.0, w, nb, tile) }
    }
}

impl TileKernel for SuperBlockIq4Xs {
    unsafe fn call_tiles<U: TileUnit>(
        &self,
        tiles: &mut U,
        w: *const u8,
        nb: usize,
        tile: TokenTile<XsInfo>,
    ) {
        // SAFETY: forwarded.
        unsafe { group_amx_iq4xs(tiles, w, nb, tile) }
    }
}

/// Fills `out` (`[n, rows]`) from interleaved weights of `kernel`'s format, each task on the
/// tile unit `unit(K::K)` gives on its thread. The caller has checked what
/// [`super::driver_interleaved::run`] requires and that `unit` yields working tiles.
pub(super) fn run_tiles<K: TileKernel, U: TileUnit>(
    kernel: &K,
    iw: &Interleaved,
    xq: &QuantizedActivations,
    out: &mut [f32],
    info: &mut Vec<K::Info>,
    unit: impl Fn(usize) -> U + Sync,
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
        let mut tiles = unit(K::K);
        for tb in (0..n).step_by(TOKEN_BLOCK) {
            let tb_end = (tb + TOKEN_BLOCK).min(n);
            for g in g0..g1 {
                let wp = iw.group_ptr(g);
                let mut t0 = tb;
                while tb_end - t0 >= M {
                    // SAFETY: t0 + 16 ≤ n: rows t0..t0 + 16 of xq (nb blocks each, row_bytes
                    // apart), their nb infos each, and the 16 outputs of group g in those token
                    // rows, written only by this task; the interleaved kernels are in use
                    // (caller), so the CPU has the AVX-512 features.
                    unsafe {
                        let tile = TokenTile {
                            x: xb.add(t0 * xrb),
                            x_stride: xrb,
                            info: ib.add(t0 * nb),
                            out: ptr.add(t0 * rows + g * GROUP),
                            out_stride: rows,
                        };
                        kernel.call_tiles(&mut tiles, wp, nb, tile);
                    }
                    t0 += M;
                }
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
    });
}

/// [`run_tiles`] for `iw`'s format on the tile units `unit(k)` gives.
#[cfg(test)]
fn run_any<U: TileUnit>(
    iw: &Interleaved,
    xq: &QuantizedActivations,
    out: &mut [f32],
    unit: impl Fn(usize) -> U + Sync,
) {
    use crate::types::GgmlType;
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
    run_any(iw, xq, out, |k| crate::amx::SoftTiles::new(M, k));
}

/// [`run_tiles`] on the CPU's tiles, `None` where the process has none (tests).
#[cfg(test)]
pub(super) fn run_hw(iw: &Interleaved, xq: &QuantizedActivations, out: &mut [f32]) -> Option<()> {
    crate::amx::HwTiles::new(M, 32)?;
    run_any(iw, xq, out, |k| {
        crate::amx::HwTiles::new(M, k).expect("granted above, for the whole process")
    });
    Some(())
}
