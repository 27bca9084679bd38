//! [`Interleaved`]: a Q4_0, Q8_0, Q5_0, Q4_1, Q5_1, IQ4_NL, MXFP4, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K
//! or IQ4_XS weight matrix re-laid 16 rows at a time for the group kernels (AVX-512 VNNI, or
//! AVX2 on CPUs without it), built once at load from the GGML rows.
//!
//! Layout: groups of [`GROUP`] consecutive rows, each group all its blocks in order. A group
//! block is the 16 rows' f16 scales (32 bytes; Q4_1 and Q5_1 then their 16 f16 mins; MXFP4: its
//! 16 E8M0 exponent bytes instead), Q5_0's and Q5_1's high bits as 8 u64 masks (mask `c`: bit
//! `4r + k` is element `4c + k`'s fifth bit in row `r`), then the quants as 64-byte chunks where
//! chunk `c` holds bytes `4c..4c + 4` of each of the 16 rows (row `r` at bytes `4r..4r + 4`).
//! The 4-bit formats keep their nibbles (4 chunks: low nibbles are elements `4c..`, high
//! nibbles `16 + 4c..`; IQ4_NL and MXFP4 keep their 4-bit indices into their tables, laid out as
//! Q4_0's); Q8_0 stores `q + 128` as unsigned levels (8 chunks). Same size as the GGML rows.
//!
//! Q4_K group blocks (one 256-element super-block of 16 rows, 2368 bytes, 2.8% over the GGML
//! rows): the 16 f16 `d`, the 16 f16 `dmin`, the 6-bit sub-block scales as bytes `[j][r]`
//! (128), the mins as byte pairs `[k][r][m_2k, m_2k+1]` (128), then 32 quant chunks: chunk
//! `8k + c` holds bytes `32k + 4c..+4` of each row's `qs` (low nibbles: sub-block `2k`, high:
//! `2k + 1`).
//! Q5_K group blocks (2880 bytes, 2.3% over): Q4_K's head (320 bytes), then each element's
//! fifth bit as 64 u64 masks `[j][c]` (bit `4r + i`: element `4c + i` of sub-block `j` in row
//! `r`), then Q4_K's 32 quant chunks.
//!
//! Q6_K group blocks (3392 bytes, 1% over): the 16 f16 `d`, the signed sub-block scales as
//! bytes `[j][r]` (256), 32 bytes of padding (keeps the quants on cache lines), then the 6-bit
//! levels `u = q + 32` of element chunk `e` (elements `4e..4e + 4`, `e < 64`) split in two: the
//! low nibbles in chunk `e % 32` of 32 (low nibble for `e < 32`, high for the rest), the top two
//! bits in chunk `e % 16` of 16 more (bits `2q..2q + 2`, `q = e / 16`).
//! Q3_K group blocks (1824 bytes, 3.6% over): the 16 f16 `d`, the signed scales as bytes `[j][r]`
//! (256), the levels' low two bits `u & 3` (`u = q + 4`, 0..8) in 16 chunks (chunk `e % 16` holds
//! element chunk `e` at bits `2·(e / 16)`), then each level's third bit as 64 u64 masks (mask
//! `e`: bit `4r + k` for element `4e + k`). Q2_K group blocks (1344 bytes, the GGML rows' size):
//! the 16 f16 `d`, the 16 f16 `dmin`, the scale/min bytes as `[j][r]` (256), then the 2-bit levels
//! in Q3_K's chunk order.
//! IQ4_XS group blocks (2240 bytes, 2.9% over): the 16 f16 `d`, the signed sub-block scales
//! `ls - 32` as bytes `[j][r]` (128), 32 bytes of padding, then Q4_K's 32 quant chunks holding
//! the 4-bit table indices (chunk `8k + c`: elements `4c..4c + 4` of sub-block `2k` in the low
//! nibbles, of sub-block `2k + 1` in the high ones).
//! Invariant: built only from a validated [`WeightMatrix`] whose rows are a multiple of
//! [`GROUP`]; the kernels read each group block linearly.

