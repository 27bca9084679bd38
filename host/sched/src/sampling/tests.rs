//! Unit tests of the sampling chain: greedy, determinism, each filter, the penalties, validation,
//! and a proptest that sampling is total and never picks an impossible token.

use proptest::prelude::*;

use super::{Sampler, SamplingParams, Xoshiro256};

/// Plain softmax sampling at temperature 1: no filters, no penalties.
fn plain(seed: u64) -> SamplingParams {
    SamplingParams {
        temperature: 1.0,
        seed,
        ..SamplingParams::greedy()
    }
}

fn draws(params: SamplingParams, logits: &[f32], n: usize) -> Vec<u32> {
    let mut s = Sampler::new(params, logits.len());
    (0..n).map(|_| s.sample(logits)).collect()
}

/// Logits whose softmax is proportional to `weights`.
fn logits_for(weights: &[f32]) -> Vec<f32> {
    weights.iter().map(|w| w.ln()).collect()
}

fn pseudo_random_logits(seed: u64, n: usize) -> Vec<f32> {
    let mut rng = Xoshiro256::seed_from_u64(seed);
    (0..n)
        .map(|_| (rng.next_f64() * 20.0 - 10.0) as f32)
        .collect()
}

fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &l) in logits.iter().enumerate() {
        if l > logits[best] {
            best = i;
        }
    }
    best as u32
}

#[test]
fn xoshiro256_matches_the_reference_sequence() {
    // Reference outputs of xoshiro256** from the state [1, 2, 3, 4].
    let mut r = super::rng::Xoshiro256::from_state([1, 2, 3, 4]);
    assert_eq!(
        [r.next_u64(), r.next_u64(), r.next_u64(), r.next_u64()],
        [11520, 0, 1_509_978_240, 1_215_971_899_390_074_240]
    );
}

#[test]
fn greedy_is_argmax_with_ties_to_the_lowest_id() {
    let mut s = Sampler::new(SamplingParams::greedy(), 5);
    assert_eq!(s.sample(&[0.1, 3.0, -2.0, 3.0, 1.0]), 1);
    assert_eq!(
        s.sample(&[f32::NEG_INFINITY, f32::NAN, -1e30, -1e30, -5.0]),
        4
    );
    assert_eq!(s.sample(&[7.0; 5]), 0);
}

#[test]
fn same_seed_same_sequence_different_seeds_differ() {
    let logits = logits_for(&[1.0; 64]);
    let a = draws(plain(42), &logits, 200);
    let b = draws(plain(42), &logits, 200);
    let c = draws(plain(43), &logits, 200);
    assert_eq!(a, b);
    assert_ne!(a, c);
}

#[test]
fn seeded_draws_are_pinned_across_platforms() {
    // The RNG is fully specified (xoshiro256** + SplitMix64), so the sequence is too.
    let logits = logits_for(&[1.0; 10]);
    let first = draws(plain(7), &logits, 12);
    assert_eq!(first, draws(plain(7), &logits, 12));
    let mut rng = Xoshiro256::seed_from_u64(7);
    let expected: Vec<u32> = (0..12).map(|_| (rng.next_f64() * 10.0) as u32).collect();
    assert_eq!(first, expected);
    assert_eq!(first, [7, 2, 8, 9, 9, 8, 0, 1, 4, 1, 5, 7]);
}

#[test]
fn reset_replays_the_same_sequence() {
    let logits = logits_for(&[1.0, 2.0, 3.0, 4.0]);
    let mut s = Sampler::new(plain(5), 4);
    let a: Vec<u32> = (0..50).map(|_| s.sample(&logits)).collect();
    s.reset();
    let b: Vec<u32> = (0..50).map(|_| s.sample(&logits)).collect();
    assert_eq!(a, b);
}

#[test]
fn top_k_one_equals_greedy() {
    for seed in 0..50 {
        let logits = pseudo_random_logits(seed, 100);
        let params = SamplingParams {
            top_k: 1,
            top_p: 1.0,
            min_p: 0.0,
            temperature: 1.5,
            seed,
            ..SamplingParams::default()
        };
        assert_eq!(Sampler::new(params, 100).sample(&logits), argmax(&logits));
    }
}

