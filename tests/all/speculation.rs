//! Speculative decoding end to end in the engine: drafts from a session's own context and from
//! its isolation group's memory are verified in the normal step, so the tokens (greedy and
//! sampled, alone and in a batch beside sessions that do not draft) are exactly those of plain
//! decoding, while drafts are made and accepted; and one isolated namespace's text never
//! becomes another's draft, from its group's memory or from its cached blocks.

use std::sync::Arc;

use memoria_kv::NamespaceId;
use memoria_kv::draft::ROW_COST;
use memoria_model::llama::Model;
use memoria_model::tokenizer::Tokenizer;
use memoria_sched::sampling::SamplingParams;
use memoria_sched::{EngineConfig, EngineHandle, Event, GenerateParams, Speculate, Usage};

use crate::shared;

fn start(model: &std::path::Path) -> EngineHandle {
    start_with(model, EngineConfig::default())
}

/// An engine whose draft lengths do not depend on timing (a fixed row cost), so two runs of
/// the same text draft the same tokens however busy the machine is.
fn start_with(model: &std::path::Path, cfg: EngineConfig) -> EngineHandle {
    let model = Model::load(model).expect("model");
    let tok = Tokenizer::from_gguf(model.gguf()).expect("tokenizer");
    let cfg = EngineConfig {
        draft_row_cost: Some(ROW_COST),
        ..cfg
    };
    let e = EngineHandle::start(Arc::new(model), Arc::new(tok), cfg).expect("engine");
    assert_eq!(e.stats().speculation.row_cost(), ROW_COST);
    e
}

/// `max_tokens` of greedy decoding, or of sampling at `temperature` with a fixed seed.
fn params(max_tokens: usize, temperature: f32, speculation: Speculate) -> GenerateParams {
    let sampling = if temperature > 0.0 {
        SamplingParams {
            temperature,
            seed: 42,
            ..SamplingParams::default()
        }
    } else {
        SamplingParams::greedy()
    };
    GenerateParams {
        sampling,
        close_when_done: true,
        speculation,
        ..GenerateParams::greedy(max_tokens)
    }
}

async fn generate(
    e: &EngineHandle,
    ns: NamespaceId,
    prompt: &[u32],
    p: GenerateParams,
) -> (Vec<u32>, String, Usage) {
    let id = e.open(ns).await.expect("open");
    e.append(ns, id, prompt.to_vec()).await.expect("append");
    let mut stream = e.generate(ns, id, p).expect("generate");
    let (mut tokens, mut text) = (Vec::new(), String::new());
    while let Some(ev) = stream.next().await {
        match ev {
            Event::Token { id, text: t, .. } => {
                tokens.push(id);
                text.push_str(&t);
            }
            Event::Done {
                text_tail, usage, ..
            } => {
                text.push_str(&text_tail);
                return (tokens, text, usage);
            }
            Event::Error(e) => panic!("generation failed: {e}"),
        }
    }
    panic!("stream ended without Done");
}

/// Prompts that invite copying (a repeated story, a passage to repeat) and one that does not.
fn prompts(tok: &Tokenizer) -> Vec<Vec<u32>> {
    let story = "Lily had a red ball. She liked to play with the ball in the park. \
                 One day the ball rolled away and Lily ran after it. ";
    [
        story.repeat(3),
        format!("Repeat the text exactly.\nText: {story}\nRepeated: {story}"),
        "Once upon a time there was a little dog named".to_string(),
    ]
    .iter()
    .map(|t| tok.encode(t, true, true))
    .collect()
}

/// The tiny story model, SmolLM2 and Gemma 3.
fn models() -> Vec<std::path::PathBuf> {
    vec![
        shared::path("models/stories260K-f32.gguf"),
        shared::path("models/SmolLM2-135M-Instruct.Q4_1.gguf"),
        shared::real_model("gemma-3-270m-q4_k_m.gguf"),
    ]
}

fn stories() -> std::path::PathBuf {
    shared::path("models/stories260K-f32.gguf")
}

