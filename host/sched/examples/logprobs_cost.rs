//! Cost per token of the sampling step's extras on a vocabulary of `n_vocab` ids (default
//! 49152, SmolLM2's): sampling alone, with 8 logit biases, and with log-probs and 20
//! alternatives. Usage: `cargo run --release -p memoria-sched --example logprobs_cost [N_VOCAB [REPS]]`.

use std::time::Instant;

use memoria_sched::sampling::{Sampler, SamplingParams, Xoshiro256, logprobs};

fn main() {
    let mut args = std::env::args().skip(1);
    let n_vocab: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(49152)
        .max(1);
    let reps: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(2000)
        .max(1);
    let mut rng = Xoshiro256::seed_from_u64(1);
    let logits: Vec<f32> = (0..n_vocab)
        .map(|_| (rng.next_f64() * 20.0 - 10.0) as f32)
        .collect();
    let base = SamplingParams::default();
    let variants = [
        ("sample", base.clone()),
        (
            "sample + 8 biases",
            SamplingParams {
                logit_bias: (0..8).map(|i| (i * 97, -5.0)).collect(),
                ..base.clone()
            },
        ),
        (
            "sample + logprobs(20)",
            SamplingParams {
                logprobs: Some(20),
                ..base.clone()
            },
        ),
    ];
    for round in 0..3 {
        for k in [0, 20] {
            let mut sink = 0.0f32;
            let t = Instant::now();
            for i in 0..reps {
                if let Some(lp) = logprobs(&logits, (i % n_vocab) as u32, k) {
                    sink += lp.sampled.logprob;
                }
            }
            let us = t.elapsed().as_secs_f64() * 1e6 / reps as f64;
            println!(
                "round {round} logprobs alone, k = {k:2}   {us:8.1} µs/token (sink {sink:.1})"
            );
        }
        for (name, p) in &variants {
            let mut s = Sampler::new(p.clone(), n_vocab);
            let mut sink = 0.0f32;
            let t = Instant::now();
            for _ in 0..reps {
                let tok = s.sample(&logits);
                if let Some(lp) = s.logprobs(&logits, tok) {
                    sink += lp.sampled.logprob;
                }
            }
            let us = t.elapsed().as_secs_f64() * 1e6 / reps as f64;
            println!(
                "round {round} {name:24} {us:8.1} µs/token (n_vocab {n_vocab}, sink {sink:.1})"
            );
        }
    }
}
