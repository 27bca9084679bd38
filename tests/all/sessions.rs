//! The engine thread end to end: sessions over the shared block pool with continuous batching.
//! Greedy output and final logits are bit-identical alone, among 63 others, from cache, and after
//! a fork; prefixes are stored once; namespaces with different salts never share; cancellation
//! and idle TTL release blocks; a long prefill does not starve decoding sessions.

use std::sync::Arc;
use std::time::{Duration, Instant};

use memoria_kernels::GgmlType;
use memoria_kv::{NamespaceId, PinLevel};
use memoria_model::gguf::GgufFile;
use memoria_model::llama::Model;
use memoria_model::synth::{self, SynthSpec};
use memoria_model::tokenizer::Tokenizer;
use memoria_sched::{EngineConfig, EngineHandle, Event, GenerateParams, SessionId, Usage};

use crate::shared;

fn start(cfg: EngineConfig) -> EngineHandle {
    start_with(
        Model::load(shared::path("models/stories260K-f32.gguf")).expect("model"),
        cfg,
    )
}

fn start_with(model: Model, cfg: EngineConfig) -> EngineHandle {
    let tok = Tokenizer::from_gguf(model.gguf()).expect("tokenizer");
    EngineHandle::start(Arc::new(model), Arc::new(tok), cfg).expect("engine")
}

fn synthetic(ty: GgmlType) -> Model {
    let spec = SynthSpec {
        context: 512,
        ..SynthSpec::tiny(synth::Arch::Llama, ty)
    };
    let bytes = synth::synthesize(&spec).expect("synthesize").to_bytes();
    Model::from_gguf(GgufFile::from_bytes(bytes).expect("parse")).expect("load")
}

const NS: NamespaceId = NamespaceId(1);

fn greedy(max_tokens: usize, close: bool) -> GenerateParams {
    GenerateParams {
        close_when_done: close,
        ..GenerateParams::greedy(max_tokens)
    }
}

/// What one generation produced.
#[derive(Debug, Clone, PartialEq)]
struct Output {
    tokens: Vec<u32>,
    text: String,
    usage: Usage,
}

async fn collect(stream: &mut memoria_sched::GenerationStream) -> Output {
    let mut out = Output {
        tokens: Vec::new(),
        text: String::new(),
        usage: Usage::default(),
    };
    while let Some(ev) = stream.next().await {
        match ev {
            Event::Token { id, text, .. } => {
                out.tokens.push(id);
                out.text.push_str(&text);
            }
            Event::Done {
                text_tail, usage, ..
            } => {
                out.text.push_str(&text_tail);
                out.usage = usage;
                return out;
            }
            Event::Error(e) => panic!("generation failed: {e}"),
        }
    }
    panic!("stream ended without Done");
}

/// Opens a session with `prompt`, generates `n` greedy tokens, returns output and final logits.
async fn run_one(
    e: &EngineHandle,
    ns: NamespaceId,
    s: &str,
    prompt: &[u32],
    n: usize,
) -> (Output, Vec<f32>, SessionId) {
    let id = shared::open_salted(e, ns, s).await;
    e.append(ns, id, prompt.to_vec()).await.expect("append");
    let mut stream = e.generate(ns, id, greedy(n, false)).expect("generate");
    let out = collect(&mut stream).await;
    let logits = e
        .logits(ns, id)
        .await
        .expect("logits")
        .expect("last logits");
    (out, logits, id)
}

#[test]
fn engine_greedy_matches_llama_cpp() {
    let e = start(EngineConfig::default());
    let tok = e.tokenizer().clone();
    let golden = shared::json("golden/greedy-f32.json");
    shared::runtime().block_on(async {
        for case in golden["greedy"]["results"].as_array().expect("results") {
            let prompt = tok.encode(case["prompt"].as_str().expect("prompt"), true, true);
            let want: Vec<u32> =
                serde_json::from_value(case["generated_ids"].clone()).expect("ids");
            let (out, _, id) = run_one(&e, NS, "shared", &prompt, want.len()).await;
            assert_eq!(out.tokens, want, "prompt {:?}", case["prompt"]);
            assert_eq!(out.text, case["generated_text"].as_str().expect("text"));
            e.close(NS, id).await.expect("close");
        }
    });
    e.shutdown();
}

