//! The 2×2 blocked AMX tile pipeline of the 32-element-block and 16-element-sub-block tile
//! kernels ([`pipeline`]; Q4_K / Q5_K / IQ4_XS keep one group × one tile, see
//! [`super::interleaved_amx_k`]): up to two 16-token tiles × two 16-row groups per step, so
//! each loaded `A` and `B` tile feeds two products, with the consumer's float (or integer)
//! steps of an earlier chunk of units issued between the tile work; and what the kernels hand
//! it: [`TokenTile`], [`Levels`], a task's [`Scratch`].
//!
//! A "unit" is what one tile product sums: a 32-element block, or a K-quant's sub-block.
//! Units run in chunks of [`UNITS`]; pass `i`, step `j` runs unit `j` of three chunks: the
//! products of chunk `i - 1` (`C = A[ta] · B[g]`, token tile `ta`, group `g`, quadrant
//! `ta + 2·g`), the `B` levels of chunk `i` (prepared a chunk ahead: a tile load right after
//! the vector stores of its bytes waits for them) and the consumer's steps for a share of
//! chunk `i - 2`'s quadrants. Product `p` runs on `C[p % 4]` and is stored two products later
//! ([`Stream`]): a tile store costs about as much as a product, and one right behind the
//! product it stores waits for it. The consumer sees every (quadrant, chunk) once, chunks in
//! order per quadrant, so float steps keep the reference's block order.

use std::arch::x86_64::*;

use crate::amx::{A0, A1, B0, B1, C0, C1, C2, C3, CBuf, M, TileUnit};

/// Units per chunk (a consumer step covers one quadrant × this many units). Two keeps the
/// sums (two chunks × 4 KiB per unit) small beside the streamed operands in L1: four measured
/// slower.
pub(crate) const UNITS: usize = 2;

/// The unpacked levels of one block or sub-block: tile `B`, up to 8 rows of 64 bytes.
#[repr(C, align(64))]
pub(crate) struct Levels(pub [u8; 512]);

/// One chunk's tile sums: `[unit][quadrant]`, quadrant `q` = `C[q]`: token tile `q % 2`,
/// group `q / 2`.
pub(crate) type ChunkSums = [[CBuf; 4]; UNITS];

/// A task's working memory for the tile kernels (about 28 KiB, made once per task so no
/// kernel call clears it): two chunks of sums, two chunks of levels for two groups, and the
/// four quadrants' float accumulators and partial integer sums (`[quadrant]`, one 16-lane row
/// per token).
pub(crate) struct Scratch {
    pub sums: [ChunkSums; 2],
    pub levels: [[[Levels; 2]; UNITS]; 2],
    pub acc: [CBuf; 4],
    pub isum: [CBuf; 4],
}

impl Scratch {
    /// The sums and levels as flat arrays (16 sums, 8 levels), for the kernels that run one
    /// group × one tile ([`super::interleaved_amx_k`]).
    pub(crate) fn flat(&mut self) -> (&mut [CBuf], &mut [Levels]) {
        (
            self.sums.as_flattened_mut().as_flattened_mut(),
            self.levels.as_flattened_mut().as_flattened_mut(),
        )
    }

    /// A zeroed scratch on the heap (too large for a comfortable stack frame).
    pub(crate) fn boxed() -> Box<Scratch> {
        Box::new(Scratch {
            sums: [[[CBuf::default(); 4]; UNITS]; 2],
            levels: [const { [const { [const { Levels([0; 512]) }; 2] }; UNITS] }; 2],
            acc: [CBuf::default(); 4],
            isum: [CBuf::default(); 4],
        })
    }
}

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
    /// Token 0's 16 outputs of the first group (the next group's 16 follow them); token
    /// `t`'s start `t · out_stride` later.
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

/// Whether quadrant `q` exists with `TA` token tiles and `GB` groups.
#[inline(always)]
pub(crate) const fn quadrant<const TA: usize, const GB: usize>(q: usize) -> bool {
    q % 2 < TA && q / 2 < GB
}

