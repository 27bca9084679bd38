//! AVX-512 VNNI tiles of the 32-element int8 formats (Q8_0, Q4_0, Q5_0 against Q8_0; Q4_1, Q5_1
//! against Q8_1): two blocks per 512-bit vector, one `vpdpbusd` per (row, token) and block pair.
//!
//! Weights enter as unsigned levels `u = value + K` (Q8_0: `w ^ 0x80`, K = 128; Q4_0: nibbles,
//! K = 8; Q5_0: 5-bit levels, K = 16; affine formats: K = 0, their min terms `m * s` once per 16 blocks as one 16-lane `fma` of the
//! rows' mins with the token's Q8_1 sums). Each
//! token's pair starts its integer lanes at `-K * Σx` (computed once per token, shared by all
//! rows), so `vpdpbusd(-KΣx, u, x)` is the exact i32 lane sum of `value * x` with no sign trick
//! and no saturation. Per pair the float step is `acc = fma(dw * dx, f32(lanes), acc)` with the
//! low 8 lanes scaled by the first block, the high 8 by the second; an odd last block runs with
//! a zero upper half. Results differ from the AVX2 build by reassociation only.
//! Batches first convert each activation row once into [`XPair`]s (the int8 pair, its scale
//! vector and its `-KΣx` lanes, [`pack_row`]); a pair read from there holds exactly the values
//! the unpacked kernels compute on the fly, so both give the same bits.
//! Invariant (batch invariance): per (row, token) the op sequence is independent of `R`, `C`.

use std::arch::x86_64::*;

use super::q32::{bit_masks, load_f16x2, nibbles};
use super::{hsum, load_f16, load256};
use crate::types::GgmlType;

/// Q8_0 / Q8_1 / Q4_0 / Q4_1 / Q5_0 / Q5_1 block sizes in bytes.
const Q8_0_SIZE: usize = 34;
const Q8_1_SIZE: usize = 36;
const Q4_0_SIZE: usize = 18;
const Q4_1_SIZE: usize = 20;
const Q5_0_SIZE: usize = 22;
const Q5_1_SIZE: usize = 24;

/// `[a; 8] ++ [b; 8]`.
#[inline(always)]
fn halves(a: f32, b: f32) -> __m512 {
    // SAFETY: avx512f is enabled in every caller (all are `target_feature` avx512 functions
    // inlined into the entry points below).
    unsafe {
        let lo = _mm512_castpd256_pd512(_mm256_castps_pd(_mm256_set1_ps(a)));
        _mm512_castpd_ps(_mm512_insertf64x4::<1>(
            lo,
            _mm256_castps_pd(_mm256_set1_ps(b)),
        ))
    }
}

/// Horizontal sum in a fixed order: low 256 + high 256, then [`hsum`].
#[inline(always)]
fn hsum512(v: __m512) -> f32 {
    // SAFETY: avx512f/avx2 enabled in every caller (see `halves`).
    unsafe {
        let lo = _mm512_castps512_ps256(v);
        let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v)));
        hsum(_mm256_add_ps(lo, hi))
    }
}

/// One token's block pair as the pair step consumes it (256 bytes, 64-aligned).
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub(crate) struct XPair {
    /// 64 int8: block `2p`, then block `2p + 1` (zero for an odd last block).
    q: __m512i,
    /// `[dx0; 8] ++ [dx1; 8]`.
    d: __m512,
    /// `-K * Σx` per 4-element lane.
    base: __m512i,
    /// In pair `8c` of an affine format's row: Q8_1's `s` of blocks `16c..16c + 16` (zero past
    /// the row's end); zero elsewhere.
    s: [f32; 16],
}
const _: () = assert!(std::mem::size_of::<XPair>() == 256);

