//! Tool calls in a chat template's own syntax: random-weight models made with `memoria
//! model synth --chat-template` carrying the Qwen 2.5 (Hermes `<tool_call>`) and Llama 3.1 (bare
//! `{"name", "parameters"}`) tools templates (tests/data/templates), served by `memoria serve`.
//! A required or named `tool_choice` gives a parsed call of the right tool whose arguments
//! validate, plain and streamed (the streamed pieces assemble to the same call); `auto` gives a
//! valid answer either way; a `tool` turn renders through the template (the rendered prompt is
//! what the server counted).

use std::path::{Path, PathBuf};

use memoria_model::chat::{ChatFunctionCall, ChatMessage, ChatTemplate, ChatTool, ChatToolCall};
use memoria_model::gguf::GgufFile;
use memoria_model::tokenizer::Tokenizer;
use serde_json::{Value, json};

use super::client::{Stream, post};
use super::server::{Server, temp_dir};

/// Synthesizes a tiny model with `vocab`'s tokenizer and the template file `template`.
pub(super) fn synth(name: &str, arch: &str, vocab: &str, template: &str) -> PathBuf {
    let out = temp_dir(name).join(format!("{name}.gguf"));
    let template = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("data/templates")
        .join(template);
    let vocab = crate::shared::path(&format!("vocab/{vocab}"));
    let st = crate::bin::command()
        .args(["model", "synth"])
        .arg(&out)
        .args([
            "--arch", arch, "--dim", "64", "--layers", "2", "--heads", "2",
        ])
        .args([
            "--kv-heads",
            "1",
            "--ffn",
            "128",
            "--type",
            "q8_0",
            "--seed",
            "3",
        ])
        .arg("--vocab-from")
        .arg(&vocab)
        .arg("--chat-template")
        .arg(&template)
        .output()
        .expect("run memoria model synth");
    assert!(
        st.status.success(),
        "synth {name}: {}",
        String::from_utf8_lossy(&st.stderr)
    );
    out
}

pub(super) fn tools() -> Value {
    json!([
        {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
            "parameters": {"type": "object", "properties": {
                "city": {"type": "string", "maxLength": 6},
                "unit": {"enum": ["celsius", "fahrenheit"]}},
                "required": ["city", "unit"], "additionalProperties": false}}},
        {"type": "function", "function": {"name": "get_time", "description": "The time now",
            "parameters": {"type": "object", "properties": {"hours": {"type": "boolean"}},
                "required": ["hours"], "additionalProperties": false}}}
    ])
}

pub(super) fn ask() -> Value {
    json!([{"role": "user", "content": "What is the weather in Oslo?"}])
}

/// Checks one call of OpenAI's shape against the tools; its arguments text.
pub(super) fn check_call(call: &Value, name: Option<&str>) -> String {
    assert_eq!(call["type"], "function", "{call}");
    assert!(call["id"].as_str().is_some_and(|i| !i.is_empty()), "{call}");
    let f = &call["function"];
    let got = f["name"].as_str().expect("name");
    if let Some(n) = name {
        assert_eq!(got, n, "{call}");
    }
    let text = f["arguments"].as_str().expect("arguments text");
    let args: Value = serde_json::from_str(text).expect("arguments are JSON");
    match got {
        "get_weather" => {
            assert!(
                args["city"]
                    .as_str()
                    .is_some_and(|c| c.chars().count() <= 6)
            );
            assert!(
                args["unit"] == "celsius" || args["unit"] == "fahrenheit",
                "{args}"
            );
        }
        "get_time" => assert!(args["hours"].is_boolean(), "{args}"),
        other => panic!("unknown tool {other}"),
    }
    text.to_owned()
}