/// The tile products of `n` units for `TA` (1 or 2) token tiles × `GB` (1 or 2) groups (see
/// the module doc), `TDPBSSD` where `signed`, else `TDPBSUD`:
/// - `a(ta, u)`: token tile `ta`'s rows of unit `u` (`stride` bytes apart);
/// - `prep(g, u, dst)`: writes group `g`'s levels of unit `u` into `dst` (may do nothing);
/// - `b(g, u, lv)`: group `g`'s 64-byte `B` rows of unit `u` (`lv`: what `prep` wrote);
/// - `consume(q, u0, cnt, sums)`: quadrant `q`'s sums of units `u0..u0 + cnt` are
///   `sums[u - u0][q]`; called once per (quadrant, chunk), in chunk order per quadrant.
///
/// # Safety
/// `tiles` configured; every `a` and `b` pointer readable as [`TileUnit::load`] requires.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(crate) unsafe fn pipeline<U: TileUnit, const TA: usize, const GB: usize>(
    tiles: &mut U,
    sums: &mut [ChunkSums; 2],
    levels: &mut [[[Levels; 2]; UNITS]; 2],
    n: usize,
    a: impl Fn(usize, usize) -> *const u8,
    stride: usize,
    mut prep: impl FnMut(usize, usize, &mut Levels),
    b: impl Fn(usize, usize, &Levels) -> *const u8,
    signed: bool,
    mut consume: impl FnMut(usize, usize, usize, &ChunkSums),
) {
    if n == 0 {
        return;
    }
    let chunks = n.div_ceil(UNITS);
    let mut stream = Stream::default();
    let sums: *mut [ChunkSums; 2] = sums;
    // Pass `i`: chunk `i`'s levels, chunk `i - 1`'s products, chunk `i - 2`'s consumer steps
    // (one call site each, so each closure is inlined once).
    for i in 0..chunks + 2 {
        let (lv_cur, lv_next) = halves(levels, (i + 1) % 2);
        for j in 0..UNITS {
            // Chunk i - 1, unit j.
            let u = (i * UNITS + j).wrapping_sub(UNITS);
            if i >= 1 && u < n {
                if u + AHEAD < n {
                    for ta in 0..TA {
                        prefetch(a(ta, u + AHEAD), 16 * stride);
                    }
                }
                // SAFETY: the sums half of chunk i - 1, which no consumer step reads until
                // pass i + 1: its last stores run in that pass's first step (two products
                // later, as the stream lags) or at a flush below.
                let dst = unsafe { &raw mut (*sums)[(i + 1) % 2][j] };
                let lv = &lv_cur[j];
                // SAFETY: readable (caller); `dst` as above.
                unsafe {
                    stream.unit::<U, TA, GB>(
                        tiles,
                        u,
                        |ta| a(ta, u),
                        stride,
                        |g| b(g, u, &lv[g]),
                        signed,
                        dst,
                    );
                    // A single quadrant's stores lag two units: the chunk's last ones go now.
                    if u + 1 == n || (TA * GB == 1 && j + 1 == UNITS) {
                        stream.flush(tiles);
                    }
                }
            }
            if u.wrapping_add(UNITS) < n {
                for (g, l) in lv_next[j].iter_mut().enumerate().take(GB) {
                    prep(g, u.wrapping_add(UNITS), l);
                }
            }
            if i >= 2 {
                let u0 = (i - 2) * UNITS;
                // SAFETY: chunk i - 2's half, all stored (its products ran in pass i - 1);
                // this pass's stores go to the other half.
                let s_prev = unsafe { &(*sums)[i % 2] };
                for q in j * 4 / UNITS..(j + 1) * 4 / UNITS {
                    if quadrant::<TA, GB>(q) {
                        consume(q, u0, UNITS.min(n - u0), s_prev);
                    }
                }
            }
        }
    }
}

/// The tile product stream: product `p` runs on `C[p % 4]` and is stored two products later
/// (so a store does not wait on the product just issued, and overlaps the next products).
#[derive(Default)]
struct Stream {
    /// Products issued.
    p: usize,
    /// Where products `p - 2` and `p - 1` go (`[k % 2]` for product `k`).
    dst: [Option<*mut CBuf>; 2],
}

