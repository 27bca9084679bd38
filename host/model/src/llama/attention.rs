//! Attention of every token of a batch over its own sequence's K/V, on the worker pool: tiles of
//! consecutive tokens times the query heads of one K/V group ([`attend_tile`]), or a tile of
//! one long context split over positions and columns ([`attend_split`]); every path gives the bits of
//! the one-query [`memoria_kernels::ops::attend`], so the tiling never changes a result.

use std::cell::RefCell;
use std::ops::Range;

use memoria_kernels::ops::{
    AttnShape, SplitScratch, TILE_ROWS, TileScratch, attend_heads, attend_split, attend_tile,
};
use memoria_kernels::threads;

use super::{BatchToken, KvStore};

/// Contexts from this many positions on are split across threads when the batch alone gives
/// too few tasks (the split never changes a bit, see `attend_split`).
const SPLIT_MIN_POS: usize = 256;

thread_local! {
    static ATTN: RefCell<TileScratch> = RefCell::default();
    static ATTN_SPLIT: RefCell<SplitScratch> = RefCell::default();
    /// The batch's attention tiles, kept between steps (no allocation once warmed up).
    static TILES: RefCell<Vec<Range<usize>>> = const { RefCell::new(Vec::new()) };
}

/// Attention of every token of the batch into `att` (`[n, q_dim]`), on the worker pool: one task
/// per (tile, K/V head group), a tile being up to [`TILE_ROWS`] query rows of consecutive tokens
/// of one sequence times the group's heads ([`attend_tile`]: each K/V row converted once per
/// tile), heaviest tiles first. So decode of a single sequence still uses every thread, and a
/// result never depends on the tiling (`attend_tile` gives `attend`'s bits). When a context is
/// long and that gives fewer tasks than threads (or, for single tokens, fewer than two per
/// thread), each tile's tokens are instead split over positions and columns together
/// ([`attend_split`]: one read of the cache per tile, same bits). A decode step of at least two
/// sessions per thread runs one task per token over all its heads ([`attend_heads`]: the
/// cache read as contiguous runs, same bits).
#[allow(clippy::too_many_arguments)]
pub(super) fn attention<K: KvStore>(
    batch: &[BatchToken],
    kv: &K,
    layer: usize,
    q: &[f32],
    qd: usize,
    shape: AttnShape<'_>,
    first_pos: impl Fn(&BatchToken) -> usize + Sync,
    att: &mut [f32],
) {
    let (n_kv, hd) = (shape.n_kv_heads, shape.head_dim);
    let group = shape.n_heads / n_kv;
    let mut tiles = TILES.with(RefCell::take);
    cut_tiles(batch, (TILE_ROWS / group).max(1), &mut tiles);
    let tasks = tiles.len() * n_kv;
    let threads = threads::current_threads();
    let long = batch
        .iter()
        .any(|t| t.pos + 1 - first_pos(t) >= SPLIT_MIN_POS);
    // Tiles of several tokens keep their tasks while there is one per thread (a tile reads each
    // K/V row once either way; measured faster than the split there); fewer tasks, or single
    // tokens (decode) with fewer than two per thread, take the split.
    let single = tiles.iter().all(|t| t.len() == 1);
    if threads > 1 && long && (tasks < threads || (tasks < 2 * threads && single)) {
        let mut sc = ATTN_SPLIT.with(RefCell::take);
        // Sized once for the longest tile and context: a draft's rows never reallocate it.
        sc.reserve(
            (TILE_ROWS / group).max(1),
            shape.n_heads,
            kv.max_positions(),
            hd,
        );
        for tile in tiles.iter() {
            // A tile's tokens are consecutive positions of one sequence: they share its reads.
            let lead = &batch[tile.start];
            let keys = tile_keys(&batch[tile.clone()], &first_pos);
            let view = kv.view(lead.seq, layer);
            attend_split(
                &q[tile.start * qd..tile.end * qd],
                &view,
                &keys[..tile.len()],
                shape,
                0..shape.n_heads,
                &mut sc,
                &mut att[tile.start * qd..tile.end * qd],
            );
        }
        ATTN_SPLIT.with(|c| *c.borrow_mut() = sc);
        TILES.with(|c| *c.borrow_mut() = tiles);
        return;
    }
    let max_positions = kv.max_positions();
    let shared = threads::SharedMut::new(att);
    if tiles.len() >= 2 * threads && tiles.iter().all(|t| t.len() == 1) {
        // Decode: one task per token over all its heads, each K/V run read front to back.
        threads::for_each(tiles.len(), |i| {
            let t = tiles[tiles.len() - 1 - i].start;
            let tok = &batch[t];
            let view = kv.view(tok.seq, layer);
            let mut sc = ATTN.with(RefCell::take);
            sc.reserve(shape.n_heads, max_positions, hd);
            // SAFETY: task i alone writes token t's row.
            let out = unsafe { shared.slice(t * qd, qd) };
            let keys = first_pos(tok)..tok.pos + 1;
            attend_heads(&q[t * qd..(t + 1) * qd], keys, &view, shape, &mut sc, out);
            ATTN.with(|c| *c.borrow_mut() = sc);
        });
        TILES.with(|c| *c.borrow_mut() = tiles);
        return;
    }
    let width = group * hd;
    threads::for_each(tasks, |i| {
        let (tile, g) = (&tiles[tiles.len() - 1 - i / n_kv], i % n_kv);
        let lead = &batch[tile.start];
        let view = kv.view(lead.seq, layer);
        let keys = tile_keys(&batch[tile.clone()], &first_pos);
        // Taken out while in use, so a nested call would get a fresh one, not a borrow panic.
        let mut sc = ATTN.with(RefCell::take);
        // Sized once per thread for the longest context: a growing one never reallocates.
        sc.reserve(group, max_positions, hd);
        let mut out = sc.take_out(tile.len() * width);
        attend_tile(
            &q[tile.start * qd..tile.end * qd],
            &keys[..tile.len()],
            &view,
            shape,
            g * group..(g + 1) * group,
            &mut sc,
            &mut out,
        );
        for (t, o) in tile.clone().zip(out.chunks_exact(width)) {
            // SAFETY: task (tile, g) alone writes these columns of these tokens' rows.
            unsafe { shared.slice(t * qd + g * width, width) }.copy_from_slice(o);
        }
        sc.put_out(out);
        ATTN.with(|c| *c.borrow_mut() = sc);
    });
    TILES.with(|c| *c.borrow_mut() = tiles);
}

/// The key positions each token of a tile attends to (its first visible position through its
/// own), in the tile's order; entries past the tile are empty.
fn tile_keys(
    tile: &[BatchToken],
    first_pos: impl Fn(&BatchToken) -> usize,
) -> [Range<usize>; TILE_ROWS] {
    std::array::from_fn(|i| tile.get(i).map_or(0..0, |t| first_pos(t)..t.pos + 1))
}

/// Cuts `batch` into tiles of up to `max_tokens` consecutive entries of one sequence at
/// consecutive positions.
fn cut_tiles(batch: &[BatchToken], max_tokens: usize, tiles: &mut Vec<Range<usize>>) {
    tiles.clear();
    let mut start = 0;
    for i in 1..=batch.len() {
        let cut = i == batch.len()
            || i - start == max_tokens
            || batch[i].seq != batch[i - 1].seq
            || batch[i].pos != batch[i - 1].pos + 1;
        if cut {
            tiles.push(start..i);
            start = i;
        }
    }
}
