//! The engine against llama.cpp's own outputs on stories260K (../shared/golden): greedy tokens
//! exactly, logits within the tolerances golden/README.md explains.

use std::sync::Arc;

use memoria_kv::NamespaceId;
use memoria_model::llama::{BatchToken, KvDtype, Model, Scratch};
use memoria_model::tokenizer::Tokenizer;
use memoria_sched::{EngineConfig, EngineHandle, Event, GenerateParams};
use serde_json::Value;

use crate::shared;

fn load(file: &str) -> (Model, Tokenizer) {
    let model = Model::load(shared::path(&format!("models/{file}"))).expect("model loads");
    let tok = Tokenizer::from_gguf(model.gguf()).expect("tokenizer loads");
    (model, tok)
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .expect("id array")
        .iter()
        .map(|x| x.as_u64().expect("id") as u32)
        .collect()
}

fn floats(v: &Value) -> Vec<f32> {
    v.as_array()
        .expect("float array")
        .iter()
        .map(|x| x.as_f64().expect("float") as f32)
        .collect()
}

const NS: NamespaceId = NamespaceId(1);

/// Greedy generation through the engine: `max_tokens` tokens after `prompt` (fewer if an
/// end-of-generation token comes first), computed from scratch in a namespace of its own
/// (`label`), and the text they stream.
async fn engine_greedy(
    e: &EngineHandle,
    label: &str,
    prompt: Vec<u32>,
    max_tokens: usize,
) -> (Vec<u32>, String) {
    let id = shared::open_salted(e, NS, label).await;
    e.append(NS, id, prompt).await.expect("append");
    let mut params = GenerateParams::greedy(max_tokens);
    params.close_when_done = true;
    let mut stream = e.generate(NS, id, params).expect("generate");
    let (mut tokens, mut text) = (Vec::new(), String::new());
    while let Some(ev) = stream.next().await {
        match ev {
            Event::Token { id, text: t, .. } => {
                tokens.push(id);
                text.push_str(&t);
            }
            Event::Done { text_tail, .. } => {
                text.push_str(&text_tail);
                return (tokens, text);
            }
            Event::Error(err) => panic!("generation failed: {err}"),
        }
    }
    panic!("the stream ended without Done");
}

fn check_greedy(golden: &str, model_file: &str) {
    let (model, tok) = load(model_file);
    let tok = Arc::new(tok);
    let cfg = EngineConfig {
        kv_elem: memoria_kv::KvElem::F16,
        ..EngineConfig::default()
    };
    let e = EngineHandle::start(Arc::new(model), tok.clone(), cfg).expect("engine");
    let rt = shared::runtime();
    let g = shared::json(golden);
    let results = g["greedy"]["results"].as_array().expect("results");
    assert!(!results.is_empty());
    for (i, r) in results.iter().enumerate() {
        let prompt = r["prompt"].as_str().expect("prompt");
        let prompt_ids = tok.encode(prompt, true, true);
        assert_eq!(
            prompt_ids,
            ids(&r["prompt_ids"]),
            "prompt ids of {prompt:?}"
        );
        let want = ids(&r["generated_ids"]);
        let (tokens, text) = rt.block_on(engine_greedy(
            &e,
            &format!("golden-{i}"),
            prompt_ids,
            want.len(),
        ));
        assert_eq!(tokens, want, "greedy tokens of {prompt:?} ({model_file})");
        assert_eq!(
            text,
            r["generated_text"].as_str().expect("text"),
            "text of {prompt:?}"
        );
    }
    e.shutdown();
}

#[test]
fn greedy_f32_matches_llama_cpp() {
    check_greedy("golden/greedy-f32.json", "stories260K-f32.gguf");
}

#[test]
fn greedy_f16_matches_llama_cpp() {
    check_greedy("golden/greedy-f16.json", "stories260K-f16.gguf");
}

/// Logits of every prompt position, one forward pass over the whole prompt.
fn all_logits(model: &Model, prompt: &[u32], dtype: KvDtype) -> Vec<f32> {
    let mut kv = model.new_contiguous_kv(dtype, 1, prompt.len());
    let batch: Vec<BatchToken> = prompt
        .iter()
        .enumerate()
        .map(|(pos, &token)| BatchToken {
            token,
            pos,
            seq: 0,
            logits: true,
        })
        .collect();
    model
        .forward(&batch, &mut kv, &mut Scratch::default())
        .expect("forward")
        .to_vec()
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// Returns the largest error seen over `logits_last` and every row of `logits_all`.
fn check_logits(golden: &str, dtype: KvDtype, tolerance: f32) -> f32 {
    let (model, tok) = load("stories260K-f32.gguf");
    let g = shared::json(golden);
    let n_vocab = g["n_vocab"].as_u64().expect("n_vocab") as usize;
    let mut worst = 0.0f32;
    for case in g["logits"].as_array().expect("logits") {
        let prompt = case["prompt"].as_str().expect("prompt");
        let prompt_ids = tok.encode(prompt, true, true);
        assert_eq!(
            prompt_ids,
            ids(&case["prompt_ids"]),
            "prompt ids of {prompt:?}"
        );
        let ours = all_logits(&model, &prompt_ids, dtype);
        let last = &ours[(prompt_ids.len() - 1) * n_vocab..];
        let err = max_abs_diff(last, &floats(&case["logits_last"]));
        assert!(
            err < tolerance,
            "{golden} {prompt:?}: logits_last max |err| {err} ≥ {tolerance}"
        );
        let argmax = last
            .iter()
            .enumerate()
            .fold((0, f32::MIN), |b, (i, &v)| if v > b.1 { (i, v) } else { b })
            .0;
        assert_eq!(argmax as u64, case["argmax_last"].as_u64().expect("argmax"));
        worst = worst.max(err);
        for (i, row) in case["logits_all"]
            .as_array()
            .expect("rows")
            .iter()
            .enumerate()
        {
            let err = max_abs_diff(&ours[i * n_vocab..(i + 1) * n_vocab], &floats(row));
            assert!(
                err < tolerance,
                "{golden} {prompt:?} row {i}: max |err| {err} ≥ {tolerance}"
            );
            worst = worst.max(err);
        }
    }
    worst
}

#[test]
fn logits_with_f32_cache_match_llama_cpp_within_1e_4() {
    let worst = check_logits("golden/logits-f32-kvcache-f32.json", KvDtype::F32, 1e-4);
    eprintln!("f32 cache: worst |err| {worst:e}");
}

#[test]
fn logits_with_f16_cache_match_llama_cpp_default() {
    // golden/README.md: llama.cpp's default f16 cache differs from exact maths by up to 1.3e-2;
    // storing K/V as f16 the way it does keeps us far closer than that.
    let worst = check_logits("golden/logits-f32.json", KvDtype::F16, 1e-3);
    eprintln!("f16 cache: worst |err| {worst:e}");
}
