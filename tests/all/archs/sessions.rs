//! The session memory for every architecture of `golden/archs/`, through the engine: each
//! golden sequence's greedy continuation and final logits are bit-identical run alone, batched
//! among the others, from a cached prefix (its full blocks hit), after a fork, and after a save,
//! a restart and a restore through the redb tier. Blocks carry every architecture's K/V rows
//! (sliding windows, sinks, MoE layers, head sizes ≠ n_embd / n_head) without knowing them.

use std::path::PathBuf;
use std::sync::Arc;

use memoria_kv::NamespaceId;
use memoria_model::llama::Model;
use memoria_model::tokenizer::Tokenizer;
use memoria_sched::{EngineConfig, EngineHandle, Event, GenerateParams, GenerationStream};
use memoria_store::{StoreOptions, TierStack};

use super::{ARCHS, load, sequences};
use crate::shared;

const NS: NamespaceId = NamespaceId(5);
const GENERATE: usize = 6;
const BLOCK: usize = 16;

fn greedy() -> GenerateParams {
    // Random weights may well predict an end-of-generation token: generate through it.
    GenerateParams {
        close_when_done: false,
        ignore_eos: true,
        ..GenerateParams::greedy(GENERATE)
    }
}

async fn tokens_of(stream: &mut GenerationStream) -> (Vec<u32>, usize) {
    let mut out = Vec::new();
    while let Some(ev) = stream.next().await {
        match ev {
            Event::Token { id, .. } => out.push(id),
            Event::Done { usage, .. } => return (out, usage.cached_tokens),
            Event::Error(e) => panic!("generation failed: {e}"),
        }
    }
    panic!("stream ended without Done");
}

/// What one run gives: greedy tokens, cached prompt tokens, final logits' bits.
type Run = (Vec<u32>, usize, Vec<u32>);

async fn run_one(e: &EngineHandle, salt: &str, prompt: &[u32]) -> Run {
    let id = shared::open_salted(e, NS, salt).await;
    e.append(NS, id, prompt.to_vec()).await.expect("append");
    let (tokens, cached) = tokens_of(&mut e.generate(NS, id, greedy()).expect("generate")).await;
    let logits = e.logits(NS, id).await.expect("logits").expect("last");
    e.close(NS, id).await.expect("close");
    (tokens, cached, logits.iter().map(|v| v.to_bits()).collect())
}

fn start(model: &Arc<Model>, store: Option<Arc<TierStack>>) -> EngineHandle {
    let tok = Tokenizer::from_gguf(model.gguf()).expect("tokenizer");
    let cfg = EngineConfig {
        block_tokens: BLOCK,
        store: store.map(|s| s as _),
        ..EngineConfig::default()
    };
    EngineHandle::start(model.clone(), Arc::new(tok), cfg).expect("engine")
}

fn check(arch: &str) {
    let (_, quantized) = ARCHS
        .iter()
        .find(|(a, _)| *a == arch)
        .expect("architecture of the golden set");
    for stem in [format!("{arch}-f16"), quantized.to_string()] {
        check_file(arch, &stem);
    }
}

