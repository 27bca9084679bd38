//! Property tests: for random schemas of the supported subset and random logits, constrained
//! decoding (greedy and sampled) over a synthetic vocabulary never dead-ends, finishes in an
//! accepting state within a bound, and yields JSON that validates; the mask agrees with stepping
//! every token directly. The same holds for schemas wrapped in literal text (tool-call syntaxes):
//! every item between the wrappers parses and validates, and a prose answer (when allowed) never
//! starts with the trigger.

mod common;

use std::sync::Arc;

use common::{Rng, constraint, decode, parse, schema_format, synthetic_vocab, validate};
use memoria_constrain::{Constraint, Grammar, Json, Matcher, ResponseFormat, Wrapped};
use proptest::prelude::*;

const NAMES: &[&str] = &["a", "b", "name", "id", "é", "x y", "q\"t", "\\n"];

fn lit(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

fn enum_value() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z]{0,3}".prop_map(|s| lit(&s)),
        (-5i32..50).prop_map(|n| n.to_string()),
        Just("true".to_owned()),
        Just("null".to_owned()),
        Just("2.5".to_owned()),
    ]
}

fn leaf() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(r#"{"type":"string"}"#.to_owned()),
        (0u32..3, 0u32..4).prop_map(|(min, extra)| format!(
            r#"{{"type":"string","minLength":{min},"maxLength":{}}}"#,
            min + extra
        )),
        Just(r#"{"type":"number"}"#.to_owned()),
        Just(r#"{"type":"integer","description":"n"}"#.to_owned()),
        Just(r#"{"type":"boolean"}"#.to_owned()),
        Just(r#"{"type":"null"}"#.to_owned()),
        prop::collection::vec(enum_value(), 1..4)
            .prop_map(|v| format!(r#"{{"enum":[{}]}}"#, v.join(","))),
        "[a-z]{1,4}".prop_map(|s| format!(r#"{{"const":{}}}"#, lit(&s))),
        Just(r#"{"type":["string","null"]}"#.to_owned()),
        Just(r#"{"type":["integer","null"],"title":"t"}"#.to_owned()),
        Just(r##"{"$ref":"#/$defs/leaf"}"##.to_owned()),
        Just(r#"{"type":"string","format":"date"}"#.to_owned()),
    ]
}

fn object(members: Vec<(usize, String, bool)>) -> String {
    let mut seen = Vec::new();
    let mut props = Vec::new();
    let mut req = Vec::new();
    for (i, s, r) in members {
        let name = NAMES[i % NAMES.len()];
        if seen.contains(&name) {
            continue;
        }
        seen.push(name);
        props.push(format!("{}:{s}", lit(name)));
        if r {
            req.push(lit(name));
        }
    }
    format!(
        r#"{{"type":"object","properties":{{{}}},"required":[{}],"additionalProperties":false}}"#,
        props.join(","),
        req.join(",")
    )
}

fn schema() -> impl Strategy<Value = String> {
    let inner = leaf().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec((0usize..8, inner.clone(), any::<bool>()), 0..4).prop_map(object),
            (inner.clone(), 0u32..3, prop::option::of(0u32..3)).prop_map(|(it, min, extra)| {
                match extra {
                    Some(e) => format!(
                        r#"{{"type":"array","items":{it},"minItems":{min},"maxItems":{}}}"#,
                        min + e
                    ),
                    None => format!(r#"{{"type":"array","items":{it},"minItems":{min}}}"#),
                }
            }),
            prop::collection::vec(inner.clone(), 1..3)
                .prop_map(|v| format!(r#"{{"anyOf":[{}]}}"#, v.join(","))),
            inner.prop_map(|s| format!(r#"{{"anyOf":[{s},{{"type":"null"}}]}}"#)),
        ]
    });
    (
        prop::collection::vec((0usize..8, inner, any::<bool>()), 1..4),
        any::<bool>(),
    )
        .prop_map(|(members, recursive)| {
            let mut o = object(members);
            // Root members, then optionally a nullable recursive child, then the $defs.
            o.truncate(o.len() - 1);
            if recursive {
                o = o.replacen(
                    r#""properties":{"#,
                    r##""properties":{"child":{"anyOf":[{"$ref":"#"},{"type":"null"}]},"##,
                    1,
                );
            }
            o.push_str(r#","$defs":{"leaf":{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"],"additionalProperties":false}}}"#);
            o
        })
}

/// The mask bit of every token equals whether stepping it directly succeeds.
fn mask_matches_stepping(m: &mut Matcher, n: u32) {
    let mask = m.mask();
    for t in 0..n {
        let bit = mask[t as usize / 64] >> (t % 64) & 1 == 1;
        let ok = m.clone().advance(t).is_ok();
        assert_eq!(bit, ok, "token {t}");
    }
}

fn names_as_tokens() -> Vec<String> {
    NAMES.iter().map(|n| format!("{}:", lit(n))).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_schemas_decode_to_valid_json(text in schema(), seed in any::<u64>()) {
        let extra = names_as_tokens();
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let vocab = synthetic_vocab(&extra);
        let c = constraint(&schema_format(&text), &vocab);
        let root = Json::parse(&text).unwrap();
        let mut rng = Rng(seed | 1);
        for sampled in [false, true] {
            let d = decode(&c, &mut rng, sampled, 48);
            let v = parse(&d.text);
            if let Err(e) = validate(&root, &root, &v) {
                panic!("{e}\nschema {text}");
            }
            // Replay: at every prefix the mask is exactly the set of tokens that step.
            let mut m = Matcher::new(c.clone());
            for &t in d.tokens.iter().take(12) {
                mask_matches_stepping(&mut m, vocab.len() as u32);
                m.advance(t).unwrap();
            }
        }
    }

    #[test]
    fn json_object_decodes_to_an_object(seed in any::<u64>()) {
        let vocab = synthetic_vocab(&[]);
        let c = Constraint::new(Arc::new(Grammar::json_object()), vocab.clone());
        let mut rng = Rng(seed | 1);
        for sampled in [false, true] {
            let d = decode(&c, &mut rng, sampled, 64);
            prop_assert!(matches!(parse(&d.text), Json::Object(_)));
            let mut m = Matcher::new(c.clone());
            for &t in d.tokens.iter().take(12) {
                mask_matches_stepping(&mut m, vocab.len() as u32);
                m.advance(t).unwrap();
            }
        }
    }

    #[test]
    fn wrapped_schemas_decode_to_parsable_calls(
        text in schema(),
        seed in any::<u64>(),
        max_items in 1usize..4,
        prose in any::<bool>(),
    ) {
        let extra = names_as_tokens();
        let mut extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        extra.extend(["<tool_call>", "</tool_call>", "\n<", "call>"]);
        let vocab = synthetic_vocab(&extra);
        let root = Json::parse(&text).unwrap();
        let (open, close, sep) = ("<tool_call>\n", "\n</tool_call>", "\n");
        let format = ResponseFormat::Wrapped(Wrapped {
            open: open.into(),
            schema: root.clone(),
            close: close.into(),
            separator: sep.into(),
            max_items,
            free_text_unless: prose.then(|| "<tool_call>".to_owned()),
        });
        let c = constraint(&format, &vocab);
        let mut rng = Rng(seed | 1);
        for sampled in [false, true] {
            let d = decode(&c, &mut rng, sampled, 48);
            let out = std::str::from_utf8(&d.text).expect("UTF-8");
            let Some(body) = out.strip_prefix(open) else {
                prop_assert!(prose, "no call in {out:?}");
                prop_assert!(!out.starts_with("<tool_call>"));
                continue;
            };
            let body = body.strip_suffix(close).expect("closed");
            let items: Vec<&str> = body.split(&format!("{close}{sep}{open}")).collect();
            prop_assert!(items.len() <= max_items);
            for item in items {
                if let Err(e) = validate(&root, &root, &parse(item.as_bytes())) {
                    panic!("{e}\nschema {text}\noutput {out:?}");
                }
            }
            let mut m = Matcher::new(c.clone());
            for &t in d.tokens.iter().take(12) {
                mask_matches_stepping(&mut m, vocab.len() as u32);
                m.advance(t).unwrap();
            }
        }
    }
}
