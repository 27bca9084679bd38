//! Prompt log-probs at the engine (OpenAI's `echo` with `logprobs`): `score` returns, for each
//! prompt token after the first, exactly the log-softmax a prefill ending just before it gives
//! (checked at every position against sessions prefilled to that point), bit-identical alone and
//! among other sessions, with nothing taken from the cache; the session then generates what a
//! plain prefill's session generates.

use memoria_kv::NamespaceId;
use memoria_model::tokenizer::Tokenizer;
use memoria_sched::sampling::{TokenLogprobs, logprobs};
use memoria_sched::{EngineHandle, Event, GenerateParams, GenerationStream};

use crate::shared;

const NS: NamespaceId = NamespaceId(5);

fn engine() -> EngineHandle {
    shared::stories_engine(128)
}

fn prompt(tok: &Tokenizer) -> Vec<u32> {
    let text = "Once upon a time, there was a little girl named Lily. She loved to play outside \
        in the park with her friends. One day, she saw a big red ball under a tree. She wanted to \
        play with it, but it was too high. Lily asked her mom for help. Her mom smiled and said, \
        \"Let's get it together.\" They got the ball and played all day.";
    tok.encode(text, true, true)
}

async fn tokens(mut s: GenerationStream) -> Vec<u32> {
    let mut out = Vec::new();
    while let Some(ev) = s.next().await {
        match ev {
            Event::Token { id, .. } => out.push(id),
            Event::Done { .. } => return out,
            Event::Error(e) => panic!("generation failed: {e}"),
        }
    }
    panic!("stream ended without Done");
}

async fn score(e: &EngineHandle, salt: &str, p: &[u32]) -> Vec<TokenLogprobs> {
    let id = crate::shared::open_salted(e, NS, salt).await;
    e.append(NS, id, p.to_vec()).await.expect("append");
    let lps = e.score(NS, id, 5).await.expect("score");
    e.close(NS, id).await.expect("close");
    lps
}

#[test]
fn prompt_logprobs_are_teacher_forcing_alone_and_in_a_crowd() {
    let e = engine();
    let tok = e.tokenizer().clone();
    let p = prompt(&tok);
    assert!(
        p.len() > 70,
        "the prompt spans several 64-token score chunks"
    );
    let rt = shared::runtime();
    rt.block_on(async {
        // Warm the cache with the same prompt: scoring must not take it from there.
        let warm = crate::shared::open_salted(&e, NS, "same").await;
        e.append(NS, warm, p.clone()).await.expect("append");
        e.prefill(NS, warm).await.expect("prefill");
        let alone = score(&e, "same", &p).await;
        assert_eq!(alone.len(), p.len() - 1);
        // Each position against a session prefilled to just before that token.
        for j in 1..p.len() {
            let id = crate::shared::open_salted(&e, NS, "ref").await;
            e.append(NS, id, p[..j].to_vec()).await.expect("append");
            let logits = e.prefill(NS, id).await.expect("prefill");
            e.close(NS, id).await.expect("close");
            let want = logprobs(&logits[..tok.n_vocab()], p[j], 5).expect("in range");
            assert_eq!(alone[j - 1], want, "position {j}");
            assert_eq!(alone[j - 1].sampled.id, p[j]);
        }
        // Among generating sessions: the same bits.
        let mut others = Vec::new();
        for i in 0..6 {
            let id = crate::shared::open_salted(&e, NS, "crowd").await;
            let q = tok.encode(&format!("Tom had {i} cars and"), true, true);
            e.append(NS, id, q).await.expect("append");
            let mut params = GenerateParams::greedy(40);
            params.close_when_done = true;
            others.push(tokio::spawn(tokens(
                e.generate(NS, id, params).expect("gen"),
            )));
        }
        let crowd = score(&e, "crowd", &p).await;
        for o in others {
            o.await.expect("task");
        }
        assert!(crowd == alone, "prompt log-probs moved in a batch");
        // After scoring, the session generates what a plain session generates.
        let id = crate::shared::open_salted(&e, NS, "gen").await;
        e.append(NS, id, p.clone()).await.expect("append");
        e.score(NS, id, 0).await.expect("score");
        let scored = tokens(e.generate(NS, id, GenerateParams::greedy(16)).expect("gen")).await;
        let plain = crate::shared::open_salted(&e, NS, "gen2").await;
        e.append(NS, plain, p.clone()).await.expect("append");
        let want = tokens(
            e.generate(NS, plain, GenerateParams::greedy(16))
                .expect("gen"),
        )
        .await;
        assert_eq!(scored, want);
        // A session that already computed tokens is refused.
        let e2 = e.score(NS, plain, 1).await;
        assert!(e2.is_err(), "scoring a computed session was accepted");
    });
    e.shutdown();
}