fn check_file(arch: &str, stem: &str) {
    let dir: PathBuf =
        std::env::temp_dir().join(format!("memoria-archs-{stem}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let model = Arc::new(load(arch, stem));
    let prompts = sequences(arch, stem);
    let open_store = || Arc::new(TierStack::open(&dir, StoreOptions::default()).expect("store"));
    let rt = shared::runtime();
    let stack = open_store();
    let e = start(&model, Some(stack.clone()));
    let alone: Vec<Run> = rt.block_on(async {
        let mut v = Vec::new();
        for (i, p) in prompts.iter().enumerate() {
            v.push(run_one(&e, &format!("alone-{i}"), p).await);
        }
        v
    });
    for (i, a) in alone.iter().enumerate() {
        assert_eq!(a.0.len(), GENERATE, "{stem} prompt {i}: generated");
        assert_eq!(a.1, 0, "{stem} prompt {i}: a fresh salt starts cold");
    }
    // Batched: every prompt at once under a fresh salt (no cache), in one engine's steps.
    let together: Vec<Run> = rt.block_on(async {
        let tasks: Vec<_> = prompts
            .iter()
            .cloned()
            .map(|p| {
                let e = e.clone();
                tokio::spawn(async move { run_one(&e, "together", &p).await })
            })
            .collect();
        let mut v = Vec::new();
        for t in tasks {
            v.push(t.await.expect("task"));
        }
        v
    });
    assert!(
        e.stats().snapshot().step_tokens_max >= prompts.len() as u64,
        "{stem}: the sessions shared steps"
    );
    // Cached: each prompt again under its first salt, its full blocks from the pool.
    let cached: Vec<Run> = rt.block_on(async {
        let mut v = Vec::new();
        for (i, p) in prompts.iter().enumerate() {
            v.push(run_one(&e, &format!("alone-{i}"), p).await);
        }
        v
    });
    for (i, ((a, b), c)) in alone.iter().zip(&together).zip(&cached).enumerate() {
        assert_eq!(a.0, b.0, "{stem} prompt {i}: batched tokens");
        assert!(a.2 == b.2, "{stem} prompt {i}: batched logits differ");
        let full = (prompts[i].len() - 1) / BLOCK * BLOCK;
        assert!(c.1 >= full, "{stem} prompt {i}: {} of {full} cached", c.1);
        assert_eq!(a.0, c.0, "{stem} prompt {i}: tokens from the cache");
        assert!(
            a.2 == c.2,
            "{stem} prompt {i}: logits from the cache differ"
        );
    }
    // Fork: both children of a prefilled session continue as the prompt alone did.
    let last = prompts.len() - 1;
    let saved: Vec<f32> = rt.block_on(async {
        let base = shared::open_salted(&e, NS, "fork").await;
        e.append(NS, base, prompts[last].clone())
            .await
            .expect("append");
        let child = e.fork(NS, base).await.expect("fork");
        let (ta, _) = tokens_of(&mut e.generate(NS, base, greedy()).expect("gen")).await;
        let (tb, _) = tokens_of(&mut e.generate(NS, child, greedy()).expect("gen")).await;
        assert_eq!(ta, alone[last].0, "{stem}: forked parent");
        assert_eq!(tb, alone[last].0, "{stem}: forked child");
        let s = shared::open_salted(&e, NS, "saved").await;
        e.append(NS, s, prompts[last].clone())
            .await
            .expect("append");
        let l = e.prefill(NS, s).await.expect("prefill");
        e.save(NS, s, "arch-session").await.expect("save");
        l
    });
    e.shutdown();
    drop(stack);
    // Restart on the same store: the restored session gives the same logits.
    let stack = open_store();
    let e = start(&model, Some(stack.clone()));
    rt.block_on(async {
        shared::register(&e, NS, "saved");
        let r = e.restore(NS, "arch-session").await.expect("restore");
        assert_eq!(e.tokens(NS, r).await.expect("tokens"), prompts[last]);
        let l = e.prefill(NS, r).await.expect("prefill");
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&l), bits(&saved), "{stem}: restored logits");
    });
    assert!(
        stack.snapshot().redb.hits as usize >= (prompts[last].len() - 1) / BLOCK,
        "{stem}: the restored blocks came from disk"
    );
    e.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn llama_control_sessions_are_bit_identical() {
    check("llama");
}

#[test]
fn qwen3_sessions_are_bit_identical() {
    check("qwen3");
}

#[test]
fn qwen3moe_sessions_are_bit_identical() {
    check("qwen3moe");
}

#[test]
fn phi3_sessions_are_bit_identical() {
    check("phi3");
}

#[test]
fn gemma2_sessions_are_bit_identical() {
    check("gemma2");
}

#[test]
fn granite_sessions_are_bit_identical() {
    check("granite");
}

#[test]
fn smollm3_sessions_are_bit_identical() {
    check("smollm3");
}

#[test]
fn olmo2_sessions_are_bit_identical() {
    check("olmo2");
}

#[test]
fn gpt_oss_sessions_are_bit_identical() {
    check("gpt-oss");
}
