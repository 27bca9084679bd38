//! Mask cost per token on SmolLM2's 49k vocabulary, following the tokens of a valid instance of a
//! nested schema (and of `json_object` over the same text): cold (every mask computed by the
//! trie walk, as on a state's first visit), warm (cached: copy the mask, or apply it to a logits
//! row). Criterion's reported time is per token. `bounded_string` is the slow case (a `maxLength`
//! string: every walk visits the whole trie). `compile/nested_schema`: one schema's compile.

#[path = "../tests/common/real.rs"]
mod real;

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use memoria_constrain::{Constraint, Grammar, Matcher, ResponseFormat, Vocab};

struct Case {
    name: &'static str,
    constraint: Arc<Constraint>,
    ids: Vec<u32>,
}

fn cases() -> Vec<Case> {
    let (tok, pieces, eog) = real::smollm2();
    let vocab = Arc::new(Vocab::new(&pieces, &eog).expect("vocab"));
    let ids = tok.encode(real::NESTED_INSTANCE, false, false);
    let schema = ResponseFormat::from_json_str(&format!(
        r#"{{"type":"json_schema","json_schema":{{"name":"nested","strict":true,"schema":{}}}}}"#,
        real::NESTED_SCHEMA
    ))
    .expect("format");
    let t = Instant::now();
    let g = Grammar::compile(&schema).expect("compile");
    eprintln!(
        "nested schema: compiled in {:.1} ms, {} DFA states; {} tokens, trie nodes (all, non-plain) {:?}; instance = {} tokens",
        t.elapsed().as_secs_f64() * 1e3,
        g.dfa_states().unwrap_or(0),
        vocab.len(),
        vocab.trie_nodes(),
        ids.len()
    );
    // The slow case: inside a length-bounded string every state counts characters, so no state
    // loops on plain bytes and each walk visits the whole trie.
    let bounded = ResponseFormat::from_json_str(
        r#"{"type":"json_schema","json_schema":{"name":"b","strict":true,"schema":{"type":"object",
            "properties":{"text":{"type":"string","maxLength":300}},"required":["text"],"additionalProperties":false}}}"#,
    )
    .expect("format");
    let text = r#"{"text": "The quick brown fox jumps over the lazy dog; structured outputs keep every token of this sentence inside the schema's bounds, which count characters one by one."}"#;
    vec![
        Case {
            name: "bounded_string",
            constraint: Constraint::new(
                Arc::new(Grammar::compile(&bounded).expect("compile")),
                vocab.clone(),
            ),
            ids: tok.encode(text, false, false),
        },
        Case {
            name: "nested_schema",
            constraint: Constraint::new(Arc::new(g), vocab.clone()),
            ids: ids.clone(),
        },
        Case {
            name: "json_object",
            constraint: Constraint::new(Arc::new(Grammar::json_object()), vocab),
            ids,
        },
    ]
}

/// Runs `per_token` at each position of the instance, `iters` passes; time per token.
fn per_token(
    case: &Case,
    iters: u64,
    mut per_token: impl FnMut(&mut Matcher, &mut [u64], &mut [f32]),
) -> Duration {
    let n = case.constraint.vocab().len();
    let mut mask = vec![0u64; n.div_ceil(64)];
    let mut logits = vec![0.5f32; n];
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let mut m = Matcher::new(case.constraint.clone());
        let t = Instant::now();
        for &id in &case.ids {
            per_token(&mut m, &mut mask, &mut logits);
            m.advance(id).expect("instance token allowed");
        }
        total += t.elapsed();
        black_box(&mask);
        black_box(&logits);
    }
    total / case.ids.len() as u32
}

/// What a new schema costs once (then cached by content): regex, determinization, trimming.
fn compile(c: &mut Criterion) {
    let schema = ResponseFormat::from_json_str(&format!(
        r#"{{"type":"json_schema","json_schema":{{"name":"nested","strict":true,"schema":{}}}}}"#,
        real::NESTED_SCHEMA
    ))
    .expect("format");
    c.bench_function("compile/nested_schema", |b| {
        b.iter(|| Grammar::compile(black_box(&schema)).expect("compile"))
    });
}

fn bench(c: &mut Criterion) {
    let cases = cases();
    let mut g = c.benchmark_group("mask_per_token");
    g.sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    for case in &cases {
        g.bench_function(format!("{}/cold_walk", case.name), |b| {
            b.iter_custom(|iters| per_token(case, iters, |m, mask, _| m.compute_mask(mask)))
        });
        // One pass fills the cache for every state the instance visits.
        per_token(case, 1, |m, mask, _| m.fill_mask(mask));
        g.bench_function(format!("{}/warm_fill_mask", case.name), |b| {
            b.iter_custom(|iters| per_token(case, iters, |m, mask, _| m.fill_mask(mask)))
        });
        g.bench_function(format!("{}/warm_apply_logits", case.name), |b| {
            b.iter_custom(|iters| per_token(case, iters, |m, _, logits| m.apply(logits)))
        });
        let s = case.constraint.cache_stats();
        eprintln!("{}: mask cache {s:?}", case.name);
    }
    g.finish();
}

criterion_group!(benches, bench, compile);
criterion_main!(benches);
