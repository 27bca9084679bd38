//! Token-granular prefix reuse through the engine: a conversation's next turn reuses every token
//! the previous turn computed, including those inside its last, unfilled block, and the result
//! is bit-identical to computing everything again.

use std::sync::Arc;

use memoria_kv::NamespaceId;
use memoria_model::llama::Model;
use memoria_model::tokenizer::Tokenizer;
use memoria_sched::{EngineConfig, EngineHandle, Event, GenerateParams, Usage};

use crate::shared;

const NS: NamespaceId = NamespaceId(1);

/// Tokens, usage and the final logits of one one-shot greedy generation.
async fn one_shot(
    e: &EngineHandle,
    salt: &str,
    prompt: &[u32],
    n: usize,
) -> (Vec<u32>, Usage, Vec<f32>) {
    let id = crate::shared::open_salted(e, NS, salt).await;
    e.append(NS, id, prompt.to_vec()).await.expect("append");
    let mut stream = e.generate(NS, id, GenerateParams::greedy(n)).expect("gen");
    let mut tokens = Vec::new();
    let usage = loop {
        match stream.next().await.expect("event") {
            Event::Token { id, .. } => tokens.push(id),
            Event::Done { usage, .. } => break usage,
            Event::Error(e) => panic!("generation failed: {e}"),
        }
    };
    let logits = e.logits(NS, id).await.expect("logits").expect("some");
    e.close(NS, id).await.expect("close");
    (tokens, usage, logits)
}

#[test]
fn the_next_turn_reuses_the_previous_turns_partial_block_bit_for_bit() {
    let model = Model::load(shared::path("models/stories260K-f32.gguf")).expect("model");
    let tok = Tokenizer::from_gguf(model.gguf()).expect("tokenizer");
    let e = EngineHandle::start(Arc::new(model), Arc::new(tok), EngineConfig::default())
        .expect("engine");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let tok = e.tokenizer().clone();
    let prompt = tok.encode(
        "Once upon a time, a little fox found a red ball.",
        true,
        true,
    );
    assert!(
        !prompt.len().is_multiple_of(16),
        "the prompt ends inside a block"
    );
    rt.block_on(async {
        let (answer, first, _) = one_shot(&e, "chat", &prompt, 8).await;
        assert_eq!(first.cached_tokens, 0);
        // Next turn: the whole previous exchange plus a new line.
        let mut turn = prompt.clone();
        turn.extend(&answer);
        turn.extend(tok.encode(" Then the fox", false, false));
        let (tokens, usage, logits) = one_shot(&e, "chat", &turn, 8).await;
        // Everything the first turn computed: its prompt and all but its last token.
        assert_eq!(usage.cached_tokens, prompt.len() + answer.len() - 1);
        let (fresh_tokens, fresh, fresh_logits) = one_shot(&e, "elsewhere", &turn, 8).await;
        assert_eq!(fresh.cached_tokens, 0, "another salt shares nothing");
        assert_eq!(tokens, fresh_tokens);
        assert!(logits == fresh_logits, "reused K/V changed the logits");
        let snap = e.pool_stats().snapshot().total;
        assert!(snap.tail_hits >= 1, "{snap:?}");
    });
    e.shutdown();
}

#[test]
fn a_repeated_prompt_ending_on_a_block_boundary_reuses_all_but_its_last_token_bit_for_bit() {
    let model = Model::load(shared::path("models/stories260K-f32.gguf")).expect("model");
    let tok = Tokenizer::from_gguf(model.gguf()).expect("tokenizer");
    let e = EngineHandle::start(Arc::new(model), Arc::new(tok), EngineConfig::default())
        .expect("engine");
    let mut prompt = e.tokenizer().encode(
        "Once upon a time, a little fox found a red ball in the garden and ran to show it to \
         his mother, who was baking bread for the whole family that sunny morning.",
        true,
        true,
    );
    assert!(prompt.len() >= 32, "{} tokens", prompt.len());
    prompt.truncate(32);
    shared::runtime().block_on(async {
        let (first_tokens, first, first_logits) = one_shot(&e, "chat", &prompt, 8).await;
        assert_eq!(first.cached_tokens, 0);
        // The same prompt again: both whole blocks are cached, the second one is taken for 15
        // of its 16 tokens (the last is computed for its logits).
        let (tokens, usage, logits) = one_shot(&e, "chat", &prompt, 8).await;
        assert_eq!(usage.cached_tokens, 31);
        assert_eq!(tokens, first_tokens);
        assert!(logits == first_logits, "reused K/V changed the logits");
        // And the cached block is still whole for the next one.
        let (_, again, _) = one_shot(&e, "chat", &prompt, 8).await;
        assert_eq!(again.cached_tokens, 31);
        let (_, other, _) = one_shot(&e, "elsewhere", &prompt, 8).await;
        assert_eq!(other.cached_tokens, 0, "another salt shares nothing");
    });
    e.shutdown();
}