/// A whole (non-streamed) answer under `choice`: its calls' (name, arguments).
pub(super) fn called(s: &Server, choice: &Value) -> Vec<(String, String)> {
    let body = json!({"messages": ask(), "tools": tools(), "tool_choice": choice,
        "parallel_tool_calls": false, "max_tokens": 200, "temperature": 0});
    let r = post(s.addr, "/v1/chat/completions", &body, &[]);
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    let c = &v["choices"][0];
    assert_eq!(c["finish_reason"], "tool_calls", "{v}\n{}", s.stderr());
    assert!(c["message"]["content"].is_null(), "{v}");
    let calls = c["message"]["tool_calls"].as_array().expect("tool_calls");
    assert_eq!(calls.len(), 1, "{v}");
    let name = choice["function"]["name"].as_str();
    calls
        .iter()
        .map(|call| {
            let args = check_call(call, name);
            (call["function"]["name"].as_str().unwrap().to_owned(), args)
        })
        .collect()
}

/// The same request streamed: the assembled calls and the finish reason.
pub(super) fn streamed(s: &Server, choice: &Value) -> (Vec<(String, String)>, String) {
    let body = json!({"messages": ask(), "tools": tools(), "tool_choice": choice,
        "parallel_tool_calls": false, "max_tokens": 200, "temperature": 0, "stream": true});
    let mut st = Stream::open(s.addr, "/v1/chat/completions", &body, &[]);
    assert_eq!(st.status, 200);
    let mut calls: Vec<(String, String)> = Vec::new();
    let mut finish = String::new();
    while let Some(ev) = st.next_event() {
        if ev == "[DONE]" {
            break;
        }
        let v: Value = serde_json::from_str(&ev).expect("chunk JSON");
        let c = &v["choices"][0];
        if let Some(f) = c["finish_reason"].as_str() {
            finish = f.to_owned();
        }
        for t in c["delta"]["tool_calls"].as_array().into_iter().flatten() {
            let k = t["index"].as_u64().expect("index") as usize;
            if k == calls.len() {
                assert!(t["id"].is_string(), "the first piece carries the id: {t}");
                calls.push((String::new(), String::new()));
            }
            calls[k].0 += t["function"]["name"].as_str().unwrap_or("");
            calls[k].1 += t["function"]["arguments"].as_str().unwrap_or("");
        }
    }
    (calls, finish)
}

/// Required, named, streamed and auto choices against a served model.
pub(super) fn choices_hold(s: &Server) {
    called(s, &json!("required"));
    let named = json!({"type": "function", "function": {"name": "get_time"}});
    let whole = called(s, &named);
    assert_eq!(whole[0].0, "get_time");
    let (pieces, finish) = streamed(s, &named);
    assert_eq!(finish, "tool_calls");
    assert_eq!(
        pieces, whole,
        "streamed pieces assemble to the whole answer's call"
    );
    // Auto: prose or a call, either valid.
    let body = json!({"messages": ask(), "tools": tools(), "max_tokens": 40, "temperature": 1.0,
        "seed": 5});
    let r = post(s.addr, "/v1/chat/completions", &body, &[]);
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    let m = &v["choices"][0]["message"];
    match m["tool_calls"].as_array() {
        Some(calls) => calls.iter().for_each(|c| {
            check_call(c, None);
        }),
        None => assert!(m["content"].is_string(), "{v}"),
    }
}

/// The conversation after a call: the call and the tool's answer, as OpenAI clients send it.
fn after_call() -> Value {
    json!([
        {"role": "user", "content": "What is the weather in Oslo?"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_7", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\",\"unit\":\"celsius\"}"}}]},
        {"role": "tool", "tool_call_id": "call_7", "name": "get_weather", "content": "{\"temp\": 21}"}
    ])
}