impl XPair {
    /// An all-zero pair (buffer filler, overwritten by [`pack_row`]).
    pub(crate) fn zeroed() -> Self {
        XPair {
            // SAFETY: plain integer / float vectors; all-zero bits are valid values.
            q: unsafe { std::mem::zeroed() },
            // SAFETY: as above.
            d: unsafe { std::mem::zeroed() },
            // SAFETY: as above.
            base: unsafe { std::mem::zeroed() },
            s: [0.0; 16],
        }
    }
}

/// The pair of activation blocks at `p` (`FULL`) or the single last block (upper half zero).
///
/// # Safety
/// avx512 features (as [`body`]); `p` points to 2 (`FULL`) or 1 activation blocks of `XB` bytes.
#[inline(always)]
unsafe fn x_pair<const XB: usize, const XQ: usize, const K: u8, const FULL: bool>(
    p: *const u8,
) -> XPair {
    // SAFETY: the caller guarantees the features and readable blocks; loads are unaligned.
    unsafe {
        let zero = _mm512_setzero_si512();
        let lo = _mm512_castsi256_si512(load256(p.add(XQ)));
        let (q, d) = if FULL {
            let p1 = p.add(XB);
            let q = _mm512_inserti64x4::<1>(lo, load256(p1.add(XQ)));
            (q, halves(load_f16(p), load_f16(p1)))
        } else {
            // Upper half all zero: it adds 0 * 0 to every upper lane.
            let q = _mm512_inserti64x4::<1>(lo, _mm256_setzero_si256());
            (q, halves(load_f16(p), 0.0))
        };
        let base = if K != 0 {
            _mm512_sub_epi32(
                zero,
                _mm512_dpbusd_epi32(zero, _mm512_set1_epi8(K as i8), q),
            )
        } else {
            zero
        };
        XPair {
            q,
            d,
            base,
            s: [0.0; 16],
        }
    }
}

/// Q8_1's `s` of blocks `16c..16c + 16` of a row of `nb` blocks at `x` (zero past the end).
///
/// # Safety
/// f16c; `x` points to `nb` Q8_1 blocks.
#[inline(always)]
unsafe fn chunk_s(x: *const u8, nb: usize, c: usize) -> [f32; 16] {
    let mut s = [0.0f32; 16];
    for (i, v) in s.iter_mut().enumerate().take(nb.saturating_sub(16 * c)) {
        // SAFETY: block 16c + i < nb of x (caller).
        *v = unsafe { load_f16x2(x.add((16 * c + i) * Q8_1_SIZE)).1 };
    }
    s
}

/// Accumulators of one tile.
struct Acc<const R: usize, const C: usize> {
    /// Per (row, token): the scaled block-pair sums.
    dot: [[__m512; C]; R],
    /// Per row: the mins of the current 16-block chunk (affine formats only; zero past the end).
    mins: [[f32; 16]; R],
}

/// One block pair starting at block `b0` (only block `b0` when `!FULL`); `xs(t)` gives token
/// `t`'s pair.
///
/// # Safety
/// As [`body`], with `b0 + 1 < nb` when `FULL`, `b0 < nb` otherwise; `xs(t)` safe for t < C.
#[inline(always)]
unsafe fn pair<const R: usize, const C: usize, const AFFINE: bool, const FULL: bool>(
    decode: &impl Fn(usize, usize) -> (f32, f32, __m256i),
    xs: impl Fn(usize) -> XPair,
    b0: usize,
    acc: &mut Acc<R, C>,
) {
    // SAFETY: the caller guarantees the features and readable blocks; all loads are unaligned.
    unsafe {
        let mut wd = [_mm512_setzero_ps(); R];
        let mut wq = [_mm512_setzero_si512(); R];
        for r in 0..R {
            let (d0, m0, q0) = decode(r, b0);
            let (d1, m1, q1) = if FULL {
                decode(r, b0 + 1)
            } else {
                (0.0, 0.0, _mm256_setzero_si256())
            };
            wq[r] = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(q0), q1);
            wd[r] = halves(d0, d1);
            if AFFINE {
                let i = b0 % 16;
                acc.mins[r][i] = m0;
                acc.mins[r][i + 1] = m1;
            }
        }
        for t in 0..C {
            let x = xs(t);
            for r in 0..R {
                let s = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(x.base, wq[r], x.q));
                acc.dot[r][t] = _mm512_fmadd_ps(_mm512_mul_ps(wd[r], x.d), s, acc.dot[r][t]);
            }
        }
    }
}

