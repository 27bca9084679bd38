use super::*;

/// A cache of f16 or f32 rows, read in runs that end at multiples of `run` positions.
pub(in crate::ops) struct Cache {
    k: Vec<f32>,
    v: Vec<f32>,
    k16: Vec<f16>,
    v16: Vec<f16>,
    kv_dim: usize,
    run: usize,
    f32_rows: bool,
}

impl Cache {
    pub(in crate::ops) fn new(
        n: usize,
        kv_dim: usize,
        run: usize,
        f32_rows: bool,
        seed: u32,
    ) -> Cache {
        let val = |i: usize, s: u32| {
            let h = (i as u32 ^ s).wrapping_mul(2_654_435_761).rotate_left(13);
            (h % 2001) as f32 / 1000.0 - 1.0
        };
        let k: Vec<f32> = (0..n * kv_dim).map(|i| val(i, seed)).collect();
        let v: Vec<f32> = (0..n * kv_dim).map(|i| val(i, seed ^ 0x55)).collect();
        Cache {
            k16: k.iter().map(|&x| f16::from_f32(x)).collect(),
            v16: v.iter().map(|&x| f16::from_f32(x)).collect(),
            k,
            v,
            kv_dim,
            run,
            f32_rows,
        }
    }

    fn run_of<'a>(&self, pos: usize, f: &'a [f32], h: &'a [f16]) -> (KvRow<'a>, usize) {
        let n = f.len() / self.kv_dim;
        let end = (pos + self.run - pos % self.run).min(n);
        let (a, b) = (pos * self.kv_dim, end * self.kv_dim);
        if self.f32_rows {
            (KvRow::F32(&f[a..b]), end - pos)
        } else {
            (KvRow::F16(&h[a..b]), end - pos)
        }
    }
}

fn one_row(run: KvRow<'_>, kv_dim: usize) -> KvRow<'_> {
    match run {
        KvRow::F32(r) => KvRow::F32(&r[..kv_dim]),
        KvRow::F16(r) => KvRow::F16(&r[..kv_dim]),
        other => other,
    }
}

impl KvRead for Cache {
    fn key(&self, pos: usize) -> KvRow<'_> {
        one_row(self.key_run(pos).0, self.kv_dim)
    }
    fn value(&self, pos: usize) -> KvRow<'_> {
        one_row(self.value_run(pos).0, self.kv_dim)
    }
    fn key_run(&self, pos: usize) -> (KvRow<'_>, usize) {
        self.run_of(pos, &self.k, &self.k16)
    }
    fn value_run(&self, pos: usize) -> (KvRow<'_>, usize) {
        self.run_of(pos, &self.v, &self.v16)
    }
}

/// Head shapes the attention tests cover: (query heads, K/V heads, head width).
pub(in crate::ops) const SHAPES: [(usize, usize, usize); 6] = [
    (4, 4, 64),
    (6, 2, 64),
    (4, 1, 32),
    (2, 2, 48),
    (2, 1, 36),
    (2, 2, 256),
];

/// The shape `(n_heads, n_kv_heads, head_dim)`: plain (`variant` 0), soft-capped as Gemma 2
/// (1), or with gpt-oss's per-head sinks (2: `sinks`).
pub(in crate::ops) fn shape_variant(
    (n_heads, n_kv_heads, head_dim): (usize, usize, usize),
    variant: usize,
    sinks: &[f32],
) -> AttnShape<'_> {
    AttnShape {
        softcap: if variant == 1 { 1.5 } else { 0.0 },
        sinks: (variant == 2).then_some(sinks),
        ..AttnShape::new(n_heads, n_kv_heads, head_dim, 0.125)
    }
}

