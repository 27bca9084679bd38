//! AVX-512 VNNI kernels over interleaved Q4_K, Q5_K and Q6_K weights ([`crate::matmul::Interleaved`])
//! against Q8_K activations. Q4_K: per sub-block, 8 `vpdpbusd` sum 32 nibbles × int8 for 16
//! rows at once, one `vpmulld` applies the 16 rows' 6-bit scales, and the mins enter through 4
//! `vpdpwssd` of the rows' min pairs against the token's sub-block sums; Q5_K adds each
//! level's fifth bit from a byte mask (`vmovdqu8` zero-masked). Q6_K: the 6-bit levels
//! `u = q + 32` are rebuilt from nibble and top-bit chunks (one `vpternlogd`), each sub-block's
//! sum starts from the token's `-32·Σx` and gets its signed scale by `vpmulld`. The float step
//! runs once per 256 elements.
//!
//! Invariant (batch invariance): lane `r` of token `t` runs, super-block by super-block from 0,
//! `acc = fma(f32(Σ_j sc_j·Σ u·x), d·dx, acc)` then (Q4_K, Q5_K) `acc = fma(-f32(Σ_j m_j·Σ x),
//! dmin·dx, acc)` with exact integer sums, whatever the tile's token count: the order of
//! [`crate::dot::sequential`], bit for bit.

use std::arch::x86_64::*;

use crate::matmul::interleave::{
    Q4K_DMIN, Q4K_MINS, Q4K_QUANTS, Q4K_SCALES, Q5K_MASKS, Q5K_QUANTS, Q6K_HIGH, Q6K_LOW,
    Q6K_SCALES,
};

/// Per token and super-block: the activation scale and the sub-block sums `Σ x` of each
/// sub-block pair `k`, packed as two i16 (`2k` low, `2k + 1` high) for `vpdpwssd`.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
pub(crate) struct KInfo {
    pub dx: f32,
    pub sums: [i32; 4],
}

/// Per token and super-block for Q6_K, Q3_K and Q2_K: the activation scale and a figure per
/// 16-element sub-block (see [`sub16_infos`]).
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
pub(crate) struct Q6Info {
    pub dx: f32,
    pub base: [i32; 16],
}

/// Bytes of one Q6_K group block.
pub(crate) const Q6K_GROUP_BYTES: usize = Q6K_HIGH + 16 * 64;
/// Bytes of one Q4_K group block.
pub(crate) const Q4K_GROUP_BYTES: usize = Q4K_QUANTS + 32 * 64;
/// Bytes of one Q5_K group block.
pub(crate) const Q5K_GROUP_BYTES: usize = Q5K_QUANTS + 32 * 64;
/// Bytes of one Q8_K activation block, and the offset of its values.
const XB: usize = 292;
const XQ: usize = 4;

/// `out[t][r] = dot(row r of the group, x[t])` for the 16 rows of one interleaved Q4_K group.
///
/// # Safety
/// avx512f/bw/vl/vnni + avx2/fma/f16c; `w` points to `nb` Q4_K group blocks
/// ([`crate::matmul::interleave`]); each `x[t]` to `nb` Q8_K blocks, `info[t]` to their `nb`
/// [`KInfo`]s; each `out[t]` to 16 writable f32.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(crate) unsafe fn group_q4k<const T: usize>(
    w: *const u8,
    nb: usize,
    x: [*const u8; T],
    info: [*const KInfo; T],
    out: [*mut f32; T],
) {
    // SAFETY: forwarded.
    unsafe { group_k4::<T, false>(w, nb, x, info, out) }
}

/// [`group_q4k`] for interleaved Q5_K groups (the same, with each level's fifth bit).
///
/// # Safety
/// As [`group_q4k`], with Q5_K group blocks.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(crate) unsafe fn group_q5k<const T: usize>(
    w: *const u8,
    nb: usize,
    x: [*const u8; T],
    info: [*const KInfo; T],
    out: [*mut f32; T],
) {
    // SAFETY: forwarded.
    unsafe { group_k4::<T, true>(w, nb, x, info, out) }
}

