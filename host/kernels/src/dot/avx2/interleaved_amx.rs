//! AMX tile kernel over interleaved 32-element-block weights ([`crate::matmul::Interleaved`]:
//! Q4_0, Q8_0, Q5_0, Q4_1, Q5_1, IQ4_NL, MXFP4) for 16 tokens at a time, and the tile product
//! pipeline every tile kernel shares ([`tile_products`]): per chunk of blocks, one tile product
//! per block forms the 16 tokens × 16 rows integer sums into a scratch, then each token's lane
//! runs the float step of [`super::interleaved`] over the chunk.
//!
//! The interleaved quant chunks are already a tile's `B` operand (chunk `c` = 4 elements × 16
//! rows = tile row `c`): Q8_0's `q + 128` levels load straight from the weights (`TDPBSUD`, the
//! activation info's `base` corrects the offset), the 4- and 5-bit formats are unpacked to
//! signed levels (`TDPBSSD`, no offset; Q4_1 / Q5_1 keep unsigned levels) for a whole chunk
//! before its first tile load (a tile load right after the vector stores of its bytes waits for
//! them). `A` is the 16 tokens' int8 values of the block, packed once per matmul by the driver.
//! No weight copy: the memory cost is a task's [`Scratch`] (24 KiB) and the packed activations.
//! Invariant (bits): the tile's i32 sum is `Σ x·q` exactly (no saturation), the VNNI kernel's
//! lane value, and `acc = fma(f32(s), dw · dx, acc)` (Q4_1, Q5_1: then `fma(m_w, s_x, acc)`) runs
//! block by block from 0 as there: the [`crate::dot::sequential`] reference, bit for bit, for
//! any token tiling.

use std::arch::x86_64::*;

use super::interleaved::{
    IQ4_NL, MXFP4, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, XInfo, block_layout, e8m0_half_x16, format_of,
    level_table, unpack_block,
};
use crate::amx::{A0, A1, B0, B1, C0, C1, C2, C3, CBuf, M, TileUnit};
use crate::types::GgmlType;

/// The unpacked levels of one block or sub-block: tile `B`, up to 8 rows of 64 bytes.
#[repr(C, align(64))]
pub(crate) struct Levels(pub [u8; 512]);

/// Where one tile of up to 16 tokens of a group's product reads and writes (`I`: the format's
/// per-(token, block) activation facts).
#[derive(Clone, Copy)]
pub(crate) struct TokenTile<I> {
    /// The tile's activation values packed for tile `A` loads: unit `u` (the `u`-th run of `K`
    /// values of a row, `K` the kernel's tile width) of the 16 tokens is 16 rows of `K` bytes
    /// at `a + u·16·K` ([`TokenTile::a`]).
    pub a: *const u8,
    /// `K`: bytes of one packed row.
    pub k: usize,
    /// Tokens in the tile (1..=16: the tiles' configured rows); outputs and infos of the first
    /// `m` only.
    pub m: usize,
    /// Token 0's `nb` infos; token `t`'s start `t · nb` later.
    pub info: *const I,
    /// Token 0's 16 outputs; token `t`'s start `t · out_stride` later.
    pub out: *mut f32,
    pub out_stride: usize,
}

impl<I> TokenTile<I> {
    /// Unit `u`'s 16 rows (`k` bytes apart).
    ///
    /// # Safety
    /// `u` is a unit of the tile's packed activations.
    #[inline(always)]
    pub(crate) unsafe fn a(&self, u: usize) -> *const u8 {
        // SAFETY: inside the packed activations (caller).
        unsafe { self.a.add(u * M * self.k) }
    }
}

/// `out[t][r] = dot(row r of the group, x[t])` for the 16 rows of one interleaved group of
/// `ty` and the 16 tokens of `tile`, on `tiles` (configured for `A` = 16 × 32 bytes).
///
/// # Safety
/// avx512f/bw/vl + avx2/fma/f16c; `w` points to `nb` group blocks of `ty`'s layout; the tile's
/// 16 activation rows, their `nb` infos each and their 16 outputs each are valid as described
/// on [`TokenTile`] (outputs writable).
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
pub(crate) unsafe fn group_amx<U: TileUnit>(
    tiles: &mut U,
    scratch: &mut Scratch,
    ty: GgmlType,
    w: *const u8,
    nb: usize,
    tile: TokenTile<XInfo>,
) {
    // SAFETY: forwarded.
    unsafe {
        match format_of(ty) {
            Q8_0 => group_amx_f::<U, Q8_0>(tiles, scratch, w, nb, tile),
            Q5_0 => group_amx_f::<U, Q5_0>(tiles, scratch, w, nb, tile),
            Q4_1 => group_amx_f::<U, Q4_1>(tiles, scratch, w, nb, tile),
            Q5_1 => group_amx_f::<U, Q5_1>(tiles, scratch, w, nb, tile),
            IQ4_NL => group_amx_f::<U, IQ4_NL>(tiles, scratch, w, nb, tile),
            MXFP4 => group_amx_f::<U, MXFP4>(tiles, scratch, w, nb, tile),
            _ => group_amx_f::<U, Q4_0>(tiles, scratch, w, nb, tile),
        }
    }
}

