//! Embeddings through the engine (`EngineHandle::embed`): computed as engine jobs batched into
//! steps, bit-identical to `Model::embed` alone and among decoding sessions; cached beside the
//! engine by namespace salt and tokens (isolated salts never hit); their blocks shared
//! with later prompts; bad input refused with the reason; an abandoned embedding frees its
//! session.

use std::sync::Arc;
use std::time::{Duration, Instant};

use memoria_kv::{KvElem, NamespaceId};
use memoria_model::llama::Model;
use memoria_model::tokenizer::Tokenizer;
use memoria_sched::{EngineConfig, EngineError, EngineHandle, Event, GenerateParams, Speculate};

use crate::shared;

const NS: NamespaceId = NamespaceId(1);

fn start(kv_elem: KvElem) -> EngineHandle {
    let model = Model::load(shared::path("models/stories260K-f32.gguf")).expect("model");
    let tok = Tokenizer::from_gguf(model.gguf()).expect("tokenizer");
    let cfg = EngineConfig {
        kv_elem,
        ..EngineConfig::default()
    };
    EngineHandle::start(Arc::new(model), Arc::new(tok), cfg).expect("engine")
}

fn texts(tok: &Tokenizer) -> Vec<Vec<u32>> {
    [
        "Once upon a time there was a little girl named Lily who loved to play outside in the park with her friends.",
        "The cat sat on the mat.",
        "Tim had a big red ball and he liked to throw it high into the sky every morning before school.",
    ]
    .iter()
    .map(|t| tok.encode(t, true, false))
    .collect()
}

#[test]
fn engine_embeddings_equal_the_model_alone_and_among_decoding_sessions() {
    let e = start(KvElem::F32);
    let inputs = texts(e.tokenizer());
    let want: Vec<Vec<f32>> = inputs
        .iter()
        .map(|t| e.model().embed(t, 512).expect("embed"))
        .collect();
    shared::register(&e, NS, "a");
    shared::runtime().block_on(async {
        let alone = e.embed(NS, &inputs).await.expect("embed");
        for (i, (got, want)) in alone.iter().zip(&want).enumerate() {
            assert!(!got.cached, "input {i} cannot be cached yet");
            assert_eq!(got.vector.as_slice(), want.as_slice(), "input {i} alone");
        }
        assert_eq!(e.stats().snapshot().embeddings, 3);

        // The same inputs under another salt (not cached there) while eight sessions decode:
        // their chunks share steps with the decoders and the vectors do not change a bit.
        let nb = NamespaceId(3);
        shared::register(&e, nb, "b");
        let prompt = e.tokenizer().encode("One day, a boy", true, true);
        let mut streams = Vec::new();
        for _ in 0..8 {
            let id = e.open(nb).await.expect("open");
            e.append(nb, id, prompt.clone()).await.expect("append");
            let params = GenerateParams {
                close_when_done: true,
                ignore_eos: true,
                ..GenerateParams::greedy(60)
            };
            streams.push(e.generate(nb, id, params).expect("generate"));
        }
        for s in &mut streams {
            assert!(matches!(s.next().await, Some(Event::Token { .. })));
        }
        let steps = e.stats().snapshot().steps;
        let busy = e.embed(nb, &inputs).await.expect("embed under load");
        assert!(e.stats().snapshot().steps > steps);
        for (i, (got, want)) in busy.iter().zip(&want).enumerate() {
            assert!(!got.cached);
            assert_eq!(
                got.vector.as_slice(),
                want.as_slice(),
                "input {i} under load"
            );
        }
        for mut s in streams {
            while let Some(ev) = s.next().await {
                match ev {
                    Event::Token { .. } => {}
                    Event::Done { .. } => break,
                    Event::Error(err) => panic!("a decoding session failed: {err}"),
                }
            }
        }
    });
    e.shutdown();
}

#[test]
fn embeddings_are_cached_by_salt_and_their_blocks_serve_later_prompts() {
    let e = start(KvElem::F16);
    let inputs = texts(e.tokenizer());
    shared::register(&e, NS, "a");
    shared::runtime().block_on(async {
        let first = e.embed(NS, &inputs[..1]).await.expect("embed");
        assert!(!first[0].cached);
        let norm: f32 = first[0].vector.iter().map(|v| v * v).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "norm {norm}");
        // The cached one comes back as it was; the others are computed; the cache holds 3.
        let again = e.embed(NS, &inputs).await.expect("embed");
        assert!(again[0].cached && !again[1].cached && !again[2].cached);
        assert_eq!(again[0].vector, first[0].vector);
        assert_eq!(e.embedding_cache().len(), 3);
        assert_eq!(e.stats().snapshot().embeddings, 3);
        // Another namespace's salt never hits, even for the same tokens.
        shared::register(&e, NamespaceId(2), "isolated");
        let other = e.embed(NamespaceId(2), &inputs[..1]).await.expect("embed");
        assert!(!other[0].cached);
        // The embedding's full blocks are in the pool under its salt: a prompt of the same
        // tokens in that namespace takes them from the cache.
        let tokens = &inputs[0];
        let id = e.open(NS).await.expect("open");
        e.append(NS, id, tokens.clone()).await.expect("append");
        e.prefill(NS, id).await.expect("prefill");
        let info = e.info(NS, id).await.expect("info");
        let block = 16;
        assert!(tokens.len() > 2 * block, "the text must span whole blocks");
        // (Whole blocks at least; the pool also reuses a partial tail token by token.)
        assert!(
            info.cached_tokens >= tokens.len() / block * block,
            "{} of {} tokens cached",
            info.cached_tokens,
            tokens.len()
        );
        e.close(NS, id).await.expect("close");
        // No embedding session is left behind.
        assert_eq!(e.stats().snapshot().sessions_active, 0);
    });
    e.shutdown();
}