fn prompts(tok: &Tokenizer, n: usize) -> Vec<Vec<u32>> {
    (0..n)
        .map(|i| {
            tok.encode(
                &format!("Lily had {i} red balls. One day she saw a big dog and"),
                true,
                true,
            )
        })
        .collect()
}

#[test]
fn sixty_four_concurrent_sessions_match_running_alone_bit_for_bit() {
    let e = start(EngineConfig {
        step_tokens: 256,
        ..EngineConfig::default()
    });
    let tok = e.tokenizer().clone();
    check_batched_equals_alone(&e, &prompts(&tok, 64));
    e.shutdown();
}

#[test]
fn synthetic_model_batched_equals_alone_with_f16_and_q8_0_kv() {
    for kv_elem in [memoria_kv::KvElem::F16, memoria_kv::KvElem::Q8_0] {
        let cfg = EngineConfig {
            step_tokens: 64,
            kv_elem,
            ..EngineConfig::default()
        };
        let e = start_with(synthetic(GgmlType::Q8_0), cfg);
        let prompts: Vec<Vec<u32>> = (0..16u32)
            .map(|i| (0..20 + i).map(|j| 3 + (i * 31 + j * 7) % 250).collect())
            .collect();
        check_batched_equals_alone(&e, &prompts);
        e.shutdown();
    }
}

/// Runs every prompt alone (own salt, nothing cached), then all at once (one salt), and
/// compares tokens and final logits exactly.
fn check_batched_equals_alone(e: &EngineHandle, prompts: &[Vec<u32>]) {
    let rt = shared::runtime();
    let alone: Vec<(Output, Vec<f32>)> = rt.block_on(async {
        let mut v = Vec::new();
        for (i, p) in prompts.iter().enumerate() {
            let (out, logits, id) = run_one(e, NS, &format!("alone-{i}"), p, 24).await;
            e.close(NS, id).await.expect("close");
            v.push((out, logits));
        }
        v
    });
    let together: Vec<(Output, Vec<f32>)> = rt.block_on(async {
        let tasks: Vec<_> = prompts
            .iter()
            .cloned()
            .map(|p| {
                let e = e.clone();
                tokio::spawn(async move {
                    let (out, logits, _) = run_one(&e, NS, "together", &p, 24).await;
                    (out, logits)
                })
            })
            .collect();
        let mut v = Vec::new();
        for t in tasks {
            v.push(t.await.expect("task"));
        }
        v
    });
    for (i, (a, b)) in alone.iter().zip(&together).enumerate() {
        assert_eq!(a.0.tokens, b.0.tokens, "session {i} tokens");
        assert!(a.1 == b.1, "session {i} final logits differ");
    }
    let s = e.stats().snapshot();
    assert!(
        s.step_tokens_max >= 16,
        "sessions were batched together (max step {})",
        s.step_tokens_max
    );
}

