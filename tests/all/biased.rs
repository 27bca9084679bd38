//! At the engine: a sampled session with `logit_bias` and `logprobs` yields the same
//! tokens and bit-identical log-probs alone and among 15 other sessions; a session forked after
//! its prompt was computed samples exactly what a fresh session with the same seed samples; the
//! log-probs are the log-softmax of the raw logits, whatever the bias.

use memoria_kv::NamespaceId;
use memoria_model::tokenizer::Tokenizer;
use memoria_sched::sampling::{SamplingParams, TokenLogprobs, logprobs};
use memoria_sched::{EngineHandle, Event, GenerateParams, GenerationStream};

use crate::shared;

const NS: NamespaceId = NamespaceId(3);

fn engine() -> EngineHandle {
    shared::stories_engine(128)
}

/// Sampled at temperature 0.9 with seed `seed`, two biased tokens and 5 alternatives per token.
fn biased(seed: u64, max_tokens: usize) -> GenerateParams {
    let mut p = GenerateParams::greedy(max_tokens);
    p.sampling = SamplingParams {
        temperature: 0.9,
        seed,
        logit_bias: vec![(13, 3.0), (29, -100.0)],
        logprobs: Some(5),
        ..SamplingParams::default()
    };
    p.close_when_done = true;
    p
}

async fn collect(mut s: GenerationStream) -> Vec<(u32, TokenLogprobs)> {
    let mut out = Vec::new();
    while let Some(ev) = s.next().await {
        match ev {
            Event::Token { id, logprobs, .. } => out.push((id, logprobs.expect("asked for"))),
            Event::Done { .. } => return out,
            Event::Error(e) => panic!("generation failed: {e}"),
        }
    }
    panic!("stream ended without Done");
}

async fn run(
    e: &EngineHandle,
    salt: &str,
    prompt: Vec<u32>,
    params: GenerateParams,
) -> Vec<(u32, TokenLogprobs)> {
    let id = crate::shared::open_salted(e, NS, salt).await;
    e.append(NS, id, prompt).await.expect("append");
    collect(e.generate(NS, id, params).expect("generate")).await
}

fn prompt(tok: &Tokenizer, i: usize) -> Vec<u32> {
    tok.encode(
        &format!("Tom had {i} green cars. One day he went to the park and"),
        true,
        true,
    )
}

#[test]
fn bias_and_logprobs_are_identical_alone_and_among_fifteen_others() {
    let e = engine();
    let tok = e.tokenizer().clone();
    let rt = shared::runtime();
    let alone = rt.block_on(run(&e, "alone", prompt(&tok, 7), biased(42, 40)));
    assert_eq!(alone.len(), 40);
    assert!(
        alone.iter().all(|(id, _)| *id != 29),
        "a -100 bias bans the token"
    );
    for (id, lp) in &alone {
        assert_eq!(lp.sampled.id, *id);
        assert_eq!(lp.top().len(), 5);
        assert!(lp.sampled.logprob <= lp.top()[0].logprob);
    }
    let crowd = rt.block_on(async {
        let mut tasks = Vec::new();
        for i in 0..16 {
            let e = e.clone();
            let p = prompt(&tok, if i == 8 { 7 } else { 100 + i });
            let params = if i == 8 {
                biased(42, 40)
            } else {
                biased(i as u64, 20 + i)
            };
            tasks.push(tokio::spawn(
                async move { run(&e, "crowd", p, params).await },
            ));
        }
        let mut v = Vec::new();
        for t in tasks {
            v.push(t.await.expect("task"));
        }
        v
    });
    assert!(
        crowd[8] == alone,
        "the biased session's tokens or log-probs moved in a batch"
    );
    e.shutdown();
}

#[test]
fn a_fork_after_the_prompt_samples_what_a_fresh_session_samples() {
    let e = engine();
    let tok = e.tokenizer().clone();
    let rt = shared::runtime();
    rt.block_on(async {
        let p = prompt(&tok, 3);
        let fresh: Vec<_> = run(&e, "fresh", p.clone(), biased(8, 24)).await;
        let src = crate::shared::open_salted(&e, NS, "fork").await;
        e.append(NS, src, p.clone()).await.expect("append");
        let logits = e.prefill(NS, src).await.expect("prefill");
        let fork = e.fork(NS, src).await.expect("fork");
        let a = collect(e.generate(NS, fork, biased(8, 24)).expect("generate")).await;
        let b = collect(e.generate(NS, src, biased(9, 24)).expect("generate")).await;
        assert!(
            a == fresh,
            "the fork with seed 8 differs from a fresh session with seed 8"
        );
        assert_ne!(a, b, "seeds 8 and 9 gave the same choice");
        // The first token's log-probs are the raw log-softmax of the prompt's logits.
        let first = logprobs(&logits, a[0].0, 5).expect("in range");
        assert_eq!(first, a[0].1);
    });
    e.shutdown();
}
