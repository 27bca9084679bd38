//! The chat templates the model families ship (Qwen3, SmolLM3, Gemma 2, Phi-3.5, Granite 3.3
//! and 4.0, gpt-oss, OLMo 2) rendered over the conversations of
//! `tests/data/templates/fixtures.json`, compared byte for byte with Python jinja2's rendering
//! (`render_fixtures.py`, HF transformers' environment), errors a template raises included.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::{ChatError, ChatMessage, ChatTemplate, ChatTool, builtin, strftime};

const FIXTURES: &str = include_str!("../../../../tests/data/templates/fixtures.json");

/// The clock `render_fixtures.py` renders `strftime_now` with.
const FIXED_NOW: i64 = 1_768_469_400;

#[derive(Deserialize)]
struct Fixture {
    template: String,
    case: String,
    bos_token: String,
    eos_token: String,
    messages: Value,
    tools: Option<Vec<Value>>,
    add_generation_prompt: bool,
    kwargs: Map<String, Value>,
    expected: Option<String>,
    raises: Option<String>,
}

fn source(name: &str) -> Option<&'static str> {
    Some(match name {
        "Qwen-Qwen3-0.6B.jinja" => {
            include_str!("../../../../tests/data/templates/Qwen-Qwen3-0.6B.jinja")
        }
        "HuggingFaceTB-SmolLM3-3B.jinja" => {
            include_str!("../../../../tests/data/templates/HuggingFaceTB-SmolLM3-3B.jinja")
        }
        "google-gemma-2-2b-it.jinja" => {
            include_str!("../../../../tests/data/templates/google-gemma-2-2b-it.jinja")
        }
        "microsoft-Phi-3.5-mini-instruct.jinja" => {
            include_str!("../../../../tests/data/templates/microsoft-Phi-3.5-mini-instruct.jinja")
        }
        "ibm-granite-granite-3.3-2B-Instruct.jinja" => include_str!(
            "../../../../tests/data/templates/ibm-granite-granite-3.3-2B-Instruct.jinja"
        ),
        "ibm-granite-granite-4.0.jinja" => {
            include_str!("../../../../tests/data/templates/ibm-granite-granite-4.0.jinja")
        }
        "openai-gpt-oss-120b.jinja" => {
            include_str!("../../../../tests/data/templates/openai-gpt-oss-120b.jinja")
        }
        "olmo2.jinja" => include_str!("../../../../tests/data/templates/olmo2.jinja"),
        _ => return None,
    })
}

/// The template of a fixture, its `strftime_now` reading the fixtures' clock.
fn template(f: &Fixture) -> ChatTemplate {
    let src = source(&f.template).unwrap_or_else(|| panic!("no template {}", f.template));
    let mut t = if f.template == "olmo2.jinja" {
        // The built-in is the file, verbatim.
        assert_eq!(builtin::OLMO2, src);
        ChatTemplate::builtin("olmo2", &f.bos_token, &f.eos_token).unwrap()
    } else {
        ChatTemplate::new(src, &f.bos_token, &f.eos_token).unwrap()
    };
    t.env.add_function("strftime_now", |format: String| {
        strftime::strftime(&format, FIXED_NOW)
    });
    t
}

fn tool_of(v: &Value) -> ChatTool {
    let f = &v["function"];
    ChatTool {
        name: f["name"].as_str().unwrap().to_owned(),
        description: f["description"].as_str().map(str::to_owned),
        parameters: f["parameters"].clone(),
    }
}

#[test]
fn family_templates_render_as_python_jinja2() {
    let fixtures: Vec<Fixture> = serde_json::from_str(FIXTURES).unwrap();
    assert!(fixtures.len() >= 60, "{} fixtures", fixtures.len());
    let mut failures = Vec::new();
    for f in &fixtures {
        let t = template(f);
        let messages: Vec<ChatMessage> = serde_json::from_value(f.messages.clone()).unwrap();
        // The template sees exactly the fixture's messages and tools.
        assert_eq!(serde_json::to_value(&messages).unwrap(), f.messages);
        let tools: Option<Vec<ChatTool>> =
            f.tools.as_ref().map(|v| v.iter().map(tool_of).collect());
        if let (Some(tools), Some(given)) = (&tools, &f.tools) {
            assert_eq!(
                &serde_json::to_value(tools).unwrap(),
                &Value::from(given.clone())
            );
        }
        let got = t.render_with(
            &messages,
            tools.as_deref(),
            f.add_generation_prompt,
            &f.kwargs,
        );
        let want = match (&f.expected, &f.raises) {
            (Some(text), None) => Ok(text.clone()),
            (None, Some(message)) => Err(ChatError::Raised(message.clone())),
            _ => panic!("{} {}: neither expected nor raises", f.template, f.case),
        };
        if got != want {
            failures.push(format!(
                "{} / {}:\n  got  {got:?}\n  want {want:?}",
                f.template, f.case
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_family_template_has_fixtures() {
    let fixtures: Vec<Fixture> = serde_json::from_str(FIXTURES).unwrap();
    for name in [
        "Qwen-Qwen3-0.6B.jinja",
        "HuggingFaceTB-SmolLM3-3B.jinja",
        "google-gemma-2-2b-it.jinja",
        "microsoft-Phi-3.5-mini-instruct.jinja",
        "ibm-granite-granite-3.3-2B-Instruct.jinja",
        "ibm-granite-granite-4.0.jinja",
        "openai-gpt-oss-120b.jinja",
        "olmo2.jinja",
    ] {
        let n = fixtures.iter().filter(|f| f.template == name).count();
        assert!(n >= 4, "{name}: {n} cases");
    }
}

#[test]
fn kwargs_do_not_replace_what_the_renderer_sets() {
    let t = ChatTemplate::new(
        "{{ add_generation_prompt }}|{{ messages | length }}|{{ extra }}",
        "",
        "",
    )
    .unwrap();
    let mut kwargs = Map::new();
    kwargs.insert("add_generation_prompt".into(), Value::Bool(false));
    kwargs.insert("messages".into(), Value::Array(vec![]));
    kwargs.insert("extra".into(), Value::from("x"));
    let out = t
        .render_with(&[ChatMessage::user("hi")], None, true, &kwargs)
        .unwrap();
    assert_eq!(out, "True|1|x");
}
