//! AMX tile kernels over interleaved Q4_K / Q5_K and IQ4_XS weights
//! ([`crate::matmul::Interleaved`]: super-blocks of 8 sub-blocks of 32) for one group × 16
//! tokens at a time: per super-block, the 8 sub-blocks' levels, then one `TDPBSUD` each
//! ([`tile_products`]) forms the 16 tokens × 16 rows sums `Σ u·x`, then each token's lane takes
//! the rows' scales (`vpmulld`) into the super-block's integer sum (in registers, over all 8)
//! and runs the float step of [`super::interleaved_k`] / [`super::interleaved_iq4xs`].
//!
//! These stay one group × one tile: their integer step (two `p0` uops per sub-block and token)
//! outweighs what the 2×2 pipeline ([`super::interleaved_amx_pipe`]) saves on tile loads, and
//! splitting it over chunks costs a partial sum in memory (measured: the 2×2 form ran 5–14%
//! slower for these formats).
//!
//! `B` is a sub-block's levels unpacked from the interleaved chunks (Q4_K: low or high
//! nibbles, Q5_K ORs in the fifth bit; IQ4_XS: the table's values) into the task's scratch;
//! `A` is the 16 tokens' Q8_K values of the sub-block, packed by the driver. No weight copy.
//! Invariant (bits): every integer sum is exact (the VNNI kernel's lane values), and
//! `acc = fma(f32(Σ_j sc_j·Σ u·x), d·dx, acc)` (Q4_K / Q5_K: then
//! `acc = fma(-f32(Σ_j m_j·Σ x), dmin·dx, acc)`) run super-block by super-block from 0 as
//! there: the [`crate::dot::sequential`] reference, bit for bit, for any token tiling.

use std::arch::x86_64::*;

use super::interleaved_amx_pipe::{Levels, Scratch, TokenTile};
use super::interleaved_iq4xs::{IQ4NL_LEVELS, IQ4XS_GROUP_BYTES, XsInfo, iq4xs_levels};
use super::interleaved_k::{KInfo, Q4K_GROUP_BYTES, Q5K_GROUP_BYTES};
use crate::amx::{A0, A1, B0, B1, C0, C1, C2, C3, CBuf, M, TileUnit};
use crate::matmul::interleave::{
    IQ4XS_SCALES, Q4K_DMIN, Q4K_MINS, Q4K_QUANTS, Q4K_SCALES, Q5K_MASKS, Q5K_QUANTS,
};

/// `out[t][r] = dot(row r of the group, x[t])` for the 16 rows of one interleaved Q4_K group
/// (`q5`: Q5_K) and the 16 tokens of `tile`, on `tiles` (configured for `A` = 16 × 32 bytes).
///
/// # Safety
/// avx512f/bw/vl/vnni + avx2/fma/f16c; `w` points to `nb` group blocks of the format; the
/// tile's 16 Q8_K activation rows, their `nb` [`KInfo`]s each and their 16 outputs each are
/// valid as described on [`TokenTile`] (outputs writable).
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(crate) unsafe fn group_amx_k4<U: TileUnit>(
    tiles: &mut U,
    scratch: &mut Scratch,
    q5: bool,
    w: *const u8,
    nb: usize,
    tile: TokenTile<KInfo>,
) {
    // SAFETY: forwarded.
    unsafe {
        if q5 {
            group_amx_k4_f::<U, true>(tiles, scratch, w, nb, tile)
        } else {
            group_amx_k4_f::<U, false>(tiles, scratch, w, nb, tile)
        }
    }
}