use std::sync::Arc;

use crate::matmul::WeightMatrix;
use crate::pages::HugeMap;
use crate::quant::{
    BlockIq4Xs, BlockQ2K, BlockQ3K, BlockQ6K, q3k_scales, scale_min_k4, unpack_q2k, unpack_q3k,
    unpack_q5k, unpack_q6k, xs_scale,
};
use crate::simd::{self, SimdLevel};
use crate::types::GgmlType;

/// Rows per interleaved group (one 512-bit vector of i32 lanes).
pub const GROUP: usize = 16;

/// Q4_K group block offsets: `d`, `dmin`, scales, min pairs, quant chunks.
pub(crate) const Q4K_DMIN: usize = 32;
pub(crate) const Q4K_SCALES: usize = 64;
pub(crate) const Q4K_MINS: usize = 192;
pub(crate) const Q4K_QUANTS: usize = 320;
/// Q5_K group block offsets: Q4_K's head, the fifth-bit masks, the quant chunks.
pub(crate) const Q5K_MASKS: usize = Q4K_QUANTS;
pub(crate) const Q5K_QUANTS: usize = Q5K_MASKS + 64 * 8;
/// Q6_K group block offsets: `d`, scales, low nibbles, top bits.
pub(crate) const Q6K_SCALES: usize = 32;
pub(crate) const Q6K_LOW: usize = 320;
pub(crate) const Q6K_HIGH: usize = Q6K_LOW + 32 * 64;
/// Q3_K group block offsets: `d`, signed scales, 2-bit level chunks, third-bit masks, size.
pub(crate) const Q3K_SCALES: usize = 32;
pub(crate) const Q3K_LOW: usize = Q3K_SCALES + 256;
pub(crate) const Q3K_MASKS: usize = Q3K_LOW + 16 * 64;
pub(crate) const Q3K_BYTES: usize = Q3K_MASKS + 64 * 8;
/// Q2_K group block offsets: `d`, `dmin`, scale/min bytes, 2-bit level chunks, size.
pub(crate) const Q2K_DMIN: usize = 32;
pub(crate) const Q2K_SCALES: usize = 64;
pub(crate) const Q2K_LOW: usize = Q2K_SCALES + 256;
pub(crate) const Q2K_BYTES: usize = Q2K_LOW + 16 * 64;
/// IQ4_XS group block offsets: `d`, scales, quant chunks.
pub(crate) const IQ4XS_SCALES: usize = 32;
pub(crate) const IQ4XS_QUANTS: usize = 192;

/// Where a format's parts lie in a group block.
#[derive(Clone, Copy, Debug)]
pub(crate) struct GroupLayout {
    /// Bytes of one group block.
    pub bytes: usize,
    /// Offset of the quant chunks.
    pub quants: usize,
    /// Bytes of one source block.
    source: usize,
    /// Elements of one block (32, or 256 for the K-quants).
    pub elems: usize,
}

/// The group layout of `ty`, if it has one.
pub(crate) fn layout(ty: GgmlType) -> Option<GroupLayout> {
    let (bytes, quants, source, elems) = match ty {
        GgmlType::Q4_0 | GgmlType::IQ4NL => (32 + 4 * 64, 32, 18, 32),
        GgmlType::Mxfp4 => (16 + 4 * 64, 16, 17, 32),
        GgmlType::Q8_0 => (32 + 8 * 64, 32, 34, 32),
        GgmlType::Q5_0 => (32 + 64 + 4 * 64, 96, 22, 32),
        GgmlType::Q4_1 => (64 + 4 * 64, 64, 20, 32),
        GgmlType::Q5_1 => (64 + 64 + 4 * 64, 128, 24, 32),
        GgmlType::Q4K => (Q4K_QUANTS + 32 * 64, Q4K_QUANTS, 144, 256),
        GgmlType::Q5K => (Q5K_QUANTS + 32 * 64, Q5K_QUANTS, 176, 256),
        GgmlType::Q6K => (Q6K_HIGH + 16 * 64, Q6K_LOW, 210, 256),
        GgmlType::IQ4XS => (IQ4XS_QUANTS + 32 * 64, IQ4XS_QUANTS, 136, 256),
        GgmlType::Q3K => (Q3K_BYTES, Q3K_LOW, 110, 256),
        GgmlType::Q2K => (Q2K_BYTES, Q2K_LOW, 84, 256),
        _ => return None,
    };
    Some(GroupLayout {
        bytes,
        quants,
        source,
        elems,
    })
}