#[test]
fn drafted_tokens_are_exactly_plain_decoding_greedy_and_sampled() {
    for path in models() {
        let model = path.display();
        let e = start(&path);
        let tok = e.tokenizer().clone();
        shared::register(&e, NamespaceId(1), "spec-on");
        shared::register(&e, NamespaceId(2), "spec-off");
        let (mut drafted, mut accepted) = (0, 0);
        shared::runtime().block_on(async {
            for prompt in prompts(&tok) {
                for temperature in [0.0, 0.7] {
                    let off = params(48, temperature, Speculate::OFF);
                    let on = params(48, temperature, Speculate::AUTO);
                    let plain = generate(&e, NamespaceId(2), &prompt, off).await;
                    // Twice: the second run also drafts from the group's memory of the first.
                    for _ in 0..2 {
                        let fast = generate(&e, NamespaceId(1), &prompt, on.clone()).await;
                        assert_eq!(fast.0, plain.0, "{model} at temperature {temperature}");
                        assert_eq!(fast.1, plain.1);
                        assert_eq!(fast.2.completion_tokens, plain.2.completion_tokens);
                        assert!(fast.2.draft_accepted <= fast.2.drafted);
                        drafted += fast.2.drafted;
                        accepted += fast.2.draft_accepted;
                    }
                    assert_eq!(plain.2.drafted, 0, "speculation off drafts nothing");
                }
            }
        });
        assert!(
            drafted > 0 && accepted > 0,
            "{model}: {accepted} of {drafted} drafts accepted"
        );
        let stats = e.stats().speculation.snapshot();
        let (_, on) = stats
            .iter()
            .find(|(ns, _)| *ns == NamespaceId(1))
            .expect("the drafting namespace's figures");
        assert_eq!(on.drafted as usize, drafted);
        assert_eq!(on.accepted as usize, accepted);
        assert!(on.tokens_per_pass() > 1.0, "{on:?}");
        assert!(stats.iter().all(|(ns, _)| *ns != NamespaceId(2)));
    }
}

#[test]
fn a_batch_of_drafting_and_plain_sessions_gives_each_its_solo_tokens() {
    let e = start(&stories());
    let tok = e.tokenizer().clone();
    shared::register(&e, NamespaceId(1), "batch");
    let prompts = prompts(&tok);
    shared::runtime().block_on(async {
        let mut solo = Vec::new();
        for p in &prompts {
            solo.push(generate(&e, NamespaceId(1), p, params(40, 0.0, Speculate::OFF)).await);
        }
        // Six at once, every prompt both drafting and not.
        let runs = prompts.iter().enumerate().flat_map(|(i, p)| {
            [Speculate::AUTO, Speculate::OFF]
                .into_iter()
                .map(move |s| (i, p, s))
        });
        let futures: Vec<_> = runs
            .map(|(i, p, s)| {
                let e = e.clone();
                let p = p.clone();
                tokio::spawn(async move {
                    (
                        i,
                        generate(&e, NamespaceId(1), &p, params(40, 0.0, s)).await,
                    )
                })
            })
            .collect();
        for f in futures {
            let (i, out) = f.await.expect("task");
            assert_eq!(out.0, solo[i].0, "prompt {i} in a batch");
        }
    });
}

#[test]
fn one_isolated_namespace_text_never_becomes_another_draft() {
    canary_drafts_only_for_its_own_group(start(&stories()));
}

/// The same with no group memory: what A's next session drafts comes from A's blocks cached in
/// the pool, and B's and a fresh namespace's sessions never see them.
#[test]
fn cached_blocks_draft_for_their_own_group_only() {
    let cfg = EngineConfig {
        draft_memory_tokens: 0,
        ..EngineConfig::default()
    };
    let e = start_with(&stories(), cfg);
    canary_drafts_only_for_its_own_group(e);
}

fn canary_drafts_only_for_its_own_group(e: EngineHandle) {
    // The canary: what tenant A's session writes after a prompt of token ids with no repeats
    // (nothing in the prompt predicts it).
    let prompt: Vec<u32> = (0..24).map(|i| 3 + (i * 37) % 500).collect();
    let (a, b, fresh) = (NamespaceId(1), NamespaceId(2), NamespaceId(3));
    shared::register(&e, a, "tenant-a");
    shared::register(&e, b, "tenant-b");
    shared::register(&e, fresh, "tenant-fresh");
    shared::runtime().block_on(async {
        let run = |ns| generate(&e, ns, &prompt, params(32, 0.0, Speculate::AUTO));
        let canary = run(a).await;
        let from_a = run(a).await;
        let from_b = run(b).await;
        let from_fresh = run(fresh).await;
        assert_eq!(from_a.0, canary.0, "the tokens are the model's either way");
        assert_eq!(from_b.0, canary.0);
        // Tenant B drafts exactly what a namespace that saw nothing drafts (its own context);
        // A's next session drafts the canary from A's memory, and it is accepted.
        assert_eq!(from_b.2.drafted, from_fresh.2.drafted, "B drafted A's text");
        assert_eq!(from_b.2.draft_accepted, from_fresh.2.draft_accepted);
        assert!(
            from_a.2.draft_accepted > from_fresh.2.draft_accepted + 8,
            "A's memory drafts for A: {:?} vs {:?}",
            from_a.2,
            from_fresh.2
        );
    });
}