#[test]
fn tiny_top_p_equals_greedy() {
    for seed in 0..50 {
        let logits = pseudo_random_logits(seed + 1000, 100);
        let params = SamplingParams {
            top_p: 1e-6,
            ..plain(seed)
        };
        assert_eq!(Sampler::new(params, 100).sample(&logits), argmax(&logits));
    }
}

#[test]
fn top_p_keeps_the_nucleus() {
    // Probabilities 0.5, 0.3, 0.15, 0.05: top_p = 0.75 keeps exactly {0, 1}.
    let logits = logits_for(&[0.5, 0.3, 0.15, 0.05]);
    let seen = draws(
        SamplingParams {
            top_p: 0.75,
            ..plain(3)
        },
        &logits,
        2000,
    );
    assert!(seen.iter().all(|&t| t < 2));
    assert!(seen.contains(&0) && seen.contains(&1));
}

#[test]
fn top_k_keeps_the_k_best() {
    let logits = logits_for(&[0.1, 0.4, 0.2, 0.3]);
    let seen = draws(
        SamplingParams {
            top_k: 2,
            ..plain(9)
        },
        &logits,
        2000,
    );
    assert!(seen.iter().all(|&t| t == 1 || t == 3));
    assert!(seen.contains(&1) && seen.contains(&3));
}

#[test]
fn min_p_filters_tokens_below_the_fraction_of_the_best() {
    // Relative probabilities 1, 0.5, 0.2, 0.1: min_p = 0.3 keeps {0, 1}.
    let logits = logits_for(&[1.0, 0.5, 0.2, 0.1]);
    let seen = draws(
        SamplingParams {
            min_p: 0.3,
            ..plain(11)
        },
        &logits,
        2000,
    );
    assert!(seen.iter().all(|&t| t < 2));
    assert!(seen.contains(&0) && seen.contains(&1));
    let seen = draws(
        SamplingParams {
            min_p: 0.15,
            ..plain(11)
        },
        &logits,
        4000,
    );
    assert!(seen.contains(&2) && !seen.contains(&3));
}

#[test]
fn draws_follow_the_softmax() {
    let logits = logits_for(&[0.7, 0.3]);
    let seen = draws(plain(1), &logits, 20_000);
    let zeros = seen.iter().filter(|&&t| t == 0).count() as f64 / seen.len() as f64;
    assert!((zeros - 0.7).abs() < 0.02, "{zeros}");
}

#[test]
fn temperature_towards_zero_approaches_greedy() {
    let logits = [1.0, 1.05, 0.9, 1.04];
    let seen = draws(
        SamplingParams {
            temperature: 1e-4,
            ..plain(2)
        },
        &logits,
        500,
    );
    assert!(seen.iter().all(|&t| t == 1));
    // A high temperature flattens the distribution: every token shows up.
    let seen = draws(
        SamplingParams {
            temperature: 5.0,
            ..plain(2)
        },
        &logits,
        500,
    );
    assert!((0..4).all(|t| seen.contains(&t)));
}

#[test]
fn repetition_penalty_lowers_a_repeated_token() {
    let params = SamplingParams {
        repeat_penalty: 1.5,
        repeat_last_n: 8,
        ..SamplingParams::greedy()
    };
    let mut s = Sampler::new(params, 3);
    assert_eq!(s.sample(&[2.0, 1.9, 0.0]), 0);
    s.accept(0);
    // 2.0 / 1.5 = 1.33 < 1.9.
    assert_eq!(s.sample(&[2.0, 1.9, 0.0]), 1);
    // Negative logits are multiplied: -1.0 * 1.5 = -1.5 < -1.2.
    assert_eq!(s.sample(&[-1.0, -1.2, -9.0]), 1);
}

#[test]
fn repetition_penalty_shifts_probability_mass() {
    let params = SamplingParams {
        repeat_penalty: 2.0,
        repeat_last_n: 4,
        ..plain(4)
    };
    let logits = [2.0, 2.0];
    let mut s = Sampler::new(params, 2);
    s.accept(0);
    let zeros = (0..2000).filter(|_| s.sample(&logits) == 0).count();
    // p(0) = e^1 / (e^1 + e^2) ≈ 0.27.
    assert!((400..700).contains(&zeros), "{zeros}");
}