/// [`group_amx_k4`] for Q4_K or Q5_K (`Q5`): per super-block, the 8 sub-blocks' levels, then
/// their 8 tile products ([`tile_products`]), then each token's scale and float steps.
///
/// # Safety
/// As [`group_amx_k4`].
#[inline(always)]
unsafe fn group_amx_k4_f<U: TileUnit, const Q5: bool>(
    tiles: &mut U,
    scratch: &mut Scratch,
    w: *const u8,
    nb: usize,
    tile: TokenTile<KInfo>,
) {
    let (bytes, quants) = if Q5 {
        (Q5K_GROUP_BYTES, Q5K_QUANTS)
    } else {
        (Q4K_GROUP_BYTES, Q4K_QUANTS)
    };
    let (sums, levels) = scratch.flat();
    // SAFETY: features and pointer ranges are the caller's contract; vector loads unaligned.
    unsafe {
        let mut acc = [_mm512_setzero_ps(); M];
        let (low, sixteen) = (_mm512_set1_epi8(0x0F), _mm512_set1_epi8(16));
        for b in 0..nb {
            let blk = w.add(b * bytes);
            for (j, lv) in levels[..8].iter_mut().enumerate() {
                let chunks = blk.add(quants + 64 * 8 * (j / 2));
                for c in 0..8 {
                    let raw = _mm512_loadu_si512(chunks.add(64 * c).cast());
                    let mut v = if j % 2 == 0 {
                        _mm512_and_si512(raw, low)
                    } else {
                        _mm512_and_si512(_mm512_srli_epi16::<4>(raw), low)
                    };
                    if Q5 {
                        let m = blk
                            .add(Q5K_MASKS + 8 * (8 * j + c))
                            .cast::<u64>()
                            .read_unaligned();
                        v = _mm512_or_si512(v, _mm512_maskz_mov_epi8(m, sixteen));
                    }
                    _mm512_store_si512(lv.0.as_mut_ptr().add(64 * c).cast(), v);
                }
            }
            let a = |j: usize| tile.a(8 * b + j);
            let lv = |j: usize| levels[j].0.as_ptr();
            tile_products(tiles, 8, a, tile.k, lv, false, sums);
            let sc: [__m512i; 8] = std::array::from_fn(|j| {
                _mm512_cvtepu8_epi32(_mm_loadu_si128(blk.add(Q4K_SCALES + 16 * j).cast()))
            });
            let dw = _mm512_cvtph_ps(_mm256_loadu_si256(blk.cast()));
            let dm = _mm512_cvtph_ps(_mm256_loadu_si256(blk.add(Q4K_DMIN).cast()));
            for (t, at) in acc[..tile.m].iter_mut().enumerate() {
                let mut isum = _mm512_setzero_si512();
                for (j, scj) in sc.iter().enumerate() {
                    let s = _mm512_load_si512(sums[j].0[t].as_ptr().cast());
                    isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(s, *scj));
                }
                let inf = tile.info.add(t * nb + b).read();
                let mut mins = _mm512_setzero_si512();
                for k in 0..4 {
                    let pairs = _mm256_loadu_si256(blk.add(Q4K_MINS + 32 * k).cast());
                    let mv = _mm512_cvtepu8_epi16(pairs);
                    mins = _mm512_dpwssd_epi32(mins, mv, _mm512_set1_epi32(inf.sums[k]));
                }
                let dx = _mm512_set1_ps(inf.dx);
                *at = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dw, dx), *at);
                *at = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(mins), _mm512_mul_ps(dm, dx), *at);
            }
        }
        for (t, a) in acc[..tile.m].iter().enumerate() {
            _mm512_storeu_ps(tile.out.add(t * tile.out_stride), *a);
        }
    }
}

/// `out[t][r] = dot(row r of the group, x[t])` for the 16 rows of one interleaved IQ4_XS group
/// and the 16 tokens of `tile`, on `tiles` (configured for `A` = 16 × 32 bytes).
///
/// # Safety
/// As [`group_amx_k4`], with IQ4_XS group blocks and [`XsInfo`]s.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(crate) unsafe fn group_amx_iq4xs<U: TileUnit>(
    tiles: &mut U,
    scratch: &mut Scratch,
    w: *const u8,
    nb: usize,
    tile: TokenTile<XsInfo>,
) {
    let (sums, levels) = scratch.flat();
    // SAFETY: features and pointer ranges are the caller's contract; vector loads unaligned.
    unsafe {
        let mut acc = [_mm512_setzero_ps(); M];
        let table = _mm512_broadcast_i32x4(_mm_loadu_si128(IQ4NL_LEVELS.as_ptr().cast()));
        for b in 0..nb {
            let blk = w.add(b * IQ4XS_GROUP_BYTES);
            for (j, lv) in levels[..8].iter_mut().enumerate() {
                put_levels(&iq4xs_levels(blk, j, table), lv);
            }
            let a = |j: usize| tile.a(8 * b + j);
            let lv = |j: usize| levels[j].0.as_ptr();
            tile_products(tiles, 8, a, tile.k, lv, false, sums);
            let sc = |j: usize| {
                _mm512_cvtepi8_epi32(_mm_loadu_si128(blk.add(IQ4XS_SCALES + 16 * j).cast()))
            };
            let dw = _mm512_cvtph_ps(_mm256_loadu_si256(blk.cast()));
            for (t, at) in acc[..tile.m].iter_mut().enumerate() {
                let inf = tile.info.add(t * nb + b).read();
                let isum = scaled_sum(sums, t, sc, |j| inf.base[j], 8);
                let scale = _mm512_mul_ps(dw, _mm512_set1_ps(inf.dx));
                *at = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), scale, *at);
            }
        }
        for (t, a) in acc[..tile.m].iter().enumerate() {
            _mm512_storeu_ps(tile.out.add(t * tile.out_stride), *a);
        }
    }
}

