//! Gemma 3 270M (the real file) through the engine, as `sessions.rs` does for llama: greedy
//! tokens and final logits bit-identical alone and batched among others, from a cached prefix
//! longer than the sliding window, after a fork, and after a save, a restart and a restore
//! through the store tiers. Paged blocks and prefix sharing carry Gemma's 256-wide K/V rows and
//! its windowed layers exactly as llama's.

use std::sync::Arc;

use memoria_kv::NamespaceId;
use memoria_model::llama::Model;
use memoria_model::tokenizer::Tokenizer;
use memoria_sched::{EngineConfig, EngineHandle, Event, GenerateParams, GenerationStream};
use memoria_store::{StoreOptions, TierStack};

use crate::shared;

const NS: NamespaceId = NamespaceId(3);

fn model() -> Arc<Model> {
    Arc::new(Model::load(shared::real_model("gemma-3-270m-q4_k_m.gguf")).expect("Gemma 3 loads"))
}

fn start(model: &Arc<Model>, cfg: EngineConfig) -> EngineHandle {
    let tok = Tokenizer::from_gguf(model.gguf()).expect("tokenizer");
    EngineHandle::start(model.clone(), Arc::new(tok), cfg).expect("engine")
}

/// The token ids of the teacher-forcing sequences (BOS first), so no tokenizer is involved.
fn sequences() -> Vec<Vec<u32>> {
    shared::json("golden/real/gemma3-forced.json")["forced"]
        .as_array()
        .expect("forced[]")
        .iter()
        .map(|c| serde_json::from_value(c["sequence"].clone()).expect("sequence"))
        .collect()
}

fn greedy(n: usize) -> GenerateParams {
    GenerateParams {
        close_when_done: false,
        ..GenerateParams::greedy(n)
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

/// Opens a session on `prompt`, generates `n` greedy tokens: (tokens, cached tokens, final
/// logits).
async fn run_one(
    e: &EngineHandle,
    s: &str,
    prompt: &[u32],
    n: usize,
) -> (Vec<u32>, usize, Vec<f32>) {
    let id = shared::open_salted(e, NS, s).await;
    e.append(NS, id, prompt.to_vec()).await.expect("append");
    let (tokens, cached) = tokens_of(&mut e.generate(NS, id, greedy(n)).expect("generate")).await;
    let logits = e.logits(NS, id).await.expect("logits").expect("last");
    e.close(NS, id).await.expect("close");
    (tokens, cached, logits)
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn gemma3_sessions_batched_among_others_match_running_alone_bit_for_bit() {
    let model = model();
    let e = start(&model, EngineConfig::default());
    let prompts: Vec<Vec<u32>> = sequences()
        .iter()
        .enumerate()
        .map(|(i, s)| s[..12 + 3 * i].to_vec())
        .collect();
    let rt = shared::runtime();
    let alone: Vec<_> = rt.block_on(async {
        let mut v = Vec::new();
        for (i, p) in prompts.iter().enumerate() {
            v.push(run_one(&e, &format!("alone-{i}"), p, 12).await);
        }
        v
    });
    let together: Vec<_> = rt.block_on(async {
        let tasks: Vec<_> = prompts
            .iter()
            .cloned()
            .map(|p| {
                let e = e.clone();
                tokio::spawn(async move { run_one(&e, "together", &p, 12).await })
            })
            .collect();
        let mut v = Vec::new();
        for t in tasks {
            v.push(t.await.expect("task"));
        }
        v
    });
    for (i, (a, b)) in alone.iter().zip(&together).enumerate() {
        assert_eq!(a.0.len(), 12, "session {i} generated 12 tokens");
        assert_eq!(a.0, b.0, "session {i} tokens");
        assert!(bits(&a.2) == bits(&b.2), "session {i} final logits differ");
    }
    let s = e.stats().snapshot();
    assert!(
        s.step_tokens_max >= prompts.len() as u64,
        "sessions were batched together (max step {})",
        s.step_tokens_max
    );
    e.shutdown();
}

/// A prompt longer than the 512-token window: the windowed layers read a cached prefix of
/// paged blocks exactly as they read a fresh one, and a fork continues identically.
#[test]
fn gemma3_cached_prefix_past_the_window_and_fork_change_nothing() {
    let model = model();
    let window = model.hparams().swa.as_ref().expect("sliding window").window;
    let prompt: Vec<u32> = sequences().concat().into_iter().chain(300..340).collect();
    assert!(prompt.len() > window + 16, "{} tokens", prompt.len());
    let e = start(
        &model,
        EngineConfig {
            step_tokens: 256,
            ..EngineConfig::default()
        },
    );
    shared::runtime().block_on(async {
        let (first, cached, first_logits) = run_one(&e, "p", &prompt, 8).await;
        assert_eq!(cached, 0);
        let (second, cached, second_logits) = run_one(&e, "p", &prompt, 8).await;
        assert!(
            cached >= prompt.len() - 16,
            "hit {cached} of {}",
            prompt.len()
        );
        assert_eq!(first, second);
        assert!(
            bits(&first_logits) == bits(&second_logits),
            "logits from cache differ"
        );

        let base = shared::open_salted(&e, NS, "fork").await;
        e.append(NS, base, prompt.clone()).await.expect("append");
        let child = e.fork(NS, base).await.expect("fork");
        let mut a = e.generate(NS, base, greedy(8)).expect("gen");
        let mut b = e.generate(NS, child, greedy(8)).expect("gen");
        let ((ta, _), (tb, _)) = (tokens_of(&mut a).await, tokens_of(&mut b).await);
        assert_eq!(ta, first);
        assert_eq!(tb, first);
        let child2 = e.fork(NS, base).await.expect("fork");
        let la = e.logits(NS, base).await.expect("logits");
        let lb = e.logits(NS, child2).await.expect("logits");
        assert!(la.is_some() && la == lb);
    });
    e.shutdown();
}

/// Save, restart engine and store, restore: the restored session's logits are bit-identical,
/// its blocks served from disk.
#[test]
fn gemma3_save_restart_restore_through_the_store_is_bit_identical() {
    let dir = std::env::temp_dir().join(format!("memoria-gemma3-store-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let model = model();
    let tokens: Vec<u32> = sequences()[..2].concat();
    let with_store = || {
        let stack = Arc::new(TierStack::open(&dir, StoreOptions::default()).expect("store"));
        let cfg = EngineConfig {
            store: Some(stack.clone()),
            ..EngineConfig::default()
        };
        (start(&model, cfg), stack)
    };
    let rt = shared::runtime();
    let original = {
        let (e, _) = with_store();
        let l = rt.block_on(async {
            let s = shared::open_salted(&e, NS, "t").await;
            e.append(NS, s, tokens.clone()).await.expect("append");
            let l = e.prefill(NS, s).await.expect("prefill");
            e.save(NS, s, "gemma-chat").await.expect("save");
            l
        });
        e.shutdown();
        l
    };
    let (e, stack) = with_store();
    rt.block_on(async {
        shared::register(&e, NS, "t");
        let r = e.restore(NS, "gemma-chat").await.expect("restore");
        assert_eq!(e.tokens(NS, r).await.expect("tokens"), tokens);
        let l = e.prefill(NS, r).await.expect("prefill");
        assert_eq!(bits(&l), bits(&original));
    });
    let full_blocks = (tokens.len() - 1) / 16;
    assert_eq!(
        stack.snapshot().redb.hits as usize,
        full_blocks,
        "every full block came from disk"
    );
    e.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}
