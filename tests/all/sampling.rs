//! Integration tests: sampling. The public API of memoria-sched's sampler and stop matcher driven
//! the way a generation loop drives them.

use memoria_sched::sampling::{Sampler, SamplingParams};
use memoria_sched::stop::{StopMatcher, StopOutput};

/// A toy "model": token `t` prefers `t + 1` (mod the vocabulary), with a flat tail.
fn next_logits(last: u32, n_vocab: usize) -> Vec<f32> {
    (0..n_vocab as u32)
        .map(|t| {
            if t == (last + 1) % n_vocab as u32 {
                5.0
            } else {
                0.0
            }
        })
        .collect()
}

fn generate(params: SamplingParams, prompt: &[u32], n: usize, n_vocab: usize) -> Vec<u32> {
    params.validate().unwrap();
    let mut sampler = Sampler::new(params, n_vocab);
    for &t in prompt {
        sampler.accept(t);
    }
    let mut last = *prompt.last().unwrap();
    let mut out = Vec::new();
    for _ in 0..n {
        let t = sampler.sample(&next_logits(last, n_vocab));
        assert!((t as usize) < n_vocab);
        sampler.accept(t);
        out.push(t);
        last = t;
    }
    out
}

#[test]
fn greedy_generation_follows_the_argmax() {
    assert_eq!(
        generate(SamplingParams::greedy(), &[0], 6, 4),
        [1, 2, 3, 0, 1, 2]
    );
}

#[test]
fn seeded_generation_is_reproducible() {
    let params = SamplingParams {
        temperature: 1.5,
        top_k: 0,
        top_p: 1.0,
        min_p: 0.0,
        seed: 1234,
        ..SamplingParams::default()
    };
    let a = generate(params.clone(), &[3, 1], 64, 8);
    assert_eq!(a, generate(params.clone(), &[3, 1], 64, 8));
    assert_ne!(
        a,
        generate(
            SamplingParams {
                seed: 4321,
                ..params
            },
            &[3, 1],
            64,
            8
        )
    );
}

#[test]
fn default_params_are_valid_and_llama_cpp_like() {
    let p = SamplingParams::default();
    p.validate().unwrap();
    assert_eq!(
        (p.temperature, p.top_k, p.top_p, p.min_p),
        (0.8, 40, 0.95, 0.05)
    );
    assert_eq!((p.repeat_penalty, p.repeat_last_n), (1.0, 64));
    let err = SamplingParams { top_p: -0.5, ..p }.validate().unwrap_err();
    assert_eq!(err.field, "top_p");
}

#[test]
fn a_strong_presence_penalty_stops_greedy_loops() {
    // Every row prefers token 0; penalising seen tokens walks through the vocabulary instead.
    let params = SamplingParams {
        presence_penalty: 10.0,
        repeat_last_n: 4,
        ..SamplingParams::greedy()
    };
    let mut sampler = Sampler::new(params, 4);
    let logits = [3.0, 2.0, 1.0, 0.0];
    let mut out = Vec::new();
    for _ in 0..4 {
        let t = sampler.sample(&logits);
        sampler.accept(t);
        out.push(t);
    }
    assert_eq!(out, [0, 1, 2, 3]);
}

#[test]
fn a_generation_loop_stops_on_a_stop_string_split_over_tokens() {
    let pieces = [
        "Sure", ",", " 4", ".", "\n", "<|", "im", "_end", "|>", "never",
    ];
    let mut stop = StopMatcher::new(vec!["<|im_end|>".into(), "\n\nUser:".into()]);
    let mut sent = String::new();
    let mut stopped_at = None;
    for (i, piece) in pieces.iter().enumerate() {
        let StopOutput { emit, stopped } = stop.push(piece);
        sent.push_str(&emit);
        if stopped {
            stopped_at = Some(i);
            break;
        }
    }
    assert_eq!(stopped_at, Some(8));
    assert_eq!(sent, "Sure, 4.\n");
    assert_eq!(stop.finish(), "");
}

#[test]
fn finish_flushes_a_held_back_partial_stop() {
    let mut stop = StopMatcher::new(vec!["\n\nUser:".into()]);
    assert_eq!(stop.push("Done.\n\nUs").emit, "Done.");
    assert_eq!(stop.finish(), "\n\nUs");
}
