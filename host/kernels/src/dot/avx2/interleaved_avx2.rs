//! AVX2 kernels (no AVX-512) over interleaved 32-element-block weights
//! ([`crate::matmul::Interleaved`]: Q4_0, Q8_0, Q5_0, Q4_1, Q5_1, IQ4_NL, MXFP4): the 512-bit
//! group kernels' arithmetic ([`super::interleaved`]) on each 8-row half of a 16-row group, so
//! one activation broadcast feeds 8 rows and a block's float step (one convert, one scale
//! product, one fma) serves 8 rows instead of one.
//!
//! A chunk (4 elements × 8 rows, one 256-bit vector) is multiplied by `maddubs` (unsigned
//! weight bytes × signed activation bytes, adjacent products summed to i16) and the i16 pairs
//! summed to i32 lanes by `madd` with ones. The 4- and 5-bit formats keep their unsigned levels
//! (`u = value + K`, the block sum starting from `-K·Σx` as on the 512-bit kernels); their small
//! levels let 8 (4-bit) or 4 (5-bit) chunks add up in i16 before one `madd`: the largest sum,
//! `8 · 2 · 15 · 127` or `4 · 2 · 31 · 127`, stays below 2^15. Q8_0, IQ4_NL and MXFP4 levels
//! reach 255, which `maddubs` could saturate, so they run signed (`maddubs(|v|, sign(x, v))`,
//! exact for activations in [-127, 127]) from 0: `Σ v·x` is the same integer as
//! `Σ (v + 128)·x - 128·Σx`. MXFP4's values (|v| ≤ 12) still add up 8 chunks in i16.
//!
//! Invariant (bits): lane `r` of token `t` runs `acc = fma(f32(Σ_int), dw · dx, acc)` (Q4_1,
//! Q5_1: then `fma(m_w, s_x, acc)`) block by block from 0, whatever the tile's token count: the
//! order of [`crate::dot::sequential`], so the same bits as the 512-bit kernels.

use std::arch::x86_64::*;

use super::interleaved::{
    IQ4_NL, MXFP4, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, XInfo, block_layout, format_of,
};
use super::interleaved_iq4xs::IQ4NL_LEVELS;
use crate::types::GgmlType;

/// Tokens per inner tile: 8 weight chunks and 4 accumulators stay in the 16 registers.
pub(super) const TOKENS: usize = 4;

/// Whether format `F` runs on signed values (levels that could saturate `maddubs`).
const fn signed<const F: u8>() -> bool {
    matches!(F, Q8_0 | IQ4_NL | MXFP4)
}

/// Chunks whose i16 pair sums add up before one `madd` (see the module doc).
const fn chain<const F: u8>() -> usize {
    match F {
        Q4_0 | Q4_1 | MXFP4 => 8,
        Q5_0 | Q5_1 => 4,
        _ => 1,
    }
}

/// IQ4_NL's and MXFP4's tables as signed values.
const IQ4NL_SIGNED: [i8; 16] = signed_levels(&IQ4NL_LEVELS);
const MXFP4_SIGNED: [i8; 16] = crate::quant::KVALUES_MXFP4;

/// `levels` (value + 128) as the signed values.
const fn signed_levels(levels: &[u8; 16]) -> [i8; 16] {
    let mut v = [0i8; 16];
    let mut i = 0;
    while i < 16 {
        v[i] = (levels[i] as i16 - 128) as i8;
        i += 1;
    }
    v
}

/// The 16-entry table of IQ4_NL / MXFP4 as signed values, in both 128-bit lanes.
///
/// # Safety
/// avx2.
#[inline(always)]
pub(super) unsafe fn signed_table<const F: u8>() -> __m256i {
    let t = if F == MXFP4 {
        &MXFP4_SIGNED
    } else {
        &IQ4NL_SIGNED
    };
    // SAFETY: 16 readable bytes; avx2 (caller).
    unsafe { _mm256_broadcastsi128_si256(_mm_loadu_si128(t.as_ptr().cast())) }
}