/// Blocks whose tile sums one pass stores before their float steps run (16 KiB of sums).
pub(crate) const CHUNK: usize = 16;

/// A task's working memory for the tile kernels (about 17 KiB, made once per task so no
/// kernel call clears it): block sums and unpacked levels.
pub(crate) struct Scratch {
    pub sums: [CBuf; CHUNK],
    pub levels: [Levels; CHUNK],
}

impl Default for Scratch {
    fn default() -> Self {
        Scratch {
            sums: [CBuf::default(); CHUNK],
            levels: [const { Levels([0; 512]) }; CHUNK],
        }
    }
}

/// The signed levels of one group block of format `F` (the VNNI kernel's unsigned levels less
/// the format's offset: `q` for Q8_0, `q - 8` for Q4_0, `q - 16` for Q5_0, the table's value
/// for IQ4_NL / MXFP4; Q4_1 / Q5_1 keep their unsigned levels) into `dst`: tile `B`.
///
/// # Safety
/// avx512f/bw; `blk` points to one group block of the format.
#[inline(always)]
unsafe fn prepare_b<const F: u8>(blk: *const u8, quants: usize, table: __m512i, dst: &mut Levels) {
    // SAFETY: the block's bytes are readable (caller); the stores stay inside `dst`.
    unsafe {
        let wq = unpack_block::<F>(blk, quants, table);
        for (c, v) in wq.iter().enumerate() {
            let v = match F {
                Q8_0 | IQ4_NL | MXFP4 => _mm512_xor_si512(*v, _mm512_set1_epi8(-128)),
                Q4_0 => _mm512_sub_epi8(*v, _mm512_set1_epi8(8)),
                Q5_0 => _mm512_sub_epi8(*v, _mm512_set1_epi8(16)),
                _ => *v,
            };
            _mm512_store_si512(dst.0.as_mut_ptr().add(64 * c).cast(), v);
        }
    }
}

/// [`group_amx`] for format `F`: blocks in chunks of [`CHUNK`]; for each chunk the tiles form
/// every block's 16 × 16 integer sums into `sums` (two `C`/`A`/`B` tile sets alternating, so a
/// block's product runs while the previous block's sums are stored), then each token's float
/// steps run over the chunk in block order.
///
/// # Safety
/// As [`group_amx`].
#[inline(always)]
unsafe fn group_amx_f<U: TileUnit, const F: u8>(
    tiles: &mut U,
    scratch: &mut Scratch,
    w: *const u8,
    nb: usize,
    tile: TokenTile<XInfo>,
) {
    let (gb, quants) = block_layout::<F>();
    let with_min = F == Q4_1 || F == Q5_1;
    let Scratch { sums, levels } = scratch;
    // SAFETY: features and pointer ranges are the caller's contract; vector loads unaligned.
    unsafe {
        let mut acc = [_mm512_setzero_ps(); M];
        let table = level_table::<F>();
        for b0 in (0..nb).step_by(CHUNK) {
            let n = CHUNK.min(nb - b0);
            // The chunk's levels first: a tile load right after the vector stores that wrote
            // its bytes waits for them to reach the cache.
            if F != Q8_0 {
                for (i, lv) in levels[..n].iter_mut().enumerate() {
                    prepare_b::<F>(w.add((b0 + i) * gb), quants, table, lv);
                }
            }
            let b = |i: usize| {
                if F == Q8_0 {
                    w.add((b0 + i) * gb + quants)
                } else {
                    levels[i].0.as_ptr()
                }
            };
            let a = |i: usize| tile.a(b0 + i);
            // Signed levels but Q8_0's (its base corrects them) and Q4_1 / Q5_1's (their sums
            // need no offset).
            let signed = !(with_min || F == Q8_0);
            tile_products(tiles, n, a, tile.k, b, signed, sums);
            for (i, s) in sums[..n].iter().enumerate() {
                let b = b0 + i;
                let blk = w.add(b * gb);
                let dw = if F == MXFP4 {
                    e8m0_half_x16(blk)
                } else {
                    _mm512_cvtph_ps(_mm256_loadu_si256(blk.cast()))
                };
                let mw = if with_min {
                    _mm512_cvtph_ps(_mm256_loadu_si256(blk.add(32).cast()))
                } else {
                    _mm512_setzero_ps()
                };
                for (t, a) in acc[..tile.m].iter_mut().enumerate() {
                    let inf = tile.info.add(t * nb + b).read();
                    let mut raw = _mm512_load_si512(s.0[t].as_ptr().cast());
                    if F == Q8_0 {
                        raw = _mm512_add_epi32(raw, _mm512_set1_epi32(inf.base));
                    }
                    let scale = _mm512_mul_ps(dw, _mm512_set1_ps(inf.dx));
                    *a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(raw), scale, *a);
                    if with_min {
                        *a = _mm512_fmadd_ps(mw, _mm512_set1_ps(inf.sx), *a);
                    }
                }
            }
        }
        for (t, a) in acc[..tile.m].iter().enumerate() {
            _mm512_storeu_ps(tile.out.add(t * tile.out_stride), *a);
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