impl Stream {
    /// The products of unit `u`: `C[·] = A[ta] · B[g]` for the quadrants of `TA` token tiles
    /// × `GB` groups, each `A` and `B` tile loaded once (a dimension of one alternates its
    /// register by unit, so a load need not wait for the previous unit's product to read it);
    /// quadrant `q`'s sums go to `dst[q]`.
    ///
    /// # Safety
    /// As [`pipeline`] for `a(ta)` and `b(g)`; `dst` writable until [`Stream::flush`] or two
    /// products later.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    unsafe fn unit<U: TileUnit, const TA: usize, const GB: usize>(
        &mut self,
        tiles: &mut U,
        u: usize,
        a: impl Fn(usize) -> *const u8,
        stride: usize,
        b: impl Fn(usize) -> *const u8,
        signed: bool,
        dst: *mut [CBuf; 4],
    ) {
        let ar = |ta: usize| if TA == 2 { ta } else { u % 2 };
        let br = |g: usize| if GB == 2 { g } else { u % 2 };
        // SAFETY: readable (caller); `dst[q]` writable (caller).
        unsafe {
            load_dyn(tiles, A0 + ar(0) as u8, a(0), stride);
            load_dyn(tiles, B0 + br(0) as u8, b(0), 64);
            self.product(tiles, ar(0), br(0), signed, &raw mut (*dst)[0]);
            if TA == 2 {
                load_dyn(tiles, A1, a(1), stride);
                self.product(tiles, 1, br(0), signed, &raw mut (*dst)[1]);
            }
            if GB == 2 {
                load_dyn(tiles, B1, b(1), 64);
                self.product(tiles, ar(0), 1, signed, &raw mut (*dst)[2]);
                if TA == 2 {
                    self.product(tiles, 1, 1, signed, &raw mut (*dst)[3]);
                }
            }
        }
    }

    /// `C[p % 4] = A[a] · B[b]`, then the store of product `p - 2`.
    ///
    /// # Safety
    /// `dst` writable until stored.
    #[inline(always)]
    unsafe fn product<U: TileUnit>(
        &mut self,
        tiles: &mut U,
        a: usize,
        b: usize,
        signed: bool,
        dst: *mut CBuf,
    ) {
        let c = self.p % 4;
        zero_dyn(tiles, c);
        dot_dyn(tiles, c, a, b, signed);
        if let Some(d) = self.dst[self.p % 2].replace(dst) {
            // SAFETY: writable (the caller of the product two back).
            store_dyn(tiles, (self.p + 2) % 4, unsafe { &mut *d });
        }
        self.p += 1;
    }

    /// Stores the products not yet stored.
    ///
    /// # Safety
    /// Their destinations writable.
    #[inline(always)]
    unsafe fn flush<U: TileUnit>(&mut self, tiles: &mut U) {
        for k in self.p.saturating_sub(2)..self.p {
            if let Some(d) = self.dst[k % 2].take() {
                // SAFETY: writable (caller).
                store_dyn(tiles, k % 4, unsafe { &mut *d });
            }
        }
    }
}

/// `C[c] = 0`.
#[inline(always)]
fn zero_dyn<U: TileUnit>(tiles: &mut U, c: usize) {
    match c {
        0 => tiles.zero::<C0>(),
        1 => tiles.zero::<C1>(),
        2 => tiles.zero::<C2>(),
        _ => tiles.zero::<C3>(),
    }
}

/// Loads tile register `r` (`A0`, `A1`, `B0`, `B1`).
///
/// # Safety
/// As [`TileUnit::load`].
#[inline(always)]
unsafe fn load_dyn<U: TileUnit>(tiles: &mut U, r: u8, p: *const u8, stride: usize) {
    // SAFETY: forwarded.
    unsafe {
        match r {
            A0 => tiles.load::<A0>(p, stride),
            A1 => tiles.load::<A1>(p, stride),
            B0 => tiles.load::<B0>(p, stride),
            _ => tiles.load::<B1>(p, stride),
        }
    }
}

/// `C[c] += A[a] · B[b]` (`TDPBSSD` where `signed`, else `TDPBSUD`).
#[inline(always)]
fn dot_dyn<U: TileUnit>(tiles: &mut U, c: usize, a: usize, b: usize, signed: bool) {
    macro_rules! dot {
        ($c:ident, $a:ident, $b:ident) => {
            if signed {
                tiles.dot_ss::<$c, $a, $b>()
            } else {
                tiles.dot_su::<$c, $a, $b>()
            }
        };
    }
    macro_rules! by_ab {
        ($c:ident) => {
            match (a, b) {
                (0, 0) => dot!($c, A0, B0),
                (0, _) => dot!($c, A0, B1),
                (_, 0) => dot!($c, A1, B0),
                _ => dot!($c, A1, B1),
            }
        };
    }
    match c {
        0 => by_ab!(C0),
        1 => by_ab!(C1),
        2 => by_ab!(C2),
        _ => by_ab!(C3),
    }
}