/// Runs every pair of `nb` blocks and reduces; `xs(p, t, FULL)` gives token `t`'s pair `p`,
/// `ss(c, t)` token `t`'s Q8_1 sums of chunk `c` (affine formats). After each chunk of 16 blocks
/// (8 pairs, or the row's end) the affine formats add `mins ⊙ s` lane-wise.
///
/// # Safety
/// avx2/fma/f16c/avx512f/avx512bw/avx512vl/avx512vnni; `decode(r, b)` safe for r < R, b < nb;
/// `xs` safe for every pair and token; levels + K fit a byte, R ≤ 8 when `AFFINE`.
#[inline(always)]
unsafe fn body<const R: usize, const C: usize, const AFFINE: bool>(
    decode: impl Fn(usize, usize) -> (f32, f32, __m256i),
    xs: impl Fn(usize, usize, bool) -> XPair,
    ss: impl Fn(usize, usize) -> [f32; 16],
    nb: usize,
    out: &mut [[f32; C]; R],
) {
    // SAFETY: the caller guarantees the features and readable blocks (forwarded to `pair`).
    unsafe {
        let mut acc = Acc {
            dot: [[_mm512_setzero_ps(); C]; R],
            mins: [[0.0; 16]; R],
        };
        let pairs = nb.div_ceil(2);
        for p in 0..pairs {
            if 2 * p + 1 < nb {
                pair::<R, C, AFFINE, true>(&decode, |t| xs(p, t, true), 2 * p, &mut acc);
            } else {
                pair::<R, C, AFFINE, false>(&decode, |t| xs(p, t, false), 2 * p, &mut acc);
            }
            if AFFINE && (p % 8 == 7 || p + 1 == pairs) {
                let c = p / 8;
                for t in 0..C {
                    let sv = ss(c, t);
                    let sv = _mm512_loadu_ps(sv.as_ptr());
                    for r in 0..R {
                        let mv = _mm512_loadu_ps(acc.mins[r].as_ptr());
                        acc.dot[r][t] = _mm512_fmadd_ps(mv, sv, acc.dot[r][t]);
                    }
                }
                acc.mins = [[0.0; 16]; R];
            }
        }
        for t in 0..C {
            for r in 0..R {
                out[r][t] = hsum512(acc.dot[r][t]);
            }
        }
    }
}