/// A weight matrix in the interleaved layout (see the module doc): its bytes within a
/// [`HugeMap`] shared by every matrix built in the same [`Interleaved::build_all`], each
/// matrix starting on a cache line.
pub struct Interleaved {
    ty: GgmlType,
    rows: usize,
    cols: usize,
    mem: Arc<HugeMap>,
    /// Where this matrix's bytes start in `mem` (a multiple of 64).
    start: usize,
    len: usize,
}

impl std::fmt::Debug for Interleaved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Interleaved")
            .field("ty", &self.ty)
            .field("rows", &self.rows)
            .field("cols", &self.cols)
            .finish()
    }
}

impl Interleaved {
    /// Whether this process's kernels use interleaved weights: the AVX2 level, fixed once per
    /// process like the rest of the dispatch. Every format with a group layout then has its
    /// copy ([`Self::covers`]), run by the 512-bit VNNI kernels or the AVX2 ones.
    pub fn in_use() -> bool {
        simd::level() == SimdLevel::Avx2
    }

    /// Whether the group kernels are the 512-bit VNNI ones (else the AVX2 ones of
    /// `dot::avx2::interleaved_avx2`, `interleaved_avx2_k` and `interleaved_avx2_k16`).
    pub(crate) fn wide() -> bool {
        static WIDE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *WIDE.get_or_init(|| simd::vnni() && simd::avx512_detected())
    }

    /// Whether this process copies matrices of `ty` into the interleaved layout.
    pub fn covers(ty: GgmlType) -> bool {
        Self::in_use() && layout(ty).is_some()
    }

    /// The interleaved copy of `w` when this process uses one ([`Self::in_use`]) and `w` has a
    /// group layout (see the module doc) and a whole number of groups; `None` otherwise (the
    /// GGML rows are used).
    pub fn build(w: &WeightMatrix) -> Option<Interleaved> {
        Self::build_all(std::slice::from_ref(w), |_| {})
            .pop()
            .flatten()
    }

    /// [`Self::build`] for every matrix of a model at once, all in one [`HugeMap`] (so the
    /// weights a token streams through lie on huge pages), calling `copied(i)` as soon as
    /// `ws[i]` has its copy (its source rows are not read again: a caller can let their pages
    /// go, so loading holds the weights about once). Where the mapping cannot be reserved,
    /// every entry is `None` and the kernels read the GGML rows.
    pub fn build_all(ws: &[WeightMatrix], copied: impl FnMut(usize)) -> Vec<Option<Interleaved>> {
        if Self::in_use() {
            Self::repack_all(ws, Self::covers, copied)
        } else {
            ws.iter().map(|_| None).collect()
        }
    }

    /// The interleaved copy whatever the CPU (tests check the layout with it).
    #[cfg(test)]
    pub(crate) fn repack(w: &WeightMatrix) -> Option<Interleaved> {
        Self::repack_all(std::slice::from_ref(w), |_| true, |_| {})
            .pop()
            .flatten()
    }

    /// Bytes of `w`'s interleaved copy (a multiple of 64), if it has one.
    fn size_of(w: &WeightMatrix) -> Option<usize> {
        let lay = layout(w.ty)?;
        if w.rows == 0 || !w.rows.is_multiple_of(GROUP) {
            return None;
        }
        Some(((w.rows / GROUP) * (w.cols / lay.elems) * lay.bytes).next_multiple_of(64))
    }

