//! The constraint over SmolLM2's real 49k vocabulary: a tokenized valid instance passes the mask
//! token by token, the mask equals direct stepping for every token, and random-logit decoding
//! validates.

mod common;

use std::sync::Arc;

use common::real::{NESTED_INSTANCE, NESTED_SCHEMA, smollm2};
use common::{Rng, constraint, decode, parse, schema_format, validate};
use memoria_constrain::{Constraint, Grammar, Json, Matcher, Vocab};

fn vocab() -> (memoria_model::tokenizer::Tokenizer, Arc<Vocab>) {
    let (tok, pieces, eog) = smollm2();
    assert!(pieces.len() > 49_000, "{} tokens", pieces.len());
    (tok, Arc::new(Vocab::new(&pieces, &eog).expect("vocab")))
}

fn mask_matches_stepping(m: &mut Matcher, n: u32) {
    let mask = m.mask();
    let mut allowed = 0;
    for t in 0..n {
        let bit = mask[t as usize / 64] >> (t % 64) & 1 == 1;
        assert_eq!(bit, m.clone().advance(t).is_ok(), "token {t}");
        allowed += usize::from(bit);
    }
    assert!(allowed > 0, "dead end");
}

#[test]
fn tokenized_instance_passes_the_mask_token_by_token() {
    let (tok, vocab) = vocab();
    let c = constraint(&schema_format(NESTED_SCHEMA), &vocab);
    let ids = tok.encode(NESTED_INSTANCE, false, false);
    assert!(ids.len() > 20, "{ids:?}");
    let mut m = Matcher::new(c);
    for (i, &t) in ids.iter().enumerate() {
        assert!(
            m.allows(t),
            "token {i} ({t}, {:?}) refused",
            tok.token_to_piece(t, false)
        );
        if i % 8 == 0 {
            mask_matches_stepping(&mut m, vocab.len() as u32);
        }
        m.advance(t).unwrap();
    }
    assert!(m.is_accepting());
    for &e in vocab.eos_ids() {
        assert!(m.allows(e));
    }
    m.advance(vocab.eos_ids()[0]).unwrap();
    assert!(m.is_finished());
}

#[test]
fn random_logits_over_the_real_vocabulary_validate() {
    let (_, vocab) = vocab();
    let c = constraint(&schema_format(NESTED_SCHEMA), &vocab);
    let root = Json::parse(NESTED_SCHEMA).unwrap();
    let mut rng = Rng(0x5EED);
    for sampled in [false, true] {
        let d = decode(&c, &mut rng, sampled, 24);
        let v = parse(&d.text);
        validate(&root, &root, &v).unwrap();
    }
    let j = Constraint::new(Arc::new(Grammar::json_object()), vocab.clone());
    let d = decode(&j, &mut rng, true, 24);
    assert!(matches!(parse(&d.text), Json::Object(_)));
    let mut m = Matcher::new(j);
    for &t in d.tokens.iter().take(6) {
        mask_matches_stepping(&mut m, vocab.len() as u32);
        m.advance(t).unwrap();
    }
}

#[test]
fn length_bounded_strings_mask_exactly_over_the_real_vocabulary() {
    // Counting states: the plain tokens allowed shrink with the room left in the string.
    let (tok, vocab) = vocab();
    let schema = r#"{"type":"object","properties":{"t":{"type":"string","maxLength":12}},"required":["t"],"additionalProperties":false}"#;
    let c = constraint(&schema_format(schema), &vocab);
    let ids = tok.encode(r#"{"t": "quick brown fo"}"#, false, false);
    let mut m = Matcher::new(c);
    let mut text = Vec::new();
    let mut refused = false;
    for &t in &ids {
        mask_matches_stepping(&mut m, vocab.len() as u32);
        if m.advance(t).is_err() {
            refused = true;
            break;
        }
        text.extend_from_slice(vocab.token_bytes(t));
    }
    // "quick brown fo" has 14 characters: a token past the 12th is refused.
    let content = &text[r#"{"t": ""#.len()..];
    assert!(refused && content.len() <= 12 && b"quick brown fo".starts_with(content));
    mask_matches_stepping(&mut m, vocab.len() as u32);
}