/// The prompt the template makes of [`after_call`] (with the tools), and its token count.
fn rendered_after_call(model: &Path) -> (String, usize) {
    let f = GgufFile::open(model).expect("model");
    let tok = Tokenizer::from_gguf(&f).expect("tokenizer");
    let t = ChatTemplate::for_model(&f, &tok, None).expect("template");
    let mut call = ChatMessage::assistant("");
    call.tool_calls = vec![ChatToolCall {
        id: "call_7".into(),
        kind: "function".into(),
        function: ChatFunctionCall {
            name: "get_weather".into(),
            arguments: json!({"city": "Oslo", "unit": "celsius"}),
        },
    }];
    let mut answer = ChatMessage::new("tool", "{\"temp\": 21}");
    answer.tool_call_id = Some("call_7".into());
    answer.name = Some("get_weather".into());
    let tools: Vec<ChatTool> = tools()
        .as_array()
        .unwrap()
        .iter()
        .map(|t| ChatTool {
            name: t["function"]["name"].as_str().unwrap().into(),
            description: t["function"]["description"].as_str().map(str::to_owned),
            parameters: t["function"]["parameters"].clone(),
        })
        .collect();
    let msgs = [
        ChatMessage::user("What is the weather in Oslo?"),
        call,
        answer,
    ];
    let text = t
        .render_with_tools(&msgs, Some(&tools), true)
        .expect("renders");
    let bos = tok
        .bos()
        .and_then(|b| tok.token_text(b))
        .is_some_and(|b| !b.is_empty() && text.starts_with(b));
    let n = tok.encode(&text, !bos, true).len();
    (text, n)
}

/// A `tool` turn goes through the template: the server's prompt is the template's rendering.
fn tool_turn_renders(s: &Server, model: &Path, expect: &[&str]) {
    let (text, n) = rendered_after_call(model);
    for e in expect {
        assert!(
            text.contains(e),
            "{e:?} not in the rendered prompt:\n{text}"
        );
    }
    let body = json!({"messages": after_call(), "tools": tools(), "max_tokens": 1,
        "tool_choice": "none"});
    let r = post(s.addr, "/v1/chat/completions", &body, &[]);
    assert_eq!(r.status, 200, "{}", r.text());
    let none = r.json()["usage"]["prompt_tokens"].as_u64().expect("usage");
    // `none` leaves the tools out of the template, so its prompt is shorter than with tools.
    let body = json!({"messages": after_call(), "tools": tools(), "max_tokens": 60,
        "tool_choice": "required", "parallel_tool_calls": false, "temperature": 0});
    let r = post(s.addr, "/v1/chat/completions", &body, &[]);
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["usage"]["prompt_tokens"], n, "{v}");
    assert!((none as usize) < n, "{none} vs {n}");
}

#[test]
fn serve_qwen_tools_template_calls_in_its_own_syntax() {
    let model = synth(
        "tools-qwen",
        "qwen2",
        "ggml-vocab-gpt-2.gguf",
        "qwen2.5-tools.jinja",
    );
    let path = model.to_str().expect("utf-8 path");
    let s = Server::start("tools-qwen", &["-m", path, "-c", "1024"]);
    choices_hold(&s);
    tool_turn_renders(
        &s,
        &model,
        &[
            "<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\"",
            "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"unit\": \"celsius\"}}\n</tool_call><|im_end|>",
            "<|im_start|>user\n<tool_response>\n{\"temp\": 21}\n</tool_response><|im_end|>",
        ],
    );
}

#[test]
fn serve_llama31_tools_template_calls_in_its_own_syntax() {
    let model = synth(
        "tools-llama31",
        "llama",
        "ggml-vocab-llama-spm.gguf",
        "llama3.1-tools.jinja",
    );
    let path = model.to_str().expect("utf-8 path");
    let s = Server::start("tools-llama31", &["-m", path, "-c", "1024"]);
    choices_hold(&s);
    tool_turn_renders(
        &s,
        &model,
        &[
            "Environment: ipython",
            "<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\", \"unit\": \"celsius\"}}<|eot_id|>",
            "<|start_header_id|>ipython<|end_header_id|>\n\n",
        ],
    );
}