    /// The copies of the matrices in `ws` whose type `keep` accepts.
    fn repack_all(
        ws: &[WeightMatrix],
        keep: impl Fn(GgmlType) -> bool,
        mut copied: impl FnMut(usize),
    ) -> Vec<Option<Interleaved>> {
        let sizes: Vec<Option<usize>> = ws
            .iter()
            .map(|w| Self::size_of(w).filter(|_| keep(w.ty)))
            .collect();
        let total = sizes.iter().flatten().sum::<usize>();
        let Some(mut mem) = (total > 0).then(|| HugeMap::new(total).ok()).flatten() else {
            return ws.iter().map(|_| None).collect();
        };
        // Each copy's (start, length) in `mem`, the copies laid end to end in order.
        let mut placed = Vec::with_capacity(ws.len());
        let (mut rest, mut start) = (mem.as_mut_slice(), 0);
        for (i, (w, size)) in ws.iter().zip(&sizes).enumerate() {
            placed.push(size.map(|len| (start, len)));
            let Some(len) = *size else { continue };
            let (dst, tail) = rest.split_at_mut(len);
            Self::repack_into(w, dst);
            copied(i);
            (rest, start) = (tail, start + len);
        }
        let mem = Arc::new(mem);
        ws.iter()
            .zip(placed)
            .map(|(w, p)| {
                let (start, len) = p?;
                Some(Interleaved {
                    ty: w.ty,
                    rows: w.rows,
                    cols: w.cols,
                    mem: Arc::clone(&mem),
                    start,
                    len,
                })
            })
            .collect()
    }

    /// Writes `w` in the interleaved layout into `bytes` (zeroed, [`Self::size_of`] long).
    fn repack_into(w: &WeightMatrix, bytes: &mut [u8]) {
        let lay = layout(w.ty).expect("sized only for types with a layout");
        let (nb, gb, wb) = (w.cols / lay.elems, lay.bytes, lay.source);
        for g in 0..w.rows / GROUP {
            for b in 0..nb {
                let dst = &mut bytes[(g * nb + b) * gb..][..gb];
                for r in 0..GROUP {
                    let src = &w.row(g * GROUP + r)[b * wb..][..wb];
                    match w.ty {
                        GgmlType::Q4K => {
                            repack_q4k(dst, src, r, Q4K_QUANTS);
                            continue;
                        }
                        GgmlType::Q5K => {
                            repack_q5k(dst, src, r);
                            continue;
                        }
                        GgmlType::Q6K => {
                            repack_q6k(dst, src, r);
                            continue;
                        }
                        GgmlType::IQ4XS => {
                            repack_iq4xs(dst, src, r);
                            continue;
                        }
                        GgmlType::Q3K => {
                            let block: &BlockQ3K = bytemuck::from_bytes(src);
                            dst[2 * r..2 * r + 2].copy_from_slice(&src[108..110]);
                            for (j, &sc) in q3k_scales(block).iter().enumerate() {
                                dst[Q3K_SCALES + 16 * j + r] = sc as u8;
                            }
                            let levels = unpack_q3k(block).map(|v| (v + 4) as u8);
                            repack_two_bits(dst, &levels, r, Q3K_LOW, Some(Q3K_MASKS));
                            continue;
                        }
                        GgmlType::Q2K => {
                            let block: &BlockQ2K = bytemuck::from_bytes(src);
                            dst[2 * r..2 * r + 2].copy_from_slice(&src[80..82]);
                            dst[Q2K_DMIN + 2 * r..Q2K_DMIN + 2 * r + 2]
                                .copy_from_slice(&src[82..84]);
                            for (j, &sm) in block.scales.iter().enumerate() {
                                dst[Q2K_SCALES + 16 * j + r] = sm;
                            }
                            repack_two_bits(dst, &unpack_q2k(block), r, Q2K_LOW, None);
                            continue;
                        }
                        _ => {}
                    }
                    if w.ty == GgmlType::Mxfp4 {
                        dst[r] = src[0];
                    } else {
                        dst[2 * r..2 * r + 2].copy_from_slice(&src[..2]);
                    }
                    let qs = match w.ty {
                        GgmlType::Mxfp4 => &src[1..],
                        GgmlType::Q4_1 => {
                            dst[32 + 2 * r..32 + 2 * r + 2].copy_from_slice(&src[2..4]);
                            &src[4..]
                        }
                        GgmlType::Q5_0 => {
                            let qh = u32::from_le_bytes([src[2], src[3], src[4], src[5]]);
                            repack_fifth_bits(&mut dst[32..], qh, r);
                            &src[6..]
                        }
                        GgmlType::Q5_1 => {
                            dst[32 + 2 * r..32 + 2 * r + 2].copy_from_slice(&src[2..4]);
                            let qh = u32::from_le_bytes([src[4], src[5], src[6], src[7]]);
                            repack_fifth_bits(&mut dst[64..], qh, r);
                            &src[8..]
                        }
                        _ => &src[2..],
                    };
                    for (c, four) in qs.as_chunks::<4>().0.iter().enumerate() {
                        let to = &mut dst[lay.quants + 64 * c + 4 * r..][..4];
                        to.copy_from_slice(four);
                        if w.ty == GgmlType::Q8_0 {
                            to.iter_mut().for_each(|v| *v ^= 0x80);
                        }
                    }
                }
            }
        }
    }