/// Declares the 512-bit entry points of a format: the tile on raw activation rows, the tile on
/// packed rows and the packer. `$decode(p)` maps a weight block pointer to (d, m, levels).
macro_rules! entry {
    ($tile:ident, $packed:ident, $pack:ident, $what:literal, $wb:expr, $xb:expr, $xq:expr, $k:expr, $affine:expr, $decode:expr) => {
        #[doc = concat!("512-bit VNNI tile of ", $what, ".")]
        ///
        /// # Safety
        #[doc = concat!("avx2/fma/f16c/avx512f/avx512bw/avx512vl/avx512vnni; every `w[r]` and `x[t]` points to `nb` blocks of ", $what, ".")]
        #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
        pub(crate) unsafe fn $tile<const R: usize, const C: usize>(
            w: [*const u8; R],
            x: [*const u8; C],
            nb: usize,
            out: &mut [[f32; C]; R],
        ) {
            let decode = |r: usize, b: usize| {
                // SAFETY: b < nb blocks at w[r] (caller), so one whole block at the pointer;
                // features enabled here.
                unsafe { ($decode)(w[r].add(b * $wb)) }
            };
            let xs = |p: usize, t: usize, full: bool| {
                // SAFETY: pair p of nb blocks at x[t] (caller): two blocks when full, else one.
                unsafe {
                    let at = x[t].add(2 * p * $xb);
                    if full {
                        x_pair::<$xb, $xq, $k, true>(at)
                    } else {
                        x_pair::<$xb, $xq, $k, false>(at)
                    }
                }
            };
            // SAFETY: chunk c of the nb Q8_1 blocks at x[t] (only used by affine formats).
            let ss = |c: usize, t: usize| unsafe { chunk_s(x[t], nb, c) };
            // SAFETY: same contract; levels + K ≤ 255.
            unsafe { body::<R, C, $affine>(decode, xs, ss, nb, out) }
        }

        #[doc = concat!("[`", stringify!($tile), "`] on rows packed by [`", stringify!($pack), "`] (same bits).")]
        ///
        /// # Safety
        #[doc = concat!("As [`", stringify!($tile), "`]; every `x[t]` points to `nb.div_ceil(2)` packed pairs.")]
        #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
        pub(crate) unsafe fn $packed<const R: usize, const C: usize>(
            w: [*const u8; R],
            x: [*const XPair; C],
            nb: usize,
            out: &mut [[f32; C]; R],
        ) {
            let decode = |r: usize, b: usize| {
                // SAFETY: b < nb blocks at w[r] (caller), so one whole block at the pointer;
                // features enabled here.
                unsafe { ($decode)(w[r].add(b * $wb)) }
            };
            // SAFETY: p < nb.div_ceil(2) pairs at x[t] (caller).
            let xs = |p: usize, t: usize, _full: bool| unsafe { x[t].add(p).read() };
            // SAFETY: pair 8c < nb.div_ceil(2) at x[t] (c indexes a chunk of the row).
            let ss = |c: usize, t: usize| unsafe { (*x[t].add(8 * c)).s };
            // SAFETY: same contract; levels + K ≤ 255.
            unsafe { body::<R, C, $affine>(decode, xs, ss, nb, out) }
        }

        #[doc = concat!("Packs one activation row of `nb` blocks for [`", stringify!($packed), "`].")]
        ///
        /// # Safety
        /// avx512 features as above; `x` points to `nb` activation blocks, `dst` to
        /// `nb.div_ceil(2)` writable pairs.
        #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
        pub(crate) unsafe fn $pack(x: *const u8, nb: usize, dst: *mut XPair) {
            // SAFETY: pair p covers blocks 2p, 2p + 1 < nb of x and slot p < nb.div_ceil(2).
            unsafe {
                for p in 0..nb / 2 {
                    dst.add(p).write(x_pair::<$xb, $xq, $k, true>(x.add(2 * p * $xb)));
                }
                if nb % 2 == 1 {
                    let p = nb / 2;
                    dst.add(p).write(x_pair::<$xb, $xq, $k, false>(x.add(2 * p * $xb)));
                }
                if $affine {
                    for c in 0..nb.div_ceil(16) {
                        (*dst.add(8 * c)).s = chunk_s(x, nb, c);
                    }
                }
            }
        }
    };
}