#[test]
fn cached_prefix_and_fork_change_nothing_but_speed() {
    let e = start(EngineConfig::default());
    let tok = e.tokenizer().clone();
    let prompt = tok.encode(&"Once upon a time there was a cat. ".repeat(8), true, true);
    shared::runtime().block_on(async {
        let (first, first_logits, id) = run_one(&e, NS, "p", &prompt, 32).await;
        assert_eq!(first.usage.cached_tokens, 0);
        e.close(NS, id).await.expect("close");
        let (second, second_logits, id2) = run_one(&e, NS, "p", &prompt, 32).await;
        assert!(
            second.usage.cached_tokens >= prompt.len() - 16,
            "hit {} of {}",
            second.usage.cached_tokens,
            prompt.len()
        );
        assert_eq!(first.tokens, second.tokens);
        assert!(first_logits == second_logits, "logits from cache differ");

        // Fork a session that has only its prompt, and generate on both sides.
        let base = shared::open_salted(&e, NS, "fork").await;
        e.append(NS, base, prompt.clone()).await.expect("append");
        let child = e.fork(NS, base).await.expect("fork");
        let mut a = e.generate(NS, base, greedy(32, false)).expect("gen");
        let mut b = e.generate(NS, child, greedy(32, false)).expect("gen");
        let (oa, ob) = (collect(&mut a).await, collect(&mut b).await);
        assert_eq!(oa.tokens, first.tokens);
        assert_eq!(ob.tokens, first.tokens);
        // Fork after computing: the child continues from the same state.
        let child2 = e.fork(NS, base).await.expect("fork");
        let la = e.logits(NS, base).await.expect("logits");
        let lb = e.logits(NS, child2).await.expect("logits");
        assert!(la.is_some() && la == lb);
        e.close(NS, id2).await.expect("close");
    });
    e.shutdown();
}

#[test]
fn sixteen_sessions_with_a_common_prefix_hold_one_copy() {
    let e = start(EngineConfig::default());
    let tok = e.tokenizer().clone();
    let prefix = tok.encode(
        &"The little bird sang a happy song in the tall green tree. ".repeat(15),
        true,
        true,
    );
    assert!(
        prefix.len() >= 300 && prefix.len() < 480,
        "{}",
        prefix.len()
    );
    let block_tokens = 16;
    shared::runtime().block_on(async {
        shared::register(&e, NS, "s");
        let info = e
            .warm(NS, prefix.clone(), PinLevel::Priority(1), None)
            .await
            .expect("warm");
        assert_eq!(info.tokens, prefix.len());
        let tasks: Vec<_> = (0..16)
            .map(|i| {
                let e = e.clone();
                let mut p = prefix.clone();
                p.extend(tok.encode(&format!(" Then {i} frogs jumped."), false, false));
                tokio::spawn(async move {
                    let id = e.open(NS).await.expect("open");
                    e.append(NS, id, p).await.expect("append");
                    let out =
                        collect(&mut e.generate(NS, id, greedy(4, false)).expect("gen")).await;
                    (id, out.usage)
                })
            })
            .collect();
        let mut ids = Vec::new();
        for t in tasks {
            let (id, usage) = t.await.expect("task");
            assert!(
                usage.cached_tokens >= prefix.len() / block_tokens * block_tokens - block_tokens,
                "usage {usage:?}"
            );
            ids.push(id);
        }
        let snap = e.pool_stats().snapshot();
        let prefix_blocks = prefix.len() / block_tokens;
        let used = snap.total.blocks_used as usize;
        // One copy of the prefix plus each session's own tail blocks (at most 3 each here).
        assert!(
            used <= prefix_blocks + 1 + 16 * 3,
            "{used} blocks in use for {prefix_blocks} prefix blocks"
        );
        for id in ids {
            e.close(NS, id).await.expect("close");
        }
    });
    e.shutdown();
}

#[test]
fn namespaces_with_different_salts_never_hit_each_other() {
    let e = start(EngineConfig::default());
    let tok = e.tokenizer().clone();
    let prompt = tok.encode(
        &"A big red ball rolled down the hill. ".repeat(6),
        true,
        true,
    );
    shared::runtime().block_on(async {
        let (a, _, id) = run_one(&e, NamespaceId(1), "tenant-a", &prompt, 4).await;
        e.close(NamespaceId(1), id).await.expect("close");
        let (b, _, id) = run_one(&e, NamespaceId(2), "tenant-b", &prompt, 4).await;
        assert_eq!(
            b.usage.cached_tokens, 0,
            "isolated namespace hit another's blocks"
        );
        assert_eq!(a.tokens, b.tokens);
        // A session handle is not valid in another namespace.
        assert!(e.info(NamespaceId(1), id).await.is_err());
        e.close(NamespaceId(2), id).await.expect("close");
        let (c, _, _) = run_one(&e, NamespaceId(3), "tenant-a", &prompt, 4).await;
        assert!(c.usage.cached_tokens > 0, "same salt should share");
    });
    e.shutdown();
}