/// Stores `C[c]` into `dst`.
#[inline(always)]
fn store_dyn<U: TileUnit>(tiles: &mut U, c: usize, dst: &mut CBuf) {
    match c {
        0 => tiles.store::<C0>(dst),
        1 => tiles.store::<C1>(dst),
        2 => tiles.store::<C2>(dst),
        _ => tiles.store::<C3>(dst),
    }
}

/// Units ahead whose `A` rows are prefetched into L1 (tile loads do not train the prefetchers
/// as vector loads do).
const AHEAD: usize = 2;

/// Prefetches the `bytes` at `p` into L1.
#[inline(always)]
fn prefetch(p: *const u8, bytes: usize) {
    for off in (0..bytes).step_by(64) {
        // SAFETY: a prefetch never faults.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(off).cast()) };
    }
}

/// `(&mut x[i], &mut x[1 - i])`.
#[inline(always)]
fn halves<T>(x: &mut [T; 2], i: usize) -> (&mut T, &mut T) {
    let [a, b] = x;
    if i == 0 { (a, b) } else { (b, a) }
}

/// Token `t`'s float accumulator of quadrant `q` (16 rows): 0 where `first` (the first
/// block's step), else what [`acc_put`] left in `acc`.
///
/// # Safety
/// avx512f enabled in the caller.
#[inline(always)]
pub(crate) unsafe fn acc_get(acc: &[CBuf; 4], q: usize, t: usize, first: bool) -> __m512 {
    // SAFETY: the row is 64-byte aligned; features (caller).
    unsafe {
        if first {
            _mm512_setzero_ps()
        } else {
            _mm512_load_ps(acc[q].0[t].as_ptr().cast())
        }
    }
}

/// Keeps token `t`'s accumulator `v` of quadrant `q` in `acc`, or where `last` (the last
/// block's step) writes it to the token's 16 outputs of group `q / 2` (16 outputs past the
/// first group's).
///
/// # Safety
/// avx512f enabled in the caller; where `last`, those outputs are writable ([`TokenTile`]).
#[inline(always)]
pub(crate) unsafe fn acc_put<I>(
    acc: &mut [CBuf; 4],
    q: usize,
    t: usize,
    last: bool,
    tile: &TokenTile<I>,
    v: __m512,
) {
    // SAFETY: as above.
    unsafe {
        if last {
            let dst = tile.out.add(t * tile.out_stride + 16 * (q / 2));
            _mm512_storeu_ps(dst, v);
        } else {
            _mm512_store_ps(acc[q].0[t].as_mut_ptr().cast(), v);
        }
    }
}

/// Token `t`'s integer sum over a chunk of sub-blocks of quadrant `q`:
/// `Σ_u sc[u] · (base(u) + s[u][q][t])` over `u < cnt`, added to `part` (the sum of the
/// super-block's earlier chunks) unless `first`. Exact wrapping integers, so the order of the
/// terms does not show.
///
/// # Safety
/// avx512f enabled in the caller.
#[inline(always)]
pub(crate) unsafe fn chunk_isum(
    s: &ChunkSums,
    q: usize,
    t: usize,
    cnt: usize,
    part: Option<&[i32; 16]>,
    sc: &[__m512i; UNITS],
    base: impl Fn(usize) -> i32,
) -> __m512i {
    // SAFETY: the caller's contract; the rows are 64-byte aligned.
    unsafe {
        let mut v = match part {
            Some(p) => _mm512_load_si512(p.as_ptr().cast()),
            None => _mm512_setzero_si512(),
        };
        for (u, scu) in sc.iter().enumerate().take(cnt) {
            let raw = _mm512_load_si512(s[u][q].0[t].as_ptr().cast());
            let x = _mm512_add_epi32(_mm512_set1_epi32(base(u)), raw);
            v = _mm512_add_epi32(v, _mm512_mullo_epi32(x, *scu));
        }
        v
    }
}