/// Every (token, head) of a tile equals [`attend`] alone, bit for bit.
#[test]
fn a_tile_equals_attention_query_by_query() {
    for &(n_heads, n_kv_heads, head_dim) in &SHAPES {
        let sinks: Vec<f32> = (0..n_heads).map(|h| h as f32 * 0.7 - 1.0).collect();
        for (f32_rows, variant) in [false, true]
            .into_iter()
            .flat_map(|f| [(f, 0), (f, 1), (f, 2)])
        {
            let shape = shape_variant((n_heads, n_kv_heads, head_dim), variant, &sinks);
            let kv_dim = n_kv_heads * head_dim;
            let cache = Cache::new(90, kv_dim, 16, f32_rows, head_dim as u32);
            let group = n_heads / n_kv_heads;
            let qd = n_heads * head_dim;
            for (first, n_tok, window) in
                [(0, 1, 0), (0, 5, 0), (37, 7, 0), (60, 9, 20), (3, 16, 5)]
            {
                for g in 0..n_kv_heads {
                    let heads = g * group..(g + 1) * group;
                    let n_tok = n_tok.min(TILE_ROWS / group).max(1);
                    let q: Vec<f32> = (0..n_tok * qd)
                        .map(|i| ((i * 7919 % 1999) as f32 / 999.0 - 1.0) * 2.0)
                        .collect();
                    let keys: Vec<Range<usize>> = (0..n_tok)
                        .map(|t| {
                            let p = first + t;
                            let lo = if window > 0 {
                                (p + 1).saturating_sub(window)
                            } else {
                                0
                            };
                            lo..p + 1
                        })
                        .collect();
                    let mut got = vec![0.0; n_tok * group * head_dim];
                    attend_tile(
                        &q,
                        &keys,
                        &cache,
                        shape,
                        heads.clone(),
                        &mut TileScratch::default(),
                        &mut got,
                    );
                    for (t, range) in keys.iter().enumerate() {
                        let mut want = vec![0.0; group * head_dim];
                        attend(
                            &q[t * qd..(t + 1) * qd],
                            &cache,
                            range.clone(),
                            shape,
                            heads.clone(),
                            &mut AttnScratch::default(),
                            &mut want,
                        );
                        let have = &got[t * group * head_dim..(t + 1) * group * head_dim];
                        let same = have
                            .iter()
                            .zip(&want)
                            .all(|(a, b)| a.to_bits() == b.to_bits());
                        assert!(
                            same,
                            "shape {n_heads}/{n_kv_heads}/{head_dim} f32={f32_rows} variant {variant} token {t} of {n_tok} at {first} window {window}"
                        );
                    }
                }
            }
        }
    }
}

/// A scratch reserved for `positions` positions is never reallocated by tiles of any row count
/// over contexts growing up to that bound (the engine reserves once per thread, so a step
/// allocates nothing however its contexts and drafts grow).
#[test]
fn a_reserved_scratch_is_not_reallocated_as_contexts_grow() {
    // 32 heads over 2 K/V heads: 16 query heads per tile, so every row count up to TILE_ROWS.
    let (n_heads, n_kv_heads, head_dim, positions) = (32, 2, 64, 2000);
    let shape = AttnShape::new(n_heads, n_kv_heads, head_dim, 0.125);
    let cache = Cache::new(positions, n_kv_heads * head_dim, 16, false, 7);
    let (group, qd) = (n_heads / n_kv_heads, n_heads * head_dim);
    let mut scratch = TileScratch::default();
    scratch.reserve(group, positions, head_dim);
    let held = |s: &TileScratch| {
        (
            s.scores.as_ptr(),
            s.scores.capacity(),
            s.q16.capacity(),
            s.qv.capacity(),
            s.single.capacity(),
        )
    };
    let before = held(&scratch);
    let q: Vec<f32> = (0..qd).map(|i| (i % 13) as f32 * 0.1 - 0.6).collect();
    for end in [1, 17, 300, 1024, 1999, positions] {
        for heads in [0..1, 0..4, 0..group, group..2 * group] {
            let n_sel = heads.len();
            let mut out = scratch.take_out(n_sel * head_dim);
            let keys = [Range { start: 0, end }];
            attend_tile(&q, &keys, &cache, shape, heads, &mut scratch, &mut out);
            scratch.put_out(out);
            assert_eq!(held(&scratch), before, "context of {end}, {n_sel} heads");
        }
    }
    // The largest tile's scores (16 rows × 2000) pass the room a first call keeps anyway, so
    // without the reservation they would have grown above.
    assert!(before.1 >= TILE_ROWS * positions);
}
