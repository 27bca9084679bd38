use super::super::attention::AttnScratch;
use super::super::attention_tile::tests::{Cache, SHAPES, shape_variant};
use super::*;

/// Every head of [`attend_heads`] equals [`attend`] for that head alone, bit for bit: plain,
/// soft-capped and sink shapes, grouped and not, f16 and f32 caches, runs cut at 16 and 7
/// positions, windows and full contexts.
#[test]
fn every_head_equals_attention_head_by_head() {
    let more = [(12, 12, 64), (32, 8, 64)];
    for &(n_heads, n_kv_heads, head_dim) in SHAPES.iter().chain(&more) {
        let sinks: Vec<f32> = (0..n_heads).map(|h| h as f32 * 0.7 - 1.0).collect();
        for (f32_rows, variant, run) in [false, true]
            .into_iter()
            .flat_map(|f| [(f, 0, 16), (f, 1, 16), (f, 2, 16), (f, 0, 7)])
        {
            let shape = shape_variant((n_heads, n_kv_heads, head_dim), variant, &sinks);
            let cache = Cache::new(90, n_kv_heads * head_dim, run, f32_rows, head_dim as u32);
            let qd = n_heads * head_dim;
            let q: Vec<f32> = (0..qd)
                .map(|i| ((i * 7919 % 1999) as f32 / 999.0 - 1.0) * 2.0)
                .collect();
            let mut scratch = TileScratch::default();
            for keys in [0..1, 0..17, 0..90, 12..61, 70..71, 33..48] {
                let mut got = vec![f32::NAN; qd];
                attend_heads(&q, keys.clone(), &cache, shape, &mut scratch, &mut got);
                for h in 0..n_heads {
                    let mut want = vec![0.0; head_dim];
                    attend(
                        &q,
                        &cache,
                        keys.clone(),
                        shape,
                        h..h + 1,
                        &mut AttnScratch::default(),
                        &mut want,
                    );
                    let have = &got[h * head_dim..(h + 1) * head_dim];
                    assert!(
                        have.iter()
                            .zip(&want)
                            .all(|(a, b)| a.to_bits() == b.to_bits()),
                        "shape {n_heads}/{n_kv_heads}/{head_dim} f32={f32_rows} variant {variant} run {run} keys {keys:?} head {h}"
                    );
                }
            }
        }
    }
}

/// A scratch reserved for every head and the longest context is never reallocated.
#[test]
fn a_reserved_scratch_is_not_reallocated_by_heads() {
    let (n_heads, n_kv_heads, head_dim, positions) = (32, 8, 64, 1500);
    let shape = AttnShape::new(n_heads, n_kv_heads, head_dim, 0.125);
    let cache = Cache::new(positions, n_kv_heads * head_dim, 16, false, 3);
    let mut scratch = TileScratch::default();
    scratch.reserve(n_heads, positions, head_dim);
    let held = |s: &TileScratch| (s.scores.as_ptr(), s.scores.capacity(), s.qv.capacity());
    let before = held(&scratch);
    let q: Vec<f32> = (0..n_heads * head_dim)
        .map(|i| (i % 11) as f32 * 0.1 - 0.5)
        .collect();
    let mut out = vec![0.0; n_heads * head_dim];
    for end in [1, 16, 17, 700, positions] {
        attend_heads(&q, 0..end, &cache, shape, &mut scratch, &mut out);
        assert_eq!(held(&scratch), before, "context of {end}");
    }
}
