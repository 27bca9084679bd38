//! Attention of one token over every query head at once (decode): each run of K (then V)
//! rows (one pool block) is read by every K/V head before the next run, and the run two ahead
//! is prefetched into L2 as one contiguous range, a share per head; so a decode step's cache
//! streams from memory at the rate of contiguous reads rather than as one narrow column per
//! head whose rows each wait on memory ([`super::attend_tile`] reads one head's slice of every
//! row, and a step of many sessions has too little reuse to hide that).
//!
//! Invariant: every head's output is bit-identical to [`attend`] for that head (the same
//! per-pair scores from the same row kernels, the same softmax over the same positions, the
//! same V sums in ascending row order; only the order in which heads take turns differs), so
//! the path never shows in a result; tests below check it against [`attend`].

use std::ops::Range;

use half::f16;

use super::AttnShape;
use super::attention::{KvRead, KvRow, attend, zeroed_scores};
use super::attention_tile::{AXPY_GROUP, DOT_GROUP, TileScratch, axpy_full, dot_full, tiles_apply};
use super::rows::{extend_f16, round_to_f16_in_place};

/// Attention of one token whose query is `q` (`[n_heads · head_dim]`, RoPE applied) over the
/// positions `keys` of `kv`, for every query head; writes `[n_heads · head_dim]` into `out`.
/// Each head's result equals [`attend`]'s, bit for bit. `scratch` reserved with
/// [`TileScratch::reserve`] for `n_heads` rows does not allocate.
pub fn attend_heads(
    q: &[f32],
    keys: Range<usize>,
    kv: &dyn KvRead,
    shape: AttnShape,
    scratch: &mut TileScratch,
    out: &mut [f32],
) {
    let (nh, hd, n_kv) = (shape.n_heads, shape.head_dim, shape.n_kv_heads);
    assert_eq!(q.len(), nh * hd, "attention heads: query length");
    assert_eq!(out.len(), nh * hd, "attention heads: output length");
    assert!(
        keys.start < keys.end,
        "attention heads: a query sees itself"
    );
    assert!(
        n_kv > 0 && nh.is_multiple_of(n_kv),
        "attention: heads not grouped evenly"
    );
    if !tiles_apply(kv, keys.start, hd) {
        attend(q, kv, keys, shape, 0..nh, &mut scratch.single, out);
        return;
    }
    let (group, kv_dim, span) = (nh / n_kv, n_kv * hd, keys.len());
    let TileScratch {
        scores, q16, qv, ..
    } = scratch;
    zeroed_scores(scores, nh * span);
    q16.clear();
    extend_f16(q16, q);
    #[cfg(target_arch = "x86_64")]
    super::rows_tile::expand_queries(q16, hd, qv);
    // Query head `h`'s scores of position `pos` lie at `h·span + pos - keys.start`.
    let at = |pos: usize| move |h: usize| h * span + pos - keys.start;
    let key_runs = || runs(keys.clone(), |p| kv.key_run(p));
    let value_runs = || runs(keys.clone(), |p| kv.value_run(p));
    // The K pass prefetches the K runs ahead, then the V pass's first runs; the V pass the V
    // runs ahead. The second K run goes first, whole, before the first one is read.
    #[cfg(target_arch = "x86_64")]
    if let Some(second) = key_runs().nth(1) {
        super::rows_tile::Spread::new(f16_rows(second, kv_dim)).all();
    }
    let mut ahead = key_runs().skip(RUNS_AHEAD).chain(value_runs());
    for run in key_runs() {
        let (pos, k, len) = (run.0, f16_rows(run, kv_dim), run.2);
        let next = ahead.next().map_or(&[][..], |r| f16_rows(r, kv_dim));
        for_head_groups(group, n_kv, DOT_GROUP, |g, heads| {
            let share = share(next, g, n_kv, heads[0] == g * group);
            dot_full(
                heads,
                qv,
                hd,
                k,
                kv_dim,
                g * hd,
                len,
                scores,
                at(pos),
                share,
            )
        });
        for h in 0..nh {
            shape.finish_scores(&mut scores[at(pos)(h)..][..len]);
        }
    }
    for (h, own) in scores[..nh * span].chunks_exact_mut(span).enumerate() {
        shape.softmax(h, own);
        round_to_f16_in_place(own);
    }
    out.fill(0.0);
    let mut ahead = value_runs().skip(RUNS_AHEAD);
    for run in value_runs() {
        let (pos, v, len) = (run.0, f16_rows(run, kv_dim), run.2);
        let next = ahead.next().map_or(&[][..], |r| f16_rows(r, kv_dim));
        for_head_groups(group, n_kv, AXPY_GROUP, |g, heads| {
            let share = share(next, g, n_kv, heads[0] == g * group);
            axpy_full(
                heads,
                out,
                hd,
                scores,
                at(pos),
                v,
                kv_dim,
                g * hd,
                len,
                share,
            )
        });
    }
}

/// Runs ahead of the one in use whose rows the K/V heads' calls prefetch into L2, a share
/// each. Two measured faster than one and three on 16 decoding sessions: a run is one pool
/// block, which the hardware prefetchers do not enter from the previous one, and one run
/// ahead arrives late.
const RUNS_AHEAD: usize = 2;

/// The runs over `keys` (`run(p)`: the run from `p` and its length): each run's first
/// position, its rows and how many of them lie before `keys.end`.
fn runs<'a>(
    keys: Range<usize>,
    run: impl Fn(usize) -> (KvRow<'a>, usize),
) -> impl Iterator<Item = (usize, KvRow<'a>, usize)> {
    let mut pos = keys.start;
    std::iter::from_fn(move || {
        (pos < keys.end).then(|| {
            let (rows, len) = run(pos);
            let len = len.clamp(1, keys.end - pos);
            pos += len;
            (pos - len, rows, len)
        })
    })
}

/// The f16 rows of a run from [`runs`] (`kv_dim` elements each): the tiles run over f16
/// caches only ([`tiles_apply`]).
fn f16_rows<'a>((_, run, len): (usize, KvRow<'a>, usize), kv_dim: usize) -> &'a [f16] {
    let KvRow::F16(rows) = run else {
        unreachable!("tiles only run over f16 rows (tiles_apply)")
    };
    &rows[..(len * kv_dim).min(rows.len())]
}

/// Share `g` of `n` of `rows` (the rows ahead that K/V head `g`'s first call prefetches
/// across its rows), empty unless `first`.
fn share(rows: &[f16], g: usize, n: usize, first: bool) -> &[f16] {
    if !first {
        return &[];
    }
    &rows[rows.len() * g / n..rows.len() * (g + 1) / n]
}

/// Calls `f(g, heads)` for each K/V head `g` in order with its query heads, at most `max` at a
/// time.
fn for_head_groups(group: usize, n_kv: usize, max: usize, mut f: impl FnMut(usize, &[usize])) {
    let mut buf = [0usize; DOT_GROUP];
    for g in 0..n_kv {
        let mut h = g * group;
        while h < (g + 1) * group {
            let n = ((g + 1) * group - h).min(max);
            for (i, slot) in buf[..n].iter_mut().enumerate() {
                *slot = h + i;
            }
            f(g, &buf[..n]);
            h += n;
        }
    }
}

#[cfg(test)]
#[path = "attention_heads_tests.rs"]
mod tests;