/// The high bits of a half chunk: byte `i` is `value` where bit `i` of `m` is set, else 0 (a
/// 5-bit format's fifth bit: 16; Q3_K's third: 4).
///
/// # Safety
/// avx2.
#[inline(always)]
pub(super) unsafe fn high_bits(m: u32, value: i8) -> __m256i {
    // SAFETY: register-only; avx2 (caller).
    unsafe {
        let v = _mm256_set1_epi32(m as i32);
        // Byte i takes byte i / 8 of `m`, then tests its bit i % 8.
        let spread = _mm256_setr_epi8(
            0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3,
            3, 3, 3,
        );
        let bits = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
        let set = _mm256_cmpeq_epi8(_mm256_and_si256(_mm256_shuffle_epi8(v, spread), bits), bits);
        _mm256_and_si256(set, _mm256_set1_epi8(value))
    }
}

/// The levels of half `h` (rows `8h..8h + 8`) of one group block of format `F` as 8 chunks
/// (chunk `c`: elements `4c..4c + 4` of the block, row `r` at bytes `4r..`): unsigned levels,
/// or signed values for the [`signed`] formats.
///
/// # Safety
/// avx2; `blk` points to one group block of the format.
#[inline(always)]
unsafe fn unpack_half<const F: u8>(blk: *const u8, h: usize, table: __m256i) -> [__m256i; 8] {
    let (_, quants) = block_layout::<F>();
    // SAFETY: the block's bytes are readable (caller); all loads unaligned.
    unsafe {
        let mut wq = [_mm256_setzero_si256(); 8];
        if F == Q8_0 {
            let flip = _mm256_set1_epi8(-128);
            for (c, v) in wq.iter_mut().enumerate() {
                let u = _mm256_loadu_si256(blk.add(quants + 64 * c + 32 * h).cast());
                *v = _mm256_xor_si256(u, flip);
            }
            return wq;
        }
        let low = _mm256_set1_epi8(0x0F);
        for c in 0..4 {
            let v = _mm256_loadu_si256(blk.add(quants + 64 * c + 32 * h).cast());
            wq[c] = _mm256_and_si256(v, low);
            wq[c + 4] = _mm256_and_si256(_mm256_srli_epi16::<4>(v), low);
        }
        if F == IQ4_NL || F == MXFP4 {
            for v in &mut wq[..] {
                *v = _mm256_shuffle_epi8(table, *v);
            }
        }
        if F == Q5_0 || F == Q5_1 {
            let masks = if F == Q5_0 { 32 } else { 64 };
            for (c, v) in wq.iter_mut().enumerate() {
                let m = blk.add(masks + 8 * c).cast::<u64>().read_unaligned();
                *v = _mm256_or_si256(*v, high_bits((m >> (32 * h)) as u32, 16));
            }
        }
        wq
    }
}

/// The f32 scales `2^(e - 128)` of 8 E8M0 bytes at `p` (as [`super::interleaved::e8m0_half_x16`]).
///
/// # Safety
/// avx2; `p` points to 8 readable bytes.
#[inline(always)]
unsafe fn e8m0_half_x8(p: *const u8) -> __m256 {
    // SAFETY: 8 readable bytes (caller), unaligned load; avx2 (caller).
    unsafe {
        let e = _mm256_cvtepu8_epi32(_mm_loadl_epi64(p.cast()));
        let normal = _mm256_slli_epi32::<23>(_mm256_sub_epi32(e, _mm256_set1_epi32(1)));
        let small = _mm256_sllv_epi32(_mm256_set1_epi32(0x0020_0000), e);
        let is_small = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e);
        _mm256_castsi256_ps(_mm256_blendv_epi8(normal, small, is_small))
    }
}

