//! One test per schema feature: which outputs the constraint lets through byte by byte, and the
//! errors for what is refused.

mod common;

use std::sync::Arc;

use common::{Rng, accepts, constraint, decode, parse, schema_format, synthetic_vocab, validate};
use memoria_constrain::{
    ConstrainError, Constraint, ConstraintCache, Grammar, Json, Matcher, ResponseFormat,
};

fn check(schema: &str, yes: &[&str], no: &[&str]) {
    let v = synthetic_vocab(&[]);
    let c = constraint(&schema_format(schema), &v);
    for t in yes {
        assert!(accepts(&c, t.as_bytes()), "{schema} should accept {t}");
    }
    for t in no {
        assert!(!accepts(&c, t.as_bytes()), "{schema} should refuse {t}");
    }
    // And random decoding always yields a valid instance.
    let root = Json::parse(schema).unwrap();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for i in 0..8 {
        let d = decode(&c, &mut rng, i % 2 == 1, 40);
        let val = parse(&d.text);
        validate(&root, &root, &val).unwrap();
    }
}

fn refused(schema: &str) -> ConstrainError {
    match Grammar::compile(&schema_format(schema)) {
        Ok(_) => panic!("{schema} compiled"),
        Err(e) => e,
    }
}

fn unsupported_keyword(schema: &str) -> String {
    match refused(schema) {
        ConstrainError::Unsupported { keyword, .. } => keyword,
        e => panic!("{schema}: not Unsupported: {e}"),
    }
}

#[test]
fn object_properties_in_order_all_required() {
    check(
        r#"{"type":"object","properties":{"b":{"type":"integer"},"a":{"type":"boolean"}},
            "required":["b","a"],"additionalProperties":false}"#,
        &[r#"{"b":1,"a":true}"#, r#"{"b": -20, "a": false}"#],
        &[
            r#"{"a":true,"b":1}"#,
            r#"{"b":1}"#,
            r#"{"b":1,"a":true,"c":0}"#,
            r#"{ "b":1,"a":true}"#,
            r#"{"b":1,"a":true} "#,
            r#"{"b":1.5,"a":true}"#,
        ],
    );
}