/// The Q4_K / Q5_K (`Q5`) body of [`group_q4k`] and [`group_q5k`].
///
/// # Safety
/// As [`group_q4k`].
#[inline(always)]
unsafe fn group_k4<const T: usize, const Q5: bool>(
    w: *const u8,
    nb: usize,
    x: [*const u8; T],
    info: [*const KInfo; T],
    out: [*mut f32; T],
) {
    let (bytes, quants) = if Q5 {
        (Q5K_GROUP_BYTES, Q5K_QUANTS)
    } else {
        (Q4K_GROUP_BYTES, Q4K_QUANTS)
    };
    // SAFETY: features and pointer ranges are the caller's contract; all loads are unaligned.
    unsafe {
        let mut acc = [_mm512_setzero_ps(); T];
        let (low, sixteen) = (_mm512_set1_epi8(0x0F), _mm512_set1_epi8(16));
        for b in 0..nb {
            let blk = w.add(b * bytes);
            let mut isum = [_mm512_setzero_si512(); T];
            for j in 0..8 {
                let chunks = blk.add(quants + 64 * 8 * (j / 2));
                let mut wq = [_mm512_setzero_si512(); 8];
                for (c, v) in wq.iter_mut().enumerate() {
                    let raw = _mm512_loadu_si512(chunks.add(64 * c).cast());
                    *v = if j % 2 == 0 {
                        _mm512_and_si512(raw, low)
                    } else {
                        _mm512_and_si512(_mm512_srli_epi16::<4>(raw), low)
                    };
                    if Q5 {
                        let m = blk
                            .add(Q5K_MASKS + 8 * (8 * j + c))
                            .cast::<u64>()
                            .read_unaligned();
                        *v = _mm512_or_si512(*v, _mm512_maskz_mov_epi8(m, sixteen));
                    }
                }
                let sc = _mm512_cvtepu8_epi32(_mm_loadu_si128(blk.add(Q4K_SCALES + 16 * j).cast()));
                for t in 0..T {
                    let xq = x[t].add(b * XB + XQ + 32 * j);
                    let mut s = _mm512_setzero_si512();
                    for (c, &wv) in wq.iter().enumerate() {
                        let xv = _mm512_set1_epi32(xq.add(4 * c).cast::<i32>().read_unaligned());
                        s = _mm512_dpbusd_epi32(s, wv, xv);
                    }
                    isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(s, sc));
                }
            }
            let dw = _mm512_cvtph_ps(_mm256_loadu_si256(blk.cast()));
            let dm = _mm512_cvtph_ps(_mm256_loadu_si256(blk.add(Q4K_DMIN).cast()));
            for t in 0..T {
                let inf = info[t].add(b).read();
                let mut mins = _mm512_setzero_si512();
                for k in 0..4 {
                    let pairs = _mm256_loadu_si256(blk.add(Q4K_MINS + 32 * k).cast());
                    let mv = _mm512_cvtepu8_epi16(pairs);
                    mins = _mm512_dpwssd_epi32(mins, mv, _mm512_set1_epi32(inf.sums[k]));
                }
                let dx = _mm512_set1_ps(inf.dx);
                acc[t] =
                    _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_mul_ps(dw, dx), acc[t]);
                acc[t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(mins), _mm512_mul_ps(dm, dx), acc[t]);
            }
        }
        for t in 0..T {
            _mm512_storeu_ps(out[t], acc[t]);
        }
    }
}

/// `out[t][r] = dot(row r of the group, x[t])` for the 16 rows of one interleaved Q6_K group.
///
/// # Safety
/// As [`group_q4k`], with Q6_K group blocks and [`Q6Info`]s.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(crate) unsafe fn group_q6k<const T: usize>(
    w: *const u8,
    nb: usize,
    x: [*const u8; T],
    info: [*const Q6Info; T],
    out: [*mut f32; T],
) {
    // SAFETY: features and pointer ranges are the caller's contract.
    unsafe {
        let levels = |blk: *const u8, e: usize| q6k_levels(blk, e);
        signed_sub16(w, nb, x, info, out, (Q6K_GROUP_BYTES, Q6K_SCALES), levels);
    }
}

/// The 6-bit levels `u = q + 32` of element chunk `e` (elements `4e..4e + 4` of 16 rows) of the
/// Q6_K group block at `blk`, rebuilt from its nibble and top-bit chunks.
///
/// # Safety
/// avx512f/bw enabled in the caller; `blk` points to one Q6_K group block.
#[inline(always)]
pub(crate) unsafe fn q6k_levels(blk: *const u8, e: usize) -> __m512i {
    // SAFETY: the caller's contract; the loads are unaligned.
    unsafe {
        let (low, top) = (_mm512_set1_epi8(0x0F), _mm512_set1_epi8(0x30));
        let lo = _mm512_loadu_si512(blk.add(Q6K_LOW + 64 * (e % 32)).cast());
        let lo = if e < 32 {
            _mm512_and_si512(lo, low)
        } else {
            _mm512_and_si512(_mm512_srli_epi16::<4>(lo), low)
        };
        let hi = _mm512_loadu_si512(blk.add(Q6K_HIGH + 64 * (e % 16)).cast());
        let hi = match e / 16 {
            0 => _mm512_slli_epi16::<4>(hi),
            1 => _mm512_slli_epi16::<2>(hi),
            2 => hi,
            _ => _mm512_srli_epi16::<2>(hi),
        };
        // lo | (hi & 0x30)
        _mm512_ternarylogic_epi32::<0xF8>(lo, hi, top)
    }
}