    /// Whether this is the interleaved copy of a matrix shaped like `w`.
    pub fn fits(&self, w: &WeightMatrix) -> bool {
        self.ty == w.ty && self.rows == w.rows && self.cols == w.cols
    }

    /// Whether `self` and `other` lie in the same mapping (built by one `build_all`).
    #[cfg(test)]
    pub(crate) fn shares_memory_with(&self, other: &Interleaved) -> bool {
        Arc::ptr_eq(&self.mem, &other.mem)
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.len
    }

    pub(crate) fn ty(&self) -> GgmlType {
        self.ty
    }

    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    /// Where this matrix's parts lie in a group block.
    pub(crate) fn layout(&self) -> GroupLayout {
        layout(self.ty).expect("built only for types with a layout")
    }

    /// Blocks per row (each group holds this many group blocks).
    pub(crate) fn blocks(&self) -> usize {
        self.cols / self.layout().elems
    }

    /// The first byte of group `g` (`g < rows / GROUP`; its [`Self::blocks`] blocks follow).
    pub(crate) fn group_ptr(&self, g: usize) -> *const u8 {
        let off = g * self.blocks() * self.layout().bytes;
        assert!(off < self.bytes(), "group {g} out of range");
        self.mem.as_slice()[self.start + off..].as_ptr()
    }
}

/// Row `r`'s fifth bits `qh` (bit `i`: element `i`) into the 8 u64 masks at the start of
/// `masks` (mask `c`, bit `4r + k`: element `4c + k`).
fn repack_fifth_bits(masks: &mut [u8], qh: u32, r: usize) {
    for c in 0..8 {
        let m = &mut masks[8 * c..][..8];
        let mut v = u64::from_le_bytes(m.try_into().expect("8 bytes"));
        v |= (((qh >> (4 * c)) & 0xF) as u64) << (4 * r);
        m.copy_from_slice(&v.to_le_bytes());
    }
}

/// Row `r`'s Q4_K super-block `src` (GGML `block_q4_K`) into its places in group block `dst`,
/// the quant chunks at `quants` (Q5_K puts its masks before them).
fn repack_q4k(dst: &mut [u8], src: &[u8], r: usize, quants: usize) {
    dst[2 * r..2 * r + 2].copy_from_slice(&src[..2]);
    dst[Q4K_DMIN + 2 * r..Q4K_DMIN + 2 * r + 2].copy_from_slice(&src[2..4]);
    let scales: &[u8; 12] = src[4..16].try_into().expect("12 scale bytes");
    for j in 0..8 {
        let (sc, m) = scale_min_k4(j, scales);
        dst[Q4K_SCALES + 16 * j + r] = sc;
        dst[Q4K_MINS + 32 * (j / 2) + 2 * r + j % 2] = m;
    }
    for (c, four) in src[src.len() - 128..].as_chunks::<4>().0.iter().enumerate() {
        dst[quants + 64 * c + 4 * r..][..4].copy_from_slice(four);
    }
}