#[test]
fn optional_properties_keep_order_and_commas() {
    check(
        r#"{"type":"object","properties":{"x":{"type":"null"},"y":{"type":"null"},"z":{"type":"null"}},
            "required":["y"]}"#,
        &[
            r#"{"y":null}"#,
            r#"{"x":null,"y":null}"#,
            r#"{"y":null,"z":null}"#,
            r#"{"x":null,"y":null,"z":null}"#,
        ],
        &[r#"{}"#, r#"{"x":null}"#, r#"{,"y":null}"#, r#"{"y":null,}"#],
    );
    check(
        r#"{"type":"object","properties":{"x":{"type":"null"},"y":{"type":"null"}}}"#,
        &[
            "{}",
            r#"{"x":null}"#,
            r#"{"y":null}"#,
            r#"{"x":null,"y":null}"#,
        ],
        &[r#"{"y":null,"x":null}"#],
    );
}

#[test]
fn strings_escapes_unicode_and_lengths() {
    check(
        r#"{"type":"string"}"#,
        &[r#""""#, r#""a\"b\\\/\b\f\n\r\t\u00e9\uD7FF""#, "\"日本 𝄞\""],
        &[r#""\ud800""#, "\"a\nb\"", r#""\x""#, r#"""#, r#""a"b"#],
    );
    check(
        r#"{"type":"string","minLength":2,"maxLength":3}"#,
        &[r#""ab""#, r#""a\nb""#, r#""日本語""#],
        &[r#""a""#, r#""abcd""#],
    );
}

#[test]
fn string_formats() {
    check(
        r#"{"type":"string","format":"date-time"}"#,
        &[
            r#""2026-12-01T17:20:00Z""#,
            r#""2026-02-28T00:00:00.123+05:30""#,
        ],
        &[r#""2026-13-01T00:00:00Z""#, r#""2026-12-01""#],
    );
    check(
        r#"{"type":"string","format":"uuid"}"#,
        &[r#""123e4567-e89b-12d3-a456-426614174000""#],
        &[r#""123e4567e89b12d3a456426614174000""#],
    );
    check(
        r#"{"type":"string","format":"date"}"#,
        &[r#""2026-12-01""#],
        &[r#""2026-12-32""#],
    );
    check(
        r#"{"type":"string","format":"time"}"#,
        &[r#""23:59:59Z""#],
        &[r#""24:00:00Z""#],
    );
}

#[test]
fn numbers_and_integers_are_bounded_literals() {
    check(
        r#"{"type":"number"}"#,
        &["0", "-0", "12.5", "1e5", "-3.25E-12", "9999999999999999"],
        &["01", "1.", ".5", "+1", "1e100", "99999999999999999", "NaN"],
    );
    check(
        r#"{"type":"integer"}"#,
        &["0", "-42"],
        &["-0", "1.0", "1e3", "--1"],
    );
}

#[test]
fn integer_bounds_multiples_and_string_patterns() {
    check(
        r#"{"type":"integer","minimum":-15,"exclusiveMaximum":120}"#,
        &["-15", "-1", "0", "7", "99", "119"],
        &["-16", "120", "1000", "-0", "007"],
    );
    check(
        r#"{"type":"integer","minimum":1}"#,
        &["1", "9999999999999999"],
        &["0", "-1", "10000000000000000"],
    );
    check(
        r#"{"type":"array","items":{"type":"integer","minimum":0,"maximum":100,"multipleOf":25}}"#,
        &["[0,25, 100]", "[]"],
        &["[5]", "[125]", "[-25]"],
    );
    check(
        r#"{"type":"number","minimum":0}"#,
        &["0", "1.5", "2000"],
        &["-1", "-0.5", "2e3"],
    );
    check(
        r#"{"type":"number","exclusiveMinimum":-1.5,"maximum":99.95}"#,
        &["-1.4", "0", "99.95", "42.125"],
        &["-1.5", "-2", "99.96", "100", "1e1"],
    );
    check(
        r#"{"type":"object","properties":{"code":{"type":"string","pattern":"^[A-Z]{2}-\\d+$"}},"required":["code"]}"#,
        &[r#"{"code":"AB-12"}"#],
        &[
            r#"{"code":"Ab-12"}"#,
            r#"{"code":"AB-"}"#,
            r#"{"code":"xAB-1"}"#,
        ],
    );
}

#[test]
fn booleans_null_and_nullable_type_arrays() {
    check(r#"{"type":"boolean"}"#, &["true", "false"], &["null", "1"]);
    check(
        r#"{"type":["string","null"]}"#,
        &["null", r#""x""#],
        &["true"],
    );
}

#[test]
fn enum_and_const() {
    check(
        r#"{"enum":["red","green",3,null,{"k":[1]}]}"#,
        &[r#""red""#, r#""green""#, "3", "null", r#"{"k":[1]}"#],
        &[r#""blue""#, "4", r#"{"k": [1]}"#],
    );
    check(r#"{"type":"string","enum":["a",1]}"#, &[r#""a""#], &["1"]);
    check(r#"{"const":"fixed"}"#, &[r#""fixed""#], &[r#""other""#]);
}

#[test]
fn arrays_with_item_bounds() {
    check(
        r#"{"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3}"#,
        &["[1]", "[1,2]", "[1, 2, 3]"],
        &["[]", "[1,2,3,4]", "[1,]", "[ 1]"],
    );
    check(
        r#"{"type":"array","items":{"type":"null"}}"#,
        &["[]", "[null,null]"],
        &["[null,]"],
    );
    check(
        r#"{"type":"array","items":{"type":"null"},"maxItems":0}"#,
        &["[]"],
        &["[null]"],
    );
}

#[test]
fn tuple_items_and_types_implied_by_their_keywords() {
    let v = synthetic_vocab(&[]);
    let tuple = constraint(
        &schema_format(r#"{"items":[{"type":"integer"},{"type":"boolean"}]}"#),
        &v,
    );
    for yes in ["[-3000, true]", "[1,false]"] {
        assert!(accepts(&tuple, yes.as_bytes()), "{yes}");
    }
    for no in ["[1]", "[1,true,2]", "[true,1]", "{}"] {
        assert!(!accepts(&tuple, no.as_bytes()), "{no}");
    }
    // `properties` alone implies an object.
    check(
        r#"{"properties":{"a":{"type":"integer"}},"required":["a"]}"#,
        &[r#"{"a":1}"#],
        &["[1]", "{}"],
    );
    // Keywords of two types imply none; a tuple's bounds must be its length.
    assert_eq!(
        unsupported_keyword(r#"{"items":{"type":"null"},"properties":{}}"#),
        "items"
    );
    assert_eq!(
        unsupported_keyword(r#"{"type":"array","items":[{"type":"null"}],"minItems":2}"#),
        "items"
    );
}

#[test]
fn any_of_and_defs_refs() {
    check(
        r##"{"type":"object","properties":{"p":{"$ref":"#/$defs/point"},"q":{"anyOf":[{"$ref":"#/$defs/point"},{"type":"null"}]}},
            "required":["p","q"],"additionalProperties":false,
            "$defs":{"point":{"type":"object","properties":{"x":{"type":"number"},"y":{"type":"number"}},"required":["x","y"],"additionalProperties":false}}}"##,
        &[
            r#"{"p":{"x":1,"y":2},"q":null}"#,
            r#"{"p":{"x":1,"y":2},"q":{"x":0.5,"y":-1}}"#,
        ],
        &[r#"{"p":null,"q":null}"#, r#"{"p":{"x":1},"q":null}"#],
    );
    check(
        r##"{"definitions":{"s":{"type":"string"}},"anyOf":[{"$ref":"#/definitions/s"},{"type":"integer"}]}"##,
        &[r#""a""#, "7"],
        &["true"],
    );
}

#[test]
fn recursive_refs_unroll_to_a_bounded_depth() {
    // A linked list: `next` is nullable, so at the depth limit it can only be null.
    let list = r##"{"type":"object","properties":{"v":{"type":"integer"},"next":{"anyOf":[{"$ref":"#"},{"type":"null"}]}},
        "required":["v","next"],"additionalProperties":false}"##;
    check(
        list,
        &[
            r#"{"v":1,"next":null}"#,
            r#"{"v":1,"next":{"v":2,"next":{"v":3,"next":{"v":4,"next":null}}}}"#,
        ],
        // The root and MAX_REF_DEPTH (3) expansions of `#`: a fifth level is refused.
        &[r#"{"v":1,"next":{"v":2,"next":{"v":3,"next":{"v":4,"next":{"v":5,"next":null}}}}}"#],
    );
    // A required recursion has no finite instance: refused clearly.
    let e =
        refused(r##"{"type":"object","properties":{"next":{"$ref":"#"}},"required":["next"]}"##);
    assert!(matches!(e, ConstrainError::Empty { .. }), "{e}");
    assert!(e.to_string().contains("recursive"), "{e}");
}

#[test]
fn unsupported_keywords_are_named() {
    let cases = [
        (r#"{"type":"string","pattern":"(?=a)"}"#, "pattern"),
        (
            r#"{"type":"string","pattern":"a","maxLength":3}"#,
            "pattern",
        ),
        (r#"{"type":"number","multipleOf":0.5}"#, "multipleOf"),
        (r#"{"type":"integer","multipleOf":3}"#, "multipleOf"),
        (r#"{"oneOf":[{"type":"string"}]}"#, "oneOf"),
        (r#"{"allOf":[{"type":"string"}]}"#, "allOf"),
        (r#"{"type":"string","format":"email"}"#, "format"),
        (r#"{"type":"array"}"#, "items"),
        (
            r#"{"type":"array","items":{"type":"null"},"uniqueItems":true}"#,
            "uniqueItems",
        ),
        (r#"{"type":"object","properties":{"a":{}}}"#, "{}"),
        (r#"{"type":"object","required":["a"]}"#, "required"),
        (r#"{"$ref":"https://example.invalid/s.json"}"#, "$ref"),
        (r#"{"type":"string","nullable":true}"#, "nullable"),
        (r#"{"type":"string","x-vendor":1}"#, "x-vendor"),
        (r#"{"type":"string","items":{"type":"null"}}"#, "items"),
    ];
    for (schema, kw) in cases {
        assert_eq!(unsupported_keyword(schema), kw, "{schema}");
        let e = refused(schema);
        assert!(e.to_string().contains(kw), "{e}");
        assert!(e.param().starts_with("response_format.json_schema.schema"));
    }
}

#[test]
fn invalid_and_empty_schemas_are_errors() {
    for s in [
        r#"{"type":"strin"}"#,
        r#"{"type":"string","maxLength":-1}"#,
        r#"{"anyOf":[]}"#,
        r##"{"$ref":"#/$defs/missing"}"##,
    ] {
        assert!(
            matches!(refused(s), ConstrainError::InvalidSchema { .. }),
            "{s}"
        );
    }
    for s in [
        r#"{"type":"integer","enum":["a"]}"#,
        r#"{"type":"string","minLength":3,"maxLength":2}"#,
        r#"{"type":"array","items":false,"minItems":1}"#,
    ] {
        assert!(matches!(refused(s), ConstrainError::Empty { .. }), "{s}");
    }
    assert!(matches!(
        refused(r#"{"type":"string","maxLength":100000}"#),
        ConstrainError::TooComplex(_)
    ));
}

#[test]
fn json_object_accepts_any_object_and_decodes_valid_json() {
    let v = synthetic_vocab(&[]);
    let c = Constraint::new(Arc::new(Grammar::json_object()), v);
    assert!(accepts(&c, br#"{"a": [1, {"b": null}], "c": "d"}"#));
    assert!(!accepts(&c, b"[1]"));
    let mut rng = Rng(7);
    for i in 0..16 {
        let d = decode(&c, &mut rng, i % 2 == 0, 60);
        assert!(matches!(parse(&d.text), Json::Object(_)));
    }
}

#[test]
fn eos_only_in_accepting_states_and_rejections_keep_the_state() {
    let v = synthetic_vocab(&[]);
    let eos = v.eos_ids()[0];
    let c = constraint(
        &schema_format(r#"{"type":"array","items":{"type":"integer"}}"#),
        &v,
    );
    let mut m = Matcher::new(c);
    assert!(!m.allows(eos));
    assert!(matches!(
        m.advance(eos),
        Err(ConstrainError::TokenRejected { .. })
    ));
    assert!(m.advance(u32::from(b'{')).is_err());
    m.advance(u32::from(b'[')).unwrap();
    assert_eq!(m.remaining_bytes(), 1);
    m.advance(u32::from(b']')).unwrap();
    assert!(m.is_accepting() && m.allows(eos) && !m.is_dead());
    assert!(!m.allows(u32::from(b' ')), "no trailing whitespace");
    m.advance(eos).unwrap();
    assert!(m.is_finished());
    let mut out = vec![u64::MAX; v.mask_words() + 2];
    m.fill_mask(&mut out);
    let allowed: Vec<usize> = (0..out.len() * 64)
        .filter(|&t| out[t / 64] >> (t % 64) & 1 == 1)
        .collect();
    assert_eq!(
        allowed,
        vec![eos as usize],
        "finished: only EOS, extra words zeroed"
    );
}

#[test]
fn masks_are_cached_per_state_and_bounded() {
    let v = synthetic_vocab(&[]);
    let g = Arc::new(
        Grammar::compile(&schema_format(
            r#"{"type":"array","items":{"type":"boolean"}}"#,
        ))
        .unwrap(),
    );
    // Room for two masks only.
    let c = Constraint::with_cache_bytes(g, v.clone(), 2 * v.mask_words() * 8);
    let mut rng = Rng(3);
    for _ in 0..4 {
        decode(&c, &mut rng, false, 20);
    }
    let s = c.cache_stats();
    assert_eq!(s.capacity, 2);
    assert!(s.entries <= 2 && s.hits > 0 && s.misses > 0, "{s:?}");
}

#[test]
fn constraint_cache_shares_by_content_and_is_bounded() {
    let v = synthetic_vocab(&[]);
    let cache = ConstraintCache::new(v, 2, 1 << 20);
    let a = ResponseFormat::from_json_str(
        r#"{"type":"json_schema","json_schema":{"name":"one","schema":{"type":"boolean"}}}"#,
    )
    .unwrap();
    let a2 = ResponseFormat::from_json_str(
        r#"{"type":"json_schema","json_schema":{"name":"two","strict":true,"schema":{"type":"boolean"}}}"#,
    )
    .unwrap();
    let ca = cache.get(&a).unwrap().unwrap();
    let ca2 = cache.get(&a2).unwrap().unwrap();
    assert!(
        Arc::ptr_eq(&ca, &ca2),
        "name and strict do not change the language"
    );
    assert!(cache.get(&ResponseFormat::Text).unwrap().is_none());
    cache.get(&ResponseFormat::JsonObject).unwrap().unwrap();
    cache
        .get(&schema_format(r#"{"type":"null"}"#))
        .unwrap()
        .unwrap();
    assert_eq!(cache.len(), 2);
    let again = cache.get(&a).unwrap().unwrap();
    assert!(
        !Arc::ptr_eq(&ca, &again),
        "the oldest was evicted and recompiled"
    );
    assert!(
        cache
            .get(&schema_format(r#"{"type":"string","pattern":"\\1"}"#))
            .is_err()
    );
}

/// The schema openai-python sends for a Pydantic model (`client.beta.chat.completions.parse`).
const PYDANTIC_MATH: &str = r##"{"$defs":{"Step":{"properties":{"explanation":{"title":"Explanation","type":"string"},
    "output":{"title":"Output","type":"string"}},"required":["explanation","output"],"title":"Step","type":"object",
    "additionalProperties":false},"Color":{"enum":["red","green"],"title":"Color","type":"string"}},
  "properties":{"steps":{"items":{"$ref":"#/$defs/Step"},"title":"Steps","type":"array"},
    "final_answer":{"title":"Final Answer","type":"string"},
    "color":{"$ref":"#/$defs/Color"},
    "note":{"anyOf":[{"type":"string"},{"type":"null"}],"default":null,"title":"Note"},
    "when":{"format":"date-time","title":"When","type":"string"}},
  "required":["steps","final_answer","color","note","when"],"title":"MathResponse","type":"object",
  "additionalProperties":false}"##;

/// OpenAI's documented recursive example: a UI tree whose children are the root schema.
const OPENAI_UI: &str = r##"{"type":"object","properties":{"type":{"type":"string","enum":["div","button","header","section","field","form"]},
    "label":{"type":"string"},"children":{"type":"array","items":{"$ref":"#"}},
    "attributes":{"type":"array","items":{"$ref":"#/$defs/attribute"}}},
  "required":["type","label","children","attributes"],"additionalProperties":false,
  "$defs":{"attribute":{"type":"object","properties":{"name":{"type":"string"},"value":{"type":"string"}},
    "required":["name","value"],"additionalProperties":false}}}"##;

#[test]
fn pydantic_and_openai_documented_schemas() {
    check(
        PYDANTIC_MATH,
        &[
            r#"{"steps":[{"explanation":"a","output":"b"}],"final_answer":"42","color":"red","note":null,"when":"2026-12-01T17:20:00Z"}"#,
            r#"{"steps": [], "final_answer": "", "color": "green", "note": "n", "when": "2026-12-01T17:20:00+01:00"}"#,
        ],
        &[
            r#"{"steps":[],"final_answer":"42","color":"blue","note":null,"when":"2026-12-01T17:20:00Z"}"#,
        ],
    );
    check(
        OPENAI_UI,
        &[
            r#"{"type":"form","label":"L","children":[{"type":"field","label":"x","children":[],"attributes":[]}],"attributes":[{"name":"n","value":"v"}]}"#,
        ],
        &[r#"{"type":"span","label":"L","children":[],"attributes":[]}"#],
    );
}

#[test]
fn masks_do_not_depend_on_the_cache_or_on_other_sessions() {
    // Several sessions share one constraint, interleaved; each one's masks equal the uncached
    // computation and a lone session's replay of the same tokens.
    let v = synthetic_vocab(&[]);
    let c = constraint(&schema_format(PYDANTIC_MATH), &v);
    let lone_c = constraint(&schema_format(PYDANTIC_MATH), &v);
    let mut rng = Rng(11);
    let runs: Vec<Vec<u32>> = (0..4)
        .map(|i| decode(&c, &mut rng, i % 2 == 0, 30).tokens)
        .collect();
    c.clear_cache();
    let mut ms: Vec<Matcher> = runs.iter().map(|_| Matcher::new(c.clone())).collect();
    let longest = runs.iter().map(Vec::len).max().unwrap_or(0);
    let mut uncached = vec![0u64; v.mask_words()];
    for step in 0..longest {
        for (m, run) in ms.iter_mut().zip(&runs) {
            let Some(&t) = run.get(step) else { continue };
            m.compute_mask(&mut uncached);
            assert_eq!(&*m.mask(), &uncached[..], "cached = uncached");
            let mut lone = Matcher::new(lone_c.clone());
            for &p in &run[..step] {
                lone.advance(p).unwrap();
            }
            assert_eq!(&*m.mask(), &*lone.mask(), "shared = alone");
            m.advance(t).unwrap();
        }
    }
}

#[test]
fn shared_types_cross_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Constraint>();
    send_sync::<ConstraintCache>();
    send_sync::<Matcher>();
    // Two threads decoding through one constraint (one mask cache) both validate.
    let v = synthetic_vocab(&[]);
    let c = constraint(&schema_format(PYDANTIC_MATH), &v);
    let root = Json::parse(PYDANTIC_MATH).unwrap();
    std::thread::scope(|s| {
        for seed in [1u64, 2] {
            let (c, root) = (c.clone(), &root);
            s.spawn(move || {
                let mut rng = Rng(seed);
                for _ in 0..4 {
                    let d = decode(&c, &mut rng, true, 30);
                    validate(root, root, &parse(&d.text)).unwrap();
                }
            });
        }
    });
}

#[test]
fn wrapped_schemas_take_literal_text_around_each_item() {
    let v = synthetic_vocab(&[]);
    let schema = Json::parse(
        r#"{"type":"object","properties":{"name":{"const":"f"},"arguments":{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"],"additionalProperties":false}},"required":["name","arguments"],"additionalProperties":false}"#,
    )
    .unwrap();
    let wrapped = |max_items, free: Option<&str>| {
        ResponseFormat::Wrapped(memoria_constrain::Wrapped {
            open: "<tool_call>\n".into(),
            schema: schema.clone(),
            close: "\n</tool_call>".into(),
            separator: "\n".into(),
            max_items,
            free_text_unless: free.map(str::to_owned),
        })
    };
    let call = "<tool_call>\n{\"name\":\"f\",\"arguments\":{\"x\":1}}\n</tool_call>";
    let required = constraint(&wrapped(2, None), &v);
    assert!(accepts(&required, call.as_bytes()));
    assert!(accepts(&required, format!("{call}\n{call}").as_bytes()));
    for no in [
        String::new(),
        "hello".to_owned(),
        format!("{call}\n{call}\n{call}"),
        format!(" {call}"),
        "<tool_call>\n{\"name\":\"g\",\"arguments\":{\"x\":1}}\n</tool_call>".to_owned(),
        "<tool_call>\n{\"name\":\"f\",\"arguments\":{}}\n</tool_call>".to_owned(),
    ] {
        assert!(!accepts(&required, no.as_bytes()), "{no:?}");
    }
    let auto = constraint(&wrapped(1, Some("<tool_call>")), &v);
    for yes in ["", "hello", "<tool", "It is <tool_call> time", call] {
        assert!(accepts(&auto, yes.as_bytes()), "{yes:?}");
    }
    assert!(!accepts(&auto, b"<tool_call>\nnot json"));
    // A bare JSON call (Llama 3.x): prose must not start with `{`.
    let bare = ResponseFormat::Wrapped(memoria_constrain::Wrapped {
        open: String::new(),
        schema: schema.clone(),
        close: String::new(),
        separator: String::new(),
        max_items: 1,
        free_text_unless: Some("{".into()),
    });
    let bare = constraint(&bare, &v);
    assert!(accepts(&bare, br#"{"name":"f","arguments":{"x":2}}"#));
    assert!(accepts(&bare, b"plain answer"));
    assert!(!accepts(&bare, b"{\"other\":1}"));
    // Different wrappers are different languages (and cache keys).
    assert_ne!(
        Grammar::content_key(&wrapped(1, None)),
        Grammar::content_key(&wrapped(2, None))
    );
}
