//! Fuzz harness of the OpenAI request schema: JSON values in the shape of chat and completion
//! requests (known fields with valid, boundary or arbitrary values, unknown fields, arbitrary
//! documents), serialized and sometimes byte-edited, go through the body parser and the
//! request checks the handlers run before touching the engine. Each must be refused with a 4xx
//! OpenAI error or accepted as a request the engine takes; nothing panics.
//! `MEMORIA_FUZZ_CASES` raises the case counts for long runs.

use std::sync::OnceLock;

use memoria_model::gguf::GgufFile;
use memoria_model::tokenizer::Tokenizer;
use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::schema::{ChatRequest, CompletionRequest};
use super::tool_syntax::ToolSyntax;
use super::{chat_check, completion_check, json as body};
use crate::error::ApiError;
use crate::state::RequestDefaults;

/// The demo model's tokenizer (built once).
fn tokenizer() -> &'static Tokenizer {
    static TOK: OnceLock<Tokenizer> = OnceLock::new();
    TOK.get_or_init(|| {
        let bytes = memoria_model::synth::demo::demo_gguf_bytes().unwrap();
        Tokenizer::from_gguf(&GgufFile::from_bytes(bytes).unwrap()).unwrap()
    })
}

/// Any JSON document, shallow.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number(),
        ".{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(".{0,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Numbers around every boundary a field has, and anything.
fn number() -> impl Strategy<Value = Value> {
    let edges = vec![
        json!(0),
        json!(1),
        json!(2),
        json!(4),
        json!(5),
        json!(6),
        json!(20),
        json!(21),
        json!(64),
        json!(65),
        json!(100),
        json!(-1),
        json!(-100),
        json!(-101),
        json!(u32::MAX),
        json!(u64::MAX),
        json!(i64::MIN),
        json!(0.5),
        json!(2.0),
        json!(2.5),
        json!(-0.0),
        json!(1e308),
        json!(-1e308),
    ];
    prop_oneof![
        3 => prop::sample::select(edges),
        1 => any::<i64>().prop_map(Value::from),
        1 => any::<u64>().prop_map(Value::from),
        1 => any::<f64>().prop_map(Value::from),
    ]
}

/// A field's value: mostly plausible, sometimes anything.
fn or_any(plausible: impl Strategy<Value = Value>) -> impl Strategy<Value = Value> {
    prop_oneof![4 => plausible, 1 => any_json()]
}

fn text() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!("hi")),
        Just(json!("")),
        Just(json!("<|im_start|>user")),
        ".{0,16}".prop_map(Value::String),
    ]
}

fn message() -> impl Strategy<Value = Value> {
    let role = prop::sample::select(vec![
        "system",
        "developer",
        "user",
        "assistant",
        "tool",
        "bogus",
    ]);
    let part = (prop::sample::select(vec!["text", "image_url", "x"]), text())
        .prop_map(|(kind, t)| json!({"type": kind, "text": t}));
    let content = prop_oneof![
        text(),
        prop::collection::vec(part, 0..3).prop_map(Value::Array),
        Just(Value::Null),
    ];
    let call = json!([{"id": "c1", "type": "function",
        "function": {"name": "f", "arguments": "{\"a\":1}"}}]);
    (
        role,
        or_any(content),
        prop::option::weighted(0.1, or_any(Just(call))),
    )
        .prop_map(|(role, content, calls)| {
            let mut m = json!({"role": role, "content": content});
            if let Some(c) = calls {
                m["tool_calls"] = c;
            }
            m
        })
}

fn stop() -> impl Strategy<Value = Value> {
    prop_oneof![
        text(),
        prop::collection::vec(text(), 0..6).prop_map(Value::Array),
    ]
}

fn logit_bias() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        (0u32..300).prop_map(|k| k.to_string()),
        Just("-1".to_string()),
        Just("99999999999999999999".to_string()),
        ".{0,4}",
    ];
    prop::collection::btree_map(key, number(), 0..4)
        .prop_map(|m| Value::Object(m.into_iter().collect()))
}

