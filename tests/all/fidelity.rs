//! Fidelity on real trained models, measured as llama.cpp measures itself (its "same top p"):
//! teacher forcing of `golden/real/*-forced.json`. Each `sequence` runs in one batch with an
//! F16 K/V cache, as llama.cpp ran it; at every position from the last prompt token on,
//! memoria's top-1 is compared with the file's, and memoria's log-softmax of the file's top-1
//! with the file's value. The figures are printed so they can be quoted.

use memoria_model::llama::{BatchToken, KvDtype, Model, Scratch};
use serde_json::Value;

use crate::shared;

/// Agreement figures over every scored position of a file.
struct Figures {
    positions: usize,
    top1_agree: usize,
    sum_abs_diff: f64,
    max_abs_diff: f64,
}

impl Figures {
    fn agreement(&self) -> f64 {
        self.top1_agree as f64 / self.positions as f64
    }
    fn mean_abs_diff(&self) -> f64 {
        self.sum_abs_diff / self.positions as f64
    }
}

/// log-softmax of one row of logits, in f64.
fn log_softmax(logits: &[f32]) -> Vec<f64> {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let sum: f64 = logits.iter().map(|&l| (l as f64 - max).exp()).sum();
    let log_sum = sum.ln();
    logits.iter().map(|&l| l as f64 - max - log_sum).collect()
}

fn ids(v: &Value, key: &str) -> Vec<u32> {
    serde_json::from_value(v[key].clone()).unwrap_or_else(|e| panic!("`{key}`: {e}"))
}

/// Teacher-forces every case of `golden` through `model` and compares with its top-1s.
fn teacher_force(model: &Model, golden: &Value, label: &str) -> Figures {
    let n_vocab = model.hparams().n_vocab;
    if let Some(n) = golden["n_vocab"].as_u64() {
        assert_eq!(n as usize, n_vocab, "{label}: vocabulary size");
    }
    let mut f = Figures {
        positions: 0,
        top1_agree: 0,
        sum_abs_diff: 0.0,
        max_abs_diff: 0.0,
    };
    let cases = golden["forced"].as_array().expect("forced[]");
    assert!(!cases.is_empty(), "{label}: no cases");
    for case in cases {
        let (prompt, seq) = (ids(case, "prompt_ids"), ids(case, "sequence"));
        let top5 = case["top5_logprobs"].as_array().expect("top5_logprobs");
        assert!(!prompt.is_empty() && seq.starts_with(&prompt) && top5.len() == seq.len());
        let first = prompt.len() - 1;
        let batch: Vec<BatchToken> = seq
            .iter()
            .enumerate()
            .map(|(pos, &token)| BatchToken {
                token,
                pos,
                seq: 0,
                logits: pos >= first,
            })
            .collect();
        let mut kv = model.new_contiguous_kv(KvDtype::F16, 1, seq.len());
        let mut scratch = Scratch::default();
        let logits = model
            .forward(&batch, &mut kv, &mut scratch)
            .expect("forward");
        let mut agree = 0;
        for (row, pos) in (first..seq.len()).enumerate() {
            let lp = log_softmax(&logits[row * n_vocab..(row + 1) * n_vocab]);
            let best = lp
                .iter()
                .enumerate()
                .fold(0, |b, (i, &v)| if v > lp[b] { i } else { b });
            let want = top5[pos][0].as_array().expect("[id, logprob]");
            let (want_id, want_lp) = (
                want[0].as_u64().expect("id") as usize,
                want[1].as_f64().expect("logprob"),
            );
            let diff = (lp[want_id] - want_lp).abs();
            agree += usize::from(best == want_id);
            if best != want_id {
                // How close the reference itself was to a tie at this position.
                let runner_up = top5[pos][1][1].as_f64().unwrap_or(f64::NAN);
                eprintln!(
                    "{label}: position {pos}: memoria {best}, reference {want_id} \
                     (reference margin over its second {:.4}; memoria's margin {:.4})",
                    want_lp - runner_up,
                    lp[best] - lp[want_id]
                );
            }
            f.sum_abs_diff += diff;
            f.max_abs_diff = f.max_abs_diff.max(diff);
            f.positions += 1;
        }
        f.top1_agree += agree;
        eprintln!(
            "{label}: {:?}: top-1 {agree}/{}",
            case["prompt"].as_str().unwrap_or("?"),
            seq.len() - first
        );
    }
    eprintln!(
        "{label}: top-1 agreement {}/{} = {:.2}%, mean |Δ logprob of reference top-1| {:.4}, max {:.4}",
        f.top1_agree,
        f.positions,
        100.0 * f.agreement(),
        f.mean_abs_diff(),
        f.max_abs_diff
    );
    f
}

fn smollm2() -> Model {
    Model::load(shared::path("models/SmolLM2-135M-Instruct.Q4_1.gguf")).expect("SmolLM2 loads")
}

fn gemma3() -> Model {
    Model::load(shared::real_model("gemma-3-270m-q4_k_m.gguf")).expect("Gemma 3 loads")
}

/// Teacher forcing on a llama.cpp golden file: top-1 agreement ≥ 97%, mean |Δ logprob| ≤ 0.05.
fn assert_agrees_with_llama_cpp(model: &Model, golden: &str, label: &str) {
    let f = teacher_force(model, &shared::json(golden), label);
    assert!(
        f.agreement() >= 0.97,
        "top-1 agreement {:.4}",
        f.agreement()
    );
    assert!(
        f.mean_abs_diff() <= 0.05,
        "mean |Δ| {:.4}",
        f.mean_abs_diff()
    );
}

#[test]
fn smollm2_teacher_forcing_agrees_with_llama_cpp() {
    assert_agrees_with_llama_cpp(
        &smollm2(),
        "golden/real/smollm2-forced.json",
        "smollm2 vs llama.cpp",
    );
}

/// llama.cpp's own top-1 agrees with the float64 reference on 96.7% of these positions.
#[test]
fn smollm2_teacher_forcing_agrees_with_exact_maths_at_least_as_llama_cpp() {
    let f = teacher_force(
        &smollm2(),
        &shared::json("golden/real/smollm2-forced-f64ref.json"),
        "smollm2 vs float64 reference",
    );
    assert!(
        f.agreement() >= 0.967,
        "top-1 agreement {:.4}",
        f.agreement()
    );
}

#[test]
fn gemma3_teacher_forcing_agrees_with_llama_cpp() {
    assert_agrees_with_llama_cpp(
        &gemma3(),
        "golden/real/gemma3-forced.json",
        "gemma3 vs llama.cpp",
    );
}