/// `s` plus the exact sums `Σ w·x` of the 8 rows of `C` chunks against one token's int8 values
/// at `xq`, widened to i32 lanes: one `maddubs` per chunk (unsigned levels `w[c]`; for the
/// signed formats `|v|`, with the activations given `v`'s signs: `signs = Some(v)`), the i16 pair
/// sums of `chain` consecutive chunks (`chain` divides `C`) added before one `madd`. The
/// caller's levels keep every such i16 sum under 2^15.
///
/// # Safety
/// avx2 enabled in the caller; `xq` readable for `4·C` bytes.
#[inline(always)]
pub(super) unsafe fn chunk_sums<const C: usize>(
    mut s: __m256i,
    w: &[__m256i; C],
    signs: Option<&[__m256i; C]>,
    xq: *const u8,
    chain: usize,
) -> __m256i {
    // SAFETY: `xq` readable (caller), unaligned loads; avx2 (caller).
    unsafe {
        let ones = _mm256_set1_epi16(1);
        let mut pairs = _mm256_setzero_si256();
        for c in 0..C {
            let xv = _mm256_set1_epi32(xq.add(4 * c).cast::<i32>().read_unaligned());
            let xv = match signs {
                Some(v) => _mm256_sign_epi8(xv, v[c]),
                None => xv,
            };
            let p = _mm256_maddubs_epi16(w[c], xv);
            pairs = if c % chain == 0 {
                p
            } else {
                _mm256_add_epi16(pairs, p)
            };
            if (c + 1) % chain == 0 {
                s = _mm256_add_epi32(s, _mm256_madd_epi16(pairs, ones));
            }
        }
        s
    }
}

/// Half `h` of one group × `T` (≤ [`TOKENS`]) tokens over `nb` blocks of format `F`.
///
/// # Safety
/// As [`group_avx2`].
#[inline(always)]
unsafe fn half_tile<const T: usize, const F: u8>(
    w: *const u8,
    nb: usize,
    h: usize,
    x: [*const u8; T],
    info: [*const XInfo; T],
    out: [*mut f32; T],
) {
    let (gb, _) = block_layout::<F>();
    let with_min = F == Q4_1 || F == Q5_1;
    let (xb, xq_off) = if with_min { (36, 4) } else { (34, 2) };
    // SAFETY: features and pointer ranges are the caller's contract; all loads are unaligned.
    unsafe {
        let table = if F == IQ4_NL || F == MXFP4 {
            signed_table::<F>()
        } else {
            _mm256_setzero_si256()
        };
        let mut acc = [_mm256_setzero_ps(); T];
        for b in 0..nb {
            let blk = w.add(b * gb);
            let dw = if F == MXFP4 {
                e8m0_half_x8(blk.add(8 * h))
            } else {
                _mm256_cvtph_ps(_mm_loadu_si128(blk.add(16 * h).cast()))
            };
            let mw = if with_min {
                _mm256_cvtph_ps(_mm_loadu_si128(blk.add(32 + 16 * h).cast()))
            } else {
                _mm256_setzero_ps()
            };
            let wq = unpack_half::<F>(blk, h, table);
            // A plain loop, not a closure: a closure does not inherit `target_feature`.
            let mut wabs = wq;
            if signed::<F>() {
                for v in &mut wabs {
                    *v = _mm256_abs_epi8(*v);
                }
            }
            let signs = signed::<F>().then_some(&wq);
            for t in 0..T {
                let xq = x[t].add(b * xb + xq_off);
                let inf = info[t].add(b).read();
                let base = if signed::<F>() {
                    _mm256_setzero_si256()
                } else {
                    _mm256_set1_epi32(inf.base)
                };
                let s = chunk_sums(base, &wabs, signs, xq, chain::<F>());
                let scale = _mm256_mul_ps(dw, _mm256_set1_ps(inf.dx));
                acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), scale, acc[t]);
                if with_min {
                    acc[t] = _mm256_fmadd_ps(mw, _mm256_set1_ps(inf.sx), acc[t]);
                }
            }
        }
        for t in 0..T {
            _mm256_storeu_ps(out[t].add(8 * h), acc[t]);
        }
    }
}

/// A group kernel over one 8-row half of its group and one sub-tile of up to [`TOKENS`]
/// tokens (`I`: the format's per-(token, block) activation facts).
pub(super) trait SubTile<I> {
    /// Half `h` (rows `8h..8h + 8`) of the group × tokens `x` (their `info`, their 16 outputs
    /// each at `out`).
    ///
    /// # Safety
    /// The kernel's contract ([`group_avx2`], `group_k4_avx2`, ...) for these tokens.
    unsafe fn run<const C: usize>(
        &self,
        h: usize,
        x: [*const u8; C],
        info: [*const I; C],
        out: [*mut f32; C],
    );
}