#[test]
fn penalties_only_look_at_the_last_n_tokens() {
    let params = SamplingParams {
        repeat_penalty: 1.5,
        repeat_last_n: 2,
        ..SamplingParams::greedy()
    };
    let mut s = Sampler::new(params, 4);
    s.accept(0);
    assert_eq!(s.sample(&[2.0, 1.9, 0.0, 0.0]), 1);
    s.accept(2);
    s.accept(3); // token 0 leaves the window
    assert_eq!(s.sample(&[2.0, 1.9, 0.0, 0.0]), 0);
    s.accept(9); // out of the vocabulary: ignored
    assert_eq!(s.sample(&[2.0, 1.9, 0.0, 0.0]), 0);
}

#[test]
fn frequency_penalty_scales_with_the_count() {
    let params = SamplingParams {
        frequency_penalty: 0.3,
        repeat_last_n: 64,
        ..SamplingParams::greedy()
    };
    let mut s = Sampler::new(params, 2);
    s.accept(0);
    // 3.0 - 1 * 0.3 = 2.7 > 2.5.
    assert_eq!(s.sample(&[3.0, 2.5]), 0);
    s.accept(0);
    // 3.0 - 2 * 0.3 = 2.4 < 2.5.
    assert_eq!(s.sample(&[3.0, 2.5]), 1);
}

#[test]
fn presence_penalty_does_not_scale_with_the_count() {
    let params = SamplingParams {
        presence_penalty: 0.4,
        repeat_last_n: 64,
        ..SamplingParams::greedy()
    };
    let mut s = Sampler::new(params.clone(), 2);
    s.accept(0);
    // 3.0 - 0.4 = 2.6 > 2.5, however often 0 was seen.
    assert_eq!(s.sample(&[3.0, 2.5]), 0);
    for _ in 0..10 {
        s.accept(0);
    }
    assert_eq!(s.sample(&[3.0, 2.5]), 0);
    let params = SamplingParams {
        presence_penalty: 0.6,
        ..params
    };
    let mut s = Sampler::new(params, 2);
    s.accept(0);
    assert_eq!(s.sample(&[3.0, 2.5]), 1);
}

#[test]
fn validate_rejects_out_of_domain_values_naming_the_field() {
    assert!(SamplingParams::default().validate().is_ok());
    assert!(SamplingParams::greedy().validate().is_ok());
    assert!(
        SamplingParams {
            temperature: -1.0,
            ..Default::default()
        }
        .validate()
        .is_ok()
    );
    let cases = [
        (
            "temperature",
            SamplingParams {
                temperature: f32::NAN,
                ..Default::default()
            },
        ),
        (
            "temperature",
            SamplingParams {
                temperature: f32::INFINITY,
                ..Default::default()
            },
        ),
        (
            "top_p",
            SamplingParams {
                top_p: -0.1,
                ..Default::default()
            },
        ),
        (
            "top_p",
            SamplingParams {
                top_p: 1.5,
                ..Default::default()
            },
        ),
        (
            "min_p",
            SamplingParams {
                min_p: f32::NAN,
                ..Default::default()
            },
        ),
        (
            "repeat_penalty",
            SamplingParams {
                repeat_penalty: 0.0,
                ..Default::default()
            },
        ),
        (
            "repeat_penalty",
            SamplingParams {
                repeat_penalty: -1.0,
                ..Default::default()
            },
        ),
        (
            "frequency_penalty",
            SamplingParams {
                frequency_penalty: f32::NAN,
                ..Default::default()
            },
        ),
        (
            "presence_penalty",
            SamplingParams {
                presence_penalty: f32::NEG_INFINITY,
                ..Default::default()
            },
        ),
    ];
    for (field, params) in cases {
        let err = params.validate().unwrap_err();
        assert_eq!(err.field, field);
        assert!(err.to_string().contains(field), "{err}");
    }
}