// Decoders run inside the entry's unsafe block, on one readable block at `p`.
entry!(
    tile_q8_0,
    packed_q8_0,
    pack_q8_0,
    "Q8_0 · Q8_0",
    Q8_0_SIZE,
    Q8_0_SIZE,
    2,
    128,
    false,
    |p: *const u8| {
        let q = _mm256_xor_si256(load256(p.add(2)), _mm256_set1_epi8(-128));
        (load_f16(p), 0.0, q)
    }
);
entry!(
    tile_q4_0,
    packed_q4_0,
    pack_q4_0,
    "Q4_0 · Q8_0",
    Q4_0_SIZE,
    Q8_0_SIZE,
    2,
    8,
    false,
    |p: *const u8| { (load_f16(p), 0.0, nibbles(p.add(2))) }
);
entry!(
    tile_q5_0,
    packed_q5_0,
    pack_q5_0,
    "Q5_0 · Q8_0",
    Q5_0_SIZE,
    Q8_0_SIZE,
    2,
    16,
    false,
    |p: *const u8| {
        let hi = _mm256_and_si256(bit_masks(p.add(2)), _mm256_set1_epi8(0x10));
        (load_f16(p), 0.0, _mm256_or_si256(nibbles(p.add(6)), hi))
    }
);
entry!(
    tile_q4_1,
    packed_q4_1,
    pack_q4_1,
    "Q4_1 · Q8_1",
    Q4_1_SIZE,
    Q8_1_SIZE,
    4,
    0,
    true,
    |p: *const u8| {
        let (d, m) = load_f16x2(p);
        (d, m, nibbles(p.add(4)))
    }
);
entry!(
    tile_q5_1,
    packed_q5_1,
    pack_q5_1,
    "Q5_1 · Q8_1",
    Q5_1_SIZE,
    Q8_1_SIZE,
    4,
    0,
    true,
    |p: *const u8| {
        let (d, m) = load_f16x2(p);
        let hi = _mm256_and_si256(bit_masks(p.add(4)), _mm256_set1_epi8(0x10));
        (d, m, _mm256_or_si256(nibbles(p.add(8)), hi))
    }
);

/// Whether `ty` has packed 512-bit tiles.
pub(crate) fn packs(ty: GgmlType) -> bool {
    matches!(
        ty,
        GgmlType::Q8_0 | GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::Q4_1 | GgmlType::Q5_1
    )
}

/// Packs one activation row (`n` elements of `ty.vec_dot_type()`) into `n / 64` rounded up
/// pairs at `dst`. Does nothing for types without packed tiles ([`packs`]).
///
/// # Safety
/// avx2/fma/f16c/avx512f/avx512bw/avx512vl/avx512vnni; `x` points to one activation row of `n`
/// elements (`n` a multiple of 32), `dst` to `(n / 32).div_ceil(2)` writable pairs.
pub(crate) unsafe fn pack_row(ty: GgmlType, x: *const u8, n: usize, dst: *mut XPair) {
    let nb = n / 32;
    // SAFETY: forwarded.
    unsafe {
        match ty {
            GgmlType::Q8_0 => pack_q8_0(x, nb, dst),
            GgmlType::Q4_0 => pack_q4_0(x, nb, dst),
            GgmlType::Q5_0 => pack_q5_0(x, nb, dst),
            GgmlType::Q4_1 => pack_q4_1(x, nb, dst),
            GgmlType::Q5_1 => pack_q5_1(x, nb, dst),
            _ => {}
        }
    }
}

/// `out[r][t] = dot(w[r], x[t])` on packed activation rows; a type without packed tiles
/// ([`packs`]) leaves `out` untouched.
///
/// # Safety
/// As [`pack_row`]; every `w[r]` points to one weight row of `n` elements of `ty`, every `x[t]`
/// to a row packed by [`pack_row`] for `ty` and `n`.
pub(crate) unsafe fn tile_packed<const R: usize, const C: usize>(
    ty: GgmlType,
    w: [*const u8; R],
    x: [*const XPair; C],
    n: usize,
    out: &mut [[f32; C]; R],
) {
    let nb = n / 32;
    // SAFETY: forwarded.
    unsafe {
        match ty {
            GgmlType::Q8_0 => packed_q8_0::<R, C>(w, x, nb, out),
            GgmlType::Q4_0 => packed_q4_0::<R, C>(w, x, nb, out),
            GgmlType::Q5_0 => packed_q5_0::<R, C>(w, x, nb, out),
            GgmlType::Q4_1 => packed_q4_1::<R, C>(w, x, nb, out),
            GgmlType::Q5_1 => packed_q5_1::<R, C>(w, x, nb, out),
            _ => {}
        }
    }
}