/// `k` over both halves of its group and the `T` tokens in sub-tiles of up to [`TOKENS`].
///
/// # Safety
/// As [`SubTile::run`] for all `T` tokens.
#[inline(always)]
pub(super) unsafe fn in_token_tiles<I: Copy, K: SubTile<I>, const T: usize>(
    k: &K,
    x: [*const u8; T],
    info: [*const I; T],
    out: [*mut f32; T],
) {
    let mut t0 = 0;
    while t0 < T {
        let c = (T - t0).min(TOKENS);
        macro_rules! call {
            ($c:literal) => {{
                let xs: [*const u8; $c] = std::array::from_fn(|i| x[t0 + i]);
                let is: [*const I; $c] = std::array::from_fn(|i| info[t0 + i]);
                let os: [*mut f32; $c] = std::array::from_fn(|i| out[t0 + i]);
                // SAFETY: a sub-tile of the caller's tokens, each half of the group.
                unsafe {
                    k.run::<$c>(0, xs, is, os);
                    k.run::<$c>(1, xs, is, os);
                }
            }};
        }
        match c {
            1 => call!(1),
            2 => call!(2),
            3 => call!(3),
            _ => call!(4),
        }
        t0 += c;
    }
}

/// One group of format `F` (`nb` blocks at `w`) as a [`SubTile`].
struct Group<const F: u8> {
    w: *const u8,
    nb: usize,
}

impl<const F: u8> SubTile<XInfo> for Group<F> {
    #[inline(always)]
    unsafe fn run<const C: usize>(
        &self,
        h: usize,
        x: [*const u8; C],
        info: [*const XInfo; C],
        out: [*mut f32; C],
    ) {
        // SAFETY: forwarded.
        unsafe { half_tile::<C, F>(self.w, self.nb, h, x, info, out) }
    }
}

/// [`group_avx2`] for format `F`.
///
/// # Safety
/// As [`group_avx2`].
#[inline(always)]
unsafe fn group_f<const T: usize, const F: u8>(
    w: *const u8,
    nb: usize,
    x: [*const u8; T],
    info: [*const XInfo; T],
    out: [*mut f32; T],
) {
    // SAFETY: forwarded.
    unsafe { in_token_tiles(&Group::<F> { w, nb }, x, info, out) }
}

/// `out[t][r] = dot(row r of the group, x[t])` for the 16 rows of one interleaved group of `ty`
/// (Q4_0, Q8_0, Q5_0, Q4_1, Q5_1, IQ4_NL or MXFP4; another type is treated as Q4_0), on AVX2:
/// the bits of [`super::interleaved::group`].
///
/// # Safety
/// avx2/fma/f16c; `w` points to `nb` group blocks of the format
/// ([`crate::matmul::interleave`]); each `x[t]` to `nb` activation blocks of its
/// `vec_dot_type` (values in [-127, 127], as quantization gives), `info[t]` to their `nb`
/// [`XInfo`]s; each `out[t]` to 16 writable f32.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn group_avx2<const T: usize>(
    ty: GgmlType,
    w: *const u8,
    nb: usize,
    x: [*const u8; T],
    info: [*const XInfo; T],
    out: [*mut f32; T],
) {
    // SAFETY: forwarded.
    unsafe {
        match format_of(ty) {
            Q8_0 => group_f::<T, Q8_0>(w, nb, x, info, out),
            Q5_0 => group_f::<T, Q5_0>(w, nb, x, info, out),
            Q4_1 => group_f::<T, Q4_1>(w, nb, x, info, out),
            Q5_1 => group_f::<T, Q5_1>(w, nb, x, info, out),
            IQ4_NL => group_f::<T, IQ4_NL>(w, nb, x, info, out),
            MXFP4 => group_f::<T, MXFP4>(w, nb, x, info, out),
            _ => group_f::<T, Q4_0>(w, nb, x, info, out),
        }
    }
}