#[test]
fn params_deserialize_with_defaults() {
    let params: SamplingParams =
        serde_json::from_str(r#"{"temperature": 0.2, "seed": 9}"#).unwrap();
    assert_eq!(
        params,
        SamplingParams {
            temperature: 0.2,
            seed: 9,
            ..SamplingParams::default()
        }
    );
}

#[test]
fn unvalidated_params_never_panic() {
    let params = SamplingParams {
        temperature: f32::NAN,
        top_p: f32::NAN,
        min_p: 7.0,
        repeat_penalty: 0.0,
        repeat_last_n: 3,
        frequency_penalty: f32::INFINITY,
        presence_penalty: f32::NAN,
        ..SamplingParams::default()
    };
    let mut s = Sampler::new(params, 3);
    s.accept(1);
    assert_eq!(s.sample(&[0.0, 1.0, 0.5]), 1);
    let mut s = Sampler::new(
        SamplingParams {
            temperature: f32::INFINITY,
            ..plain(1)
        },
        3,
    );
    assert!(s.sample(&[f32::NEG_INFINITY, 1.0, 0.5]) > 0);
    assert_eq!(Sampler::new(plain(1), 0).sample(&[1.0]), 0);
    assert_eq!(Sampler::new(plain(1), 4).sample(&[]), 0);
}

fn valid_params() -> impl Strategy<Value = SamplingParams> {
    (
        (
            -1.0f32..3.0,
            0usize..8,
            0.0f32..=1.0,
            0.0f32..=1.0,
            prop::collection::vec((0u32..64, -100.0f32..=100.0), 0..4),
        ),
        (
            0.1f32..3.0,
            0usize..8,
            -2.0f32..2.0,
            -2.0f32..2.0,
            any::<u64>(),
        ),
    )
        .prop_map(
            |(
                (temperature, top_k, top_p, min_p, logit_bias),
                (repeat_penalty, repeat_last_n, freq, presence, seed),
            )| {
                SamplingParams {
                    temperature,
                    top_k,
                    top_p,
                    min_p,
                    repeat_penalty,
                    repeat_last_n,
                    frequency_penalty: freq,
                    presence_penalty: presence,
                    seed,
                    logit_bias,
                    logprobs: None,
                    post_sampling_probs: false,
                }
            },
        )
}

proptest! {
    #[test]
    fn sample_is_total_and_never_picks_an_impossible_token(
        params in valid_params(),
        logits in prop::collection::vec(
            prop_oneof![4 => -1e4f32..1e4, 1 => Just(f32::NEG_INFINITY), 1 => Just(f32::MAX)],
            1..48,
        ),
        n_vocab_delta in -4i32..4,
        history in prop::collection::vec(0u32..64, 0..16),
    ) {
        prop_assert!(params.validate().is_ok());
        let n_vocab = (logits.len() as i32 + n_vocab_delta).max(1) as usize;
        let mut s = Sampler::new(params, n_vocab);
        for t in history {
            s.accept(t);
        }
        let visible = &logits[..logits.len().min(n_vocab)];
        let any_finite = visible.iter().any(|l| l.is_finite());
        for _ in 0..4 {
            let t = s.sample(&logits) as usize;
            prop_assert!(t < visible.len());
            if any_finite {
                prop_assert!(visible[t].is_finite(), "picked {} = {}", t, visible[t]);
            }
            s.accept(t as u32);
        }
    }
}

proptest! {
    /// Plain greedy's shortcut (no candidates built) picks what the full chain picks: here the
    /// chain runs through a zero `logit_bias`, which adds nothing; NaN, infinities, ties and a
    /// vocabulary shorter than the logits included.
    #[test]
    fn plain_greedy_equals_the_full_chain(
        logits in prop::collection::vec(
            prop_oneof![
                4 => -1e4f32..1e4,
                1 => Just(f32::NEG_INFINITY),
                1 => Just(f32::INFINITY),
                1 => Just(f32::MAX),
                1 => Just(f32::NAN),
                1 => Just(1.0f32),
            ],
            1..48,
        ),
        n_vocab_delta in -4i32..4,
    ) {
        let n_vocab = (logits.len() as i32 + n_vocab_delta).max(1) as usize;
        let chain = SamplingParams {
            logit_bias: vec![(0, 0.0)],
            ..SamplingParams::greedy()
        };
        let fast = Sampler::new(SamplingParams::greedy(), n_vocab).sample(&logits);
        let full = Sampler::new(chain, n_vocab).sample(&logits);
        prop_assert_eq!(fast, full);
    }
}

#[test]
fn logit_bias_forces_and_bans_tokens_greedy_and_sampled() {
    let logits = [2.0f32, 5.0, 1.0, 4.0];
    let force = |p: SamplingParams| SamplingParams {
        logit_bias: vec![(2, 100.0)],
        ..p
    };
    assert_eq!(
        Sampler::new(force(SamplingParams::greedy()), 4).sample(&logits),
        2
    );
    assert!(draws(force(plain(5)), &logits, 200).iter().all(|&t| t == 2));
    let ban = |p: SamplingParams| SamplingParams {
        logit_bias: vec![(1, -100.0), (9, 100.0)],
        ..p
    };
    assert_eq!(
        Sampler::new(ban(SamplingParams::greedy()), 4).sample(&logits),
        3
    );
    let seen = draws(ban(plain(6)), &logits, 500);
    assert!(!seen.contains(&1), "a -100 bias bans the token");
    assert!(seen.contains(&3) && seen.contains(&0));
}

#[test]
fn logit_bias_and_top_logprobs_are_validated_and_clamped() {
    let bad = SamplingParams {
        logit_bias: vec![(0, 100.5)],
        ..SamplingParams::default()
    };
    assert_eq!(bad.validate().unwrap_err().field, "logit_bias");
    let bad = SamplingParams {
        logit_bias: vec![(0, f32::NAN)],
        ..SamplingParams::default()
    };
    assert_eq!(bad.validate().unwrap_err().field, "logit_bias");
    let bad = SamplingParams {
        logprobs: Some(21),
        ..SamplingParams::default()
    };
    assert_eq!(bad.validate().unwrap_err().field, "top_logprobs");
    let unvalidated = SamplingParams {
        logit_bias: vec![(1, f32::NEG_INFINITY), (0, f32::NAN)],
        logprobs: Some(99),
        ..SamplingParams::greedy()
    };
    let s = Sampler::new(unvalidated, 3);
    assert_eq!(s.params().logit_bias, [(1, -100.0), (0, 0.0)]);
    assert_eq!(s.params().logprobs, Some(20));
}

#[test]
fn logprobs_ignore_bias_and_penalties() {
    let logits = pseudo_random_logits(3, 100);
    let biased = SamplingParams {
        logit_bias: vec![(7, 100.0)],
        repeat_penalty: 1.5,
        logprobs: Some(5),
        ..SamplingParams::greedy()
    };
    let mut s = Sampler::new(biased, 100);
    s.accept(argmax(&logits));
    let t = s.sample(&logits);
    assert_eq!(t, 7);
    let lp = s.logprobs(&logits, t).expect("asked for");
    assert_eq!(Some(lp), super::logprobs(&logits, 7, 5));
    assert_eq!(
        lp.top()[0].id,
        argmax(&logits),
        "the raw model's best comes first"
    );
    assert!(Sampler::new(plain(1), 100).logprobs(&logits, t).is_none());
}

#[test]
fn post_sampling_probs_are_the_chains_distribution() {
    let logits = pseudo_random_logits(5, 200);
    let params = SamplingParams {
        temperature: 0.7,
        top_k: 8,
        top_p: 1.0,
        min_p: 0.0,
        logprobs: Some(20),
        post_sampling_probs: true,
        ..SamplingParams::default()
    };
    let mut s = Sampler::new(params, 200);
    let t = s.sample(&logits);
    let lp = s.logprobs(&logits, t).expect("asked for");
    // Only top-k's 8 survivors, best first, summing to one; the pick is among them.
    let top = lp.top();
    assert_eq!(top.len(), 8);
    let sum: f64 = top.iter().map(|x| f64::from(x.logprob).exp()).sum();
    assert!((sum - 1.0).abs() < 1e-5, "{sum}");
    assert!(top.windows(2).all(|w| w[0].logprob >= w[1].logprob));
    assert_eq!(top[0].id, argmax(&logits));
    assert!(
        top.iter()
            .any(|x| x.id == t && x.logprob == lp.sampled.logprob)
    );
    // Temperature sharpens the distribution against the raw softmax.
    let raw = super::logprobs(&logits, top[0].id, 0).expect("in range");
    assert!(top[0].logprob > raw.sampled.logprob);
    // Greedy: the pick had probability one, alone.
    let greedy = SamplingParams {
        logprobs: Some(5),
        post_sampling_probs: true,
        ..SamplingParams::greedy()
    };
    let mut g = Sampler::new(greedy, 200);
    let t = g.sample(&logits);
    let lp = g.logprobs(&logits, t).expect("asked for");
    assert_eq!(lp.sampled.logprob, 0.0);
    assert_eq!(lp.top().len(), 1);
    assert_eq!(lp.top()[0].id, t);
}