/// The body of the formats with 16 signed-scale sub-blocks of 16 per super-block (Q6_K, Q3_K):
/// `levels(block, e)` gives element chunk `e`'s unsigned levels for the 16 rows; group blocks of
/// `bytes` hold the 16 f16 `d` first and the scales as bytes `[j][r]` at `scales`.
///
/// # Safety
/// As [`group_q6k`] for the format; `levels` reads only inside the group block it is given.
#[inline(always)]
pub(crate) unsafe fn signed_sub16<const T: usize>(
    w: *const u8,
    nb: usize,
    x: [*const u8; T],
    info: [*const Q6Info; T],
    out: [*mut f32; T],
    (bytes, scales): (usize, usize),
    levels: impl Fn(*const u8, usize) -> __m512i,
) {
    // SAFETY: the caller's contract; all loads are unaligned.
    unsafe {
        let mut acc = [_mm512_setzero_ps(); T];
        for b in 0..nb {
            let blk = w.add(b * bytes);
            let mut isum = [_mm512_setzero_si512(); T];
            for j in 0..16 {
                let wq: [__m512i; 4] = std::array::from_fn(|c| levels(blk, 4 * j + c));
                let sc = _mm512_cvtepi8_epi32(_mm_loadu_si128(blk.add(scales + 16 * j).cast()));
                let xq = x.map(|p| p.add(b * XB + XQ + 16 * j));
                let base = |t: usize| (*info[t].add(b)).base[j];
                add_scaled_sums(&wq, sc, xq, base, &mut isum);
            }
            let dw = _mm512_cvtph_ps(_mm256_loadu_si256(blk.cast()));
            fma_super_block(&mut acc, &isum, dw, |t| (*info[t].add(b)).dx);
        }
        for t in 0..T {
            _mm512_storeu_ps(out[t], acc[t]);
        }
    }
}

/// One sub-block of signed-scale formats: `isum[t] += sc · (base(t) + Σ_c wq[c] · x[t][4c..])`
/// for the 16 lanes, `wq` holding unsigned levels whose offset `base` takes out again.
///
/// # Safety
/// avx512f/vl/vnni enabled in the caller; each `xq[t]` readable for `4·C` bytes.
#[inline(always)]
pub(crate) unsafe fn add_scaled_sums<const T: usize, const C: usize>(
    wq: &[__m512i; C],
    sc: __m512i,
    xq: [*const u8; T],
    base: impl Fn(usize) -> i32,
    isum: &mut [__m512i; T],
) {
    // SAFETY: the caller's contract; the loads are unaligned.
    unsafe {
        for t in 0..T {
            let mut s = _mm512_set1_epi32(base(t));
            for (c, &wv) in wq.iter().enumerate() {
                let xv = _mm512_set1_epi32(xq[t].add(4 * c).cast::<i32>().read_unaligned());
                s = _mm512_dpbusd_epi32(s, wv, xv);
            }
            isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(s, sc));
        }
    }
}

/// The float step of a super-block: `acc[t] = fma(f32(isum[t]), dw · dx(t), acc[t])`.
///
/// # Safety
/// avx512f enabled in the caller.
#[inline(always)]
pub(crate) unsafe fn fma_super_block<const T: usize>(
    acc: &mut [__m512; T],
    isum: &[__m512i; T],
    dw: __m512,
    dx: impl Fn(usize) -> f32,
) {
    // SAFETY: the caller's contract.
    unsafe {
        for t in 0..T {
            let scale = _mm512_mul_ps(dw, _mm512_set1_ps(dx(t)));
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), scale, acc[t]);
        }
    }
}

/// The [`Q6Info`]s of one Q8_K activation row (`nb` blocks) into `dst`, each 16-element
/// sub-block's base `-k·Σx` (Q6_K: k = 32, Q3_K: 4; Q2_K: -1, its plain sums for the mins).
pub(crate) fn sub16_infos(row: &[u8], dst: &mut [Q6Info], k: i32) {
    for (blk, slot) in row.chunks_exact(XB).zip(dst.iter_mut()) {
        let bsum = |g: usize| i16::from_le_bytes([blk[260 + 2 * g], blk[261 + 2 * g]]) as i32;
        *slot = Q6Info {
            dx: f32::from_le_bytes([blk[0], blk[1], blk[2], blk[3]]),
            base: std::array::from_fn(|j| -k * bsum(j)),
        };
    }
}

/// The [`KInfo`]s of one Q8_K activation row (`nb` blocks) into `dst`.
pub(crate) fn infos(row: &[u8], dst: &mut [KInfo]) {
    for (blk, slot) in row.chunks_exact(XB).zip(dst.iter_mut()) {
        let bsum = |g: usize| i16::from_le_bytes([blk[260 + 2 * g], blk[261 + 2 * g]]) as i32;
        // Σ x of sub-block j (two 16-element group sums; |Σ| ≤ 32·128 fits an i16).
        let sub = |j: usize| (bsum(2 * j) + bsum(2 * j + 1)) as i16 as u16 as u32;
        *slot = KInfo {
            dx: f32::from_le_bytes([blk[0], blk[1], blk[2], blk[3]]),
            sums: std::array::from_fn(|k| (sub(2 * k) | (sub(2 * k + 1) << 16)) as i32),
        };
    }
}