fn response_format() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!({"type": "text"})),
        Just(json!({"type": "json_object"})),
        Just(json!({"type": "json_schema", "json_schema": {"name": "x",
            "schema": {"type": "object", "properties": {"a": {"type": "integer"}}}}})),
        any_json().prop_map(|s| json!({"type": "json_schema",
            "json_schema": {"name": "x", "schema": s}})),
    ]
}

fn tools() -> impl Strategy<Value = Value> {
    let tool = (".{0,6}", or_any(Just(json!({"type": "object"})))).prop_map(|(name, params)| {
        json!({"type": "function", "function": {"name": name, "parameters": params}})
    });
    prop::collection::vec(tool, 0..3).prop_map(Value::Array)
}

/// Fields both request kinds share.
fn common_fields() -> Vec<(&'static str, BoxedStrategy<Value>)> {
    vec![
        ("model", or_any(text()).boxed()),
        ("max_tokens", or_any(number()).boxed()),
        ("temperature", or_any(number()).boxed()),
        ("top_p", or_any(number()).boxed()),
        ("top_k", or_any(number()).boxed()),
        ("min_p", or_any(number()).boxed()),
        ("repeat_penalty", or_any(number()).boxed()),
        ("presence_penalty", or_any(number()).boxed()),
        ("frequency_penalty", or_any(number()).boxed()),
        ("seed", or_any(number()).boxed()),
        ("n", or_any(number()).boxed()),
        (
            "stream",
            or_any(any::<bool>().prop_map(Value::Bool)).boxed(),
        ),
        (
            "stream_options",
            or_any(any::<bool>().prop_map(|b| json!({"include_usage": b}))).boxed(),
        ),
        ("stop", or_any(stop()).boxed()),
        ("logit_bias", or_any(logit_bias()).boxed()),
        (
            "ignore_eos",
            or_any(any::<bool>().prop_map(Value::Bool)).boxed(),
        ),
        ("response_format", or_any(response_format()).boxed()),
        ("bogus_field", any_json().boxed()),
    ]
}