/// `isum += sc_j · (base_j + sums[j][t])` over the `n` sub-blocks' stored tile sums for token
/// `t`, in sub-block order (the VNNI kernels' exact integers).
///
/// # Safety
/// avx512f enabled in the caller.
#[inline(always)]
unsafe fn scaled_sum(
    sums: &[CBuf],
    t: usize,
    sc: impl Fn(usize) -> __m512i,
    base: impl Fn(usize) -> i32,
    n: usize,
) -> __m512i {
    // SAFETY: the caller's contract; `sums` rows are 64-byte aligned.
    unsafe {
        let mut isum = _mm512_setzero_si512();
        for (j, s) in sums[..n].iter().enumerate() {
            let raw = _mm512_load_si512(s.0[t].as_ptr().cast());
            let v = _mm512_add_epi32(_mm512_set1_epi32(base(j)), raw);
            isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(v, sc(j)));
        }
        isum
    }
}

/// Writes `C` level chunks into `dst` (tile `B`).
///
/// # Safety
/// avx512f enabled in the caller.
#[inline(always)]
unsafe fn put_levels<const C: usize>(wq: &[__m512i; C], dst: &mut Levels) {
    // SAFETY: `dst` holds 8 aligned chunks of 64 bytes, C ≤ 8.
    unsafe {
        for (c, v) in wq.iter().enumerate() {
            _mm512_store_si512(dst.0.as_mut_ptr().add(64 * c).cast(), *v);
        }
    }
}

/// `sums[i] = A_i · B_i` for `i < n` (`TDPBSSD` where `signed`, else `TDPBSUD`), `A_i` the rows at
/// `a(i)` (`stride` apart), `B_i` the rows of 64 bytes at `b(i)`: product `i` runs on
/// `C[i % 4]`, `A[i % 2]`, `B[i % 2]` and is stored two products later, so each has two
/// products' time to finish before its store waits on it.
///
/// # Safety
/// `tiles` configured; every `a(i)` and `b(i)` readable as [`TileUnit::load`] requires; `n` ≤
/// `sums.len()`. Bytes written by vector stores just before are best not loaded here at once
/// (a tile load waits for them to reach the cache): callers prepare every `B_i` first.
#[inline(always)]
pub(crate) unsafe fn tile_products<U: TileUnit>(
    tiles: &mut U,
    n: usize,
    a: impl Fn(usize) -> *const u8,
    stride: usize,
    b: impl Fn(usize) -> *const u8,
    signed: bool,
    sums: &mut [CBuf],
) {
    macro_rules! product {
        ($c:ident, $a:ident, $b:ident, $i:expr) => {{
            let i = $i;
            tiles.zero::<$c>();
            // SAFETY: readable (caller).
            unsafe {
                tiles.load::<$a>(a(i), stride);
                tiles.load::<$b>(b(i), 64);
            }
            if signed {
                tiles.dot_ss::<$c, $a, $b>();
            } else {
                tiles.dot_su::<$c, $a, $b>();
            }
        }};
    }
    for i in 0..n {
        match i % 4 {
            0 => product!(C0, A0, B0, i),
            1 => product!(C1, A1, B1, i),
            2 => product!(C2, A0, B0, i),
            _ => product!(C3, A1, B1, i),
        }
        if i >= 2 {
            store_sum(tiles, i - 2, sums);
        }
    }
    for i in n.saturating_sub(2)..n {
        store_sum(tiles, i, sums);
    }
}

/// Stores `C[i % 4]` into `sums[i]`.
#[inline(always)]
fn store_sum<U: TileUnit>(tiles: &mut U, i: usize, sums: &mut [CBuf]) {
    match i % 4 {
        0 => tiles.store::<C0>(&mut sums[i]),
        1 => tiles.store::<C1>(&mut sums[i]),
        2 => tiles.store::<C2>(&mut sums[i]),
        _ => tiles.store::<C3>(&mut sums[i]),
    }
}