#[test]
fn dropping_the_stream_cancels_and_frees_blocks() {
    let e = start(EngineConfig::default());
    let tok = e.tokenizer().clone();
    let prompt = tok.encode("Once upon a time", true, true);
    shared::runtime().block_on(async {
        let baseline = e.pool_stats().snapshot().total.blocks_used;
        let id = shared::open_salted(&e, NS, "c").await;
        e.append(NS, id, prompt).await.expect("append");
        let mut stream = e.generate(NS, id, greedy(400, true)).expect("gen");
        for _ in 0..3 {
            assert!(matches!(stream.next().await, Some(Event::Token { .. })));
        }
        drop(stream);
        let deadline = Instant::now() + Duration::from_secs(10);
        while e.pool_stats().snapshot().total.blocks_used != baseline {
            assert!(
                Instant::now() < deadline,
                "blocks not released after cancel"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(
            e.info(NS, id).await.is_err(),
            "one-shot session should be closed"
        );
        assert_eq!(e.stats().snapshot().cancelled, 1);
    });
    e.shutdown();
}

#[test]
fn idle_sessions_are_released_after_their_ttl() {
    let e = start(EngineConfig {
        idle_ttl: Some(Duration::from_millis(50)),
        ..EngineConfig::default()
    });
    let tok = e.tokenizer().clone();
    shared::runtime().block_on(async {
        let (_, _, id) = run_one(&e, NS, "ttl", &tok.encode("Hello there", true, true), 2).await;
        let deadline = Instant::now() + Duration::from_secs(10);
        while e.info(NS, id).await.is_ok() {
            assert!(Instant::now() < deadline, "idle session never released");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(e.pool_stats().snapshot().total.blocks_used, 0);
        assert!(e.stats().snapshot().ttl_closed >= 1);
    });
    e.shutdown();
}

#[test]
fn a_long_prefill_does_not_starve_decoding_sessions() {
    let e = start(EngineConfig {
        step_tokens: 16,
        ..EngineConfig::default()
    });
    let tok = e.tokenizer().clone();
    shared::runtime().block_on(async {
        let a = shared::open_salted(&e, NS, "f").await;
        e.append(NS, a, tok.encode("Once upon a time", true, true))
            .await
            .expect("append");
        let mut sa = e.generate(NS, a, greedy(200, false)).expect("gen");
        assert!(matches!(sa.next().await, Some(Event::Token { .. })));
        let b = shared::open_salted(&e, NS, "f2").await;
        let long = tok.encode(
            &"The sun was hot and the sky was blue. ".repeat(30),
            true,
            true,
        );
        assert!(long.len() > 320);
        e.append(NS, b, long).await.expect("append");
        let mut sb = e.generate(NS, b, greedy(1, false)).expect("gen");
        // While b prefills in 16-token chunks (shared with a's decode token), a keeps decoding.
        let mut a_tokens = 0;
        loop {
            tokio::select! {
                ev = sb.next() => {
                    assert!(matches!(ev, Some(Event::Token { .. })), "{ev:?}");
                    break;
                }
                ev = sa.next() => {
                    if matches!(ev, Some(Event::Token { .. })) { a_tokens += 1; }
                }
            }
        }
        assert!(
            a_tokens >= 10,
            "decoding session got only {a_tokens} tokens during a long prefill"
        );
    });
    e.shutdown();
}