#[test]
fn bad_embedding_inputs_are_refused_with_the_reason() {
    let e = start(KvElem::F16);
    shared::register(&e, NS, "a");
    let n_vocab = e.model().hparams().n_vocab as u32;
    let too_long = vec![1u32; e.model().hparams().n_ctx_train + 1];
    shared::runtime().block_on(async {
        let empty = e.embed(NS, &[vec![]]).await;
        assert!(
            matches!(&empty, Err(EngineError::InvalidArgument(m)) if m.contains("nothing")),
            "{empty:?}"
        );
        let bad = e.embed(NS, &[vec![1, n_vocab]]).await;
        assert!(
            matches!(&bad, Err(EngineError::InvalidArgument(m)) if m.contains("vocabulary")),
            "{bad:?}"
        );
        let long = e.embed(NS, &[too_long]).await;
        assert!(
            matches!(long, Err(EngineError::ContextOverflow { .. })),
            "{long:?}"
        );
        // The engine is fine afterwards.
        let ok = e.embed(NS, &[vec![1, 2, 3]]).await.expect("embed");
        assert_eq!(ok[0].vector.len(), e.model().hparams().n_embd);
    });
    e.shutdown();
}

#[test]
fn an_abandoned_embedding_leaves_no_session_behind() {
    let e = start(KvElem::F16);
    shared::register(&e, NS, "a");
    let long: Vec<u32> = (0..e.model().hparams().n_ctx_train as u32)
        .map(|i| 1 + i % 400)
        .collect();
    shared::runtime().block_on(async {
        let baseline = e.pool_stats().snapshot().total.blocks_used;
        let call = e.embed(NS, std::slice::from_ref(&long));
        // Dropped after the engine has taken it, long before it can finish.
        let _ = tokio::time::timeout(Duration::from_millis(1), call).await;
        let deadline = Instant::now() + Duration::from_secs(20);
        while e.stats().snapshot().sessions_active != 0 {
            assert!(
                Instant::now() < deadline,
                "the embedding session stayed open"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // Its partial last block is released; whole blocks may stay cached, unreferenced.
        let used = e.pool_stats().snapshot().total.blocks_used;
        assert!(used >= baseline);
        assert!(e.embedding_cache().is_empty());
    });
    e.shutdown();
}

#[test]
fn embeddings_take_at_most_their_share_of_a_step_while_sessions_decode() {
    let model = Model::load(shared::path("models/stories260K-f32.gguf")).expect("model");
    let tok = Tokenizer::from_gguf(model.gguf()).expect("tokenizer");
    let cfg = EngineConfig {
        kv_elem: KvElem::F32,
        embed_step_tokens: 4,
        ..EngineConfig::default()
    };
    let e = EngineHandle::start(Arc::new(model), Arc::new(tok), cfg).expect("engine");
    let input = texts(e.tokenizer()).swap_remove(0);
    let want = e.model().embed(&input, 512).expect("embed");
    shared::register(&e, NS, "a");
    let prompt = e.tokenizer().encode("Once", true, true);
    shared::runtime().block_on(async {
        let id = e.open(NS).await.expect("open");
        e.append(NS, id, prompt.clone()).await.expect("append");
        // One token per decoding step: no drafts (they could come from the embedding's own
        // blocks, cached in the namespace's group), so a step's tokens beyond one are
        // embedding tokens.
        let params = GenerateParams {
            close_when_done: true,
            ignore_eos: true,
            speculation: Speculate::OFF,
            ..GenerateParams::greedy(300)
        };
        let mut stream = e.generate(NS, id, params).expect("generate");
        assert!(matches!(stream.next().await, Some(Event::Token { .. })));
        let got = e
            .embed(NS, std::slice::from_ref(&input))
            .await
            .expect("embed");
        // Finished while the generation still decodes, 4 embedding tokens per step at most.
        let snap = e.stats().snapshot();
        assert!(
            snap.step_tokens_max <= prompt.len().max(1 + 4) as u64,
            "a step carried {} tokens",
            snap.step_tokens_max
        );
        assert_eq!(got[0].vector.as_slice(), want.as_slice());
        let mut produced = 1;
        while let Some(ev) = stream.next().await {
            match ev {
                Event::Token { .. } => produced += 1,
                Event::Done { .. } => break,
                Event::Error(err) => panic!("generation failed: {err}"),
            }
        }
        assert_eq!(produced, 300, "the generation outlived the embedding");
    });
    e.shutdown();
}