/// Row `r`'s Q5_K super-block `src` (GGML `block_q5_K`): Q4_K's parts plus the fifth-bit masks.
fn repack_q5k(dst: &mut [u8], src: &[u8], r: usize) {
    repack_q4k(dst, src, r, Q5K_QUANTS);
    for (i, u) in unpack_q5k(bytemuck::from_bytes(src))
        .into_iter()
        .enumerate()
    {
        let (j, c, k) = (i / 32, (i % 32) / 4, i % 4);
        dst[Q5K_MASKS + 8 * (8 * j + c) + (4 * r + k) / 8] |= (u >> 4) << ((4 * r + k) % 8);
    }
}

/// Row `r`'s Q6_K super-block `src` (GGML `block_q6_K`) into its places in group block `dst`.
fn repack_q6k(dst: &mut [u8], src: &[u8], r: usize) {
    let block: &BlockQ6K = bytemuck::from_bytes(src);
    dst[2 * r..2 * r + 2].copy_from_slice(&src[208..210]);
    for (j, &sc) in block.scales.iter().enumerate() {
        dst[Q6K_SCALES + 16 * j + r] = sc as u8;
    }
    for (i, v) in unpack_q6k(block).into_iter().enumerate() {
        let u = (v + 32) as u8;
        let (e, k) = (i / 4, i % 4);
        dst[Q6K_LOW + 64 * (e % 32) + 4 * r + k] |= (u & 0xF) << (4 * (e / 32));
        dst[Q6K_HIGH + 64 * (e % 16) + 4 * r + k] |= (u >> 4) << (2 * (e / 16));
    }
}

/// Row `r`'s 256 levels `u` (0..8) into the 2-bit chunks at `low` (chunk `e % 16`, bits
/// `2·(e / 16)`, for element chunk `e`) and, with `masks`, their third bits as byte masks
/// (mask `e`: bit `4r + k` for element `4e + k`).
fn repack_two_bits(dst: &mut [u8], levels: &[u8; 256], r: usize, low: usize, masks: Option<usize>) {
    for (i, &u) in levels.iter().enumerate() {
        let (e, k) = (i / 4, i % 4);
        dst[low + 64 * (e % 16) + 4 * r + k] |= (u & 3) << (2 * (e / 16));
        if let Some(m) = masks {
            dst[m + 8 * e + (4 * r + k) / 8] |= (u >> 2) << ((4 * r + k) % 8);
        }
    }
}

/// Row `r`'s IQ4_XS super-block `src` (GGML `block_iq4_xs`) into its places in group block `dst`.
fn repack_iq4xs(dst: &mut [u8], src: &[u8], r: usize) {
    let block: &BlockIq4Xs = bytemuck::from_bytes(src);
    let (h, sl) = (block.scales_h, block.scales_l);
    dst[2 * r..2 * r + 2].copy_from_slice(&src[..2]);
    for j in 0..8 {
        dst[IQ4XS_SCALES + 16 * j + r] = xs_scale(h, &sl, j) as i8 as u8;
    }
    for i in 0..256 {
        let (j, l) = (i / 32, i % 32);
        let idx = iq4xs_index(block, i);
        dst[IQ4XS_QUANTS + 64 * (8 * (j / 2) + l / 4) + 4 * r + l % 4] |= idx << (4 * (j % 2));
    }
}

/// Element `i`'s 4-bit table index in an IQ4_XS block.
pub(crate) fn iq4xs_index(block: &BlockIq4Xs, i: usize) -> u8 {
    let (j, l) = (i / 32, i % 32);
    let q = block.qs[16 * j + l % 16];
    if l < 16 { q & 0xF } else { q >> 4 }
}