/// An object holding each of `fields` with probability 1/3 (`required` always).
fn object(
    required: (&'static str, BoxedStrategy<Value>),
    fields: Vec<(&'static str, BoxedStrategy<Value>)>,
) -> impl Strategy<Value = Value> {
    let optional: Vec<_> = fields
        .into_iter()
        .map(|(k, s)| prop::option::weighted(0.33, s).prop_map(move |v| v.map(|v| (k, v))))
        .collect();
    let (rk, rs) = required;
    (prop::option::weighted(0.95, rs), optional).prop_map(move |(r, opt)| {
        let mut m = Map::new();
        if let Some(v) = r {
            m.insert(rk.to_string(), v);
        }
        for (k, v) in opt.into_iter().flatten() {
            m.insert(k.to_string(), v);
        }
        Value::Object(m)
    })
}

fn chat_request() -> impl Strategy<Value = Value> {
    let mut fields = common_fields();
    fields.extend([
        ("max_completion_tokens", or_any(number()).boxed()),
        (
            "logprobs",
            or_any(any::<bool>().prop_map(Value::Bool)).boxed(),
        ),
        ("top_logprobs", or_any(number()).boxed()),
        ("tools", or_any(tools()).boxed()),
        (
            "tool_choice",
            or_any(prop::sample::select(vec!["auto", "none", "required"]).prop_map(Value::from))
                .boxed(),
        ),
        (
            "parallel_tool_calls",
            or_any(any::<bool>().prop_map(Value::Bool)).boxed(),
        ),
    ]);
    let messages = or_any(prop::collection::vec(message(), 0..4).prop_map(Value::Array));
    object(("messages", messages.boxed()), fields)
}

fn completion_request() -> impl Strategy<Value = Value> {
    let mut fields = common_fields();
    fields.extend([
        ("best_of", or_any(number()).boxed()),
        ("echo", or_any(any::<bool>().prop_map(Value::Bool)).boxed()),
        ("suffix", or_any(text()).boxed()),
        ("logprobs", or_any(number()).boxed()),
    ]);
    let ids = prop::collection::vec(prop_oneof![0u32..300, any::<u32>()], 0..6);
    let prompt = prop_oneof![
        text(),
        prop::collection::vec(text(), 0..3).prop_map(Value::from),
        ids.clone().prop_map(Value::from),
        prop::collection::vec(ids, 0..3).prop_map(Value::from),
    ];
    object(("prompt", or_any(prompt).boxed()), fields)
}

/// The body: the document's JSON, sometimes byte-edited, sometimes arbitrary.
fn body_bytes(doc: impl Strategy<Value = Value>) -> impl Strategy<Value = Vec<u8>> {
    (
        prop_oneof![4 => doc, 1 => any_json()],
        prop::option::weighted(0.3, memoria_fuzz::edits(4)),
    )
        .prop_map(|(v, edits)| {
            let mut b = serde_json::to_vec(&v).unwrap();
            if let Some(e) = edits {
                memoria_fuzz::apply(&mut b, &e);
            }
            b
        })
}

/// A refusal is a 4xx OpenAI error that renders.
fn clean_refusal(e: &ApiError) -> Result<(), TestCaseError> {
    prop_assert!(e.status.is_client_error(), "{} {}", e.status, e.message);
    prop_assert!(!e.message.is_empty());
    prop_assert!(e.to_json()["error"]["message"].is_string());
    Ok(())
}

proptest! {
    #![proptest_config(memoria_fuzz::config(2000))]

    #[test]
    fn openai_fuzz_chat_requests_are_refused_cleanly_or_accepted(bytes in body_bytes(chat_request())) {
        let n_vocab = tokenizer().n_vocab();
        // Every tool syntax checks the same request without a panic.
        for syntax in [ToolSyntax::Generic, ToolSyntax::Hermes, ToolSyntax::Llama3] {
            match body::parse::<ChatRequest>(&bytes).and_then(|r| chat_check::check(r, n_vocab, syntax, &RequestDefaults::default())) {
                Ok(c) => {
                    prop_assert!((1..=super::params::MAX_CHOICES).contains(&c.n));
                    prop_assert!(!c.messages.is_empty());
                    prop_assert!(c.stop.len() <= 4);
                    prop_assert!(c.top_logprobs.is_none_or(|k| k <= 20));
                    prop_assert!(c.sampling.logit_bias.iter().all(|&(id, _)| (id as usize) < n_vocab));
                    prop_assert_eq!(c.template_tools.is_some(), syntax.is_native() && c.tool_plan.is_some());
                }
                Err(e) => clean_refusal(&e)?,
            }
        }
    }

    #[test]
    fn openai_fuzz_completion_requests_are_refused_cleanly_or_accepted(
        bytes in body_bytes(completion_request()),
    ) {
        let tok = tokenizer();
        match body::parse::<CompletionRequest>(&bytes).and_then(|r| completion_check::check(r, tok, &RequestDefaults::default())) {
            Ok(c) => {
                prop_assert!(!c.prompts.is_empty());
                prop_assert!(c.prompts.iter().all(|(ids, _)| !ids.is_empty()
                    && ids.iter().all(|&t| (t as usize) < tok.n_vocab())));
                prop_assert!(1 <= c.n && c.n <= c.best_of);
                prop_assert!(c.k.is_none_or(|k| k <= 5));
            }
            Err(e) => clean_refusal(&e)?,
        }
    }
}

/// The generators reach acceptance: a plain request of each kind passes the checks.
#[test]
fn openai_fuzz_plain_requests_are_accepted() {
    let chat = br#"{"messages":[{"role":"user","content":"hi"}],"n":2,"stop":["x"]}"#;
    let c = chat_check::check(
        body::parse(chat).unwrap(),
        tokenizer().n_vocab(),
        ToolSyntax::Generic,
        &RequestDefaults::default(),
    )
    .unwrap_or_else(|e| panic!("{}", e.message));
    assert_eq!((c.n, c.messages.len(), c.stop.len()), (2, 1, 1));
    let comp = br#"{"prompt":[[1,2],[3]],"n":1,"best_of":2}"#;
    let c = completion_check::check(
        body::parse(comp).unwrap(),
        tokenizer(),
        &RequestDefaults::default(),
    )
    .unwrap_or_else(|e| panic!("{}", e.message));
    assert_eq!((c.prompts.len(), c.n, c.best_of), (2, 1, 2));
}
