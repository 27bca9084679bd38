//! The model families' chat templates through `memoria serve` (random-weight models made with
//! `memoria model synth --chat-template`): Qwen3's (Hermes calls; `chat_template_kwargs` and a
//! passed-back `reasoning_content` change the prompt exactly as the template renders them),
//! Granite 3.3's (`<|tool_call|>` lists) and gpt-oss's (harmony `commentary` calls): a required
//! or named `tool_choice` gives a parsed call of the right tool whose arguments validate, plain
//! and streamed alike.

use std::path::Path;

use memoria_model::chat::{ChatMessage, ChatTemplate};
use memoria_model::gguf::GgufFile;
use memoria_model::tokenizer::Tokenizer;
use serde_json::{Map, Value, json};

use super::client::post;
use super::server::Server;
use super::structured_tools::{called, choices_hold, streamed, synth};

/// The prompt tokens of `messages` rendered by the model's own template with `kwargs`.
fn rendered_tokens(model: &Path, messages: &[ChatMessage], kwargs: &Map<String, Value>) -> usize {
    let f = GgufFile::open(model).expect("model");
    let tok = Tokenizer::from_gguf(&f).expect("tokenizer");
    let t = ChatTemplate::for_model(&f, &tok, None).expect("template");
    let text = t
        .render_with(messages, None, true, kwargs)
        .expect("renders");
    let bos = tok
        .bos()
        .and_then(|b| tok.token_text(b))
        .is_some_and(|b| !b.is_empty() && text.starts_with(b));
    tok.encode(&text, !bos, true).len()
}

/// The prompt tokens the server counts for `body` (one token generated).
fn prompt_tokens(s: &Server, mut body: Value) -> u64 {
    body["max_tokens"] = json!(1);
    let r = post(s.addr, "/v1/chat/completions", &body, &[]);
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    v["usage"]["prompt_tokens"].as_u64().expect("usage")
}

#[test]
fn serve_qwen3_template_kwargs_reasoning_and_calls() {
    let model = synth(
        "family-qwen3",
        "qwen2",
        "ggml-vocab-gpt-2.gguf",
        "Qwen-Qwen3-0.6B.jinja",
    );
    let path = model.to_str().expect("utf-8 path");
    let s = Server::start("family-qwen3", &["-m", path, "-c", "1024"]);
    choices_hold(&s);
    // `enable_thinking: false` makes the template write an empty think block after the opening.
    let hi = [ChatMessage::user("Hi")];
    let mut off = Map::new();
    off.insert("enable_thinking".into(), json!(false));
    let plain = prompt_tokens(&s, json!({"messages": [{"role": "user", "content": "Hi"}]}));
    let thinking_off = prompt_tokens(
        &s,
        json!({"messages": [{"role": "user", "content": "Hi"}],
               "chat_template_kwargs": {"enable_thinking": false}}),
    );
    assert_eq!(plain as usize, rendered_tokens(&model, &hi, &Map::new()));
    assert_eq!(thinking_off as usize, rendered_tokens(&model, &hi, &off));
    assert!(thinking_off > plain, "{thinking_off} vs {plain}");
    // A passed-back `reasoning_content` of the turn after the last query is rendered.
    let mut answer = ChatMessage::assistant("4");
    answer.reasoning_content = Some("Two and two.".into());
    let turns = [
        ChatMessage::user("2+2?"),
        answer,
        ChatMessage::new("tool", "ok"),
    ];
    let served = prompt_tokens(
        &s,
        json!({"messages": [
            {"role": "user", "content": "2+2?"},
            {"role": "assistant", "content": "4", "reasoning_content": "Two and two."},
            {"role": "tool", "content": "ok", "tool_call_id": "c"}]}),
    );
    let mut tool_turn = turns.clone();
    tool_turn[2].tool_call_id = Some("c".into());
    assert_eq!(
        served as usize,
        rendered_tokens(&model, &tool_turn, &Map::new())
    );
    let without = prompt_tokens(
        &s,
        json!({"messages": [
            {"role": "user", "content": "2+2?"},
            {"role": "assistant", "content": "4"},
            {"role": "tool", "content": "ok", "tool_call_id": "c"}]}),
    );
    assert!(served > without, "{served} vs {without}");
}

#[test]
fn serve_granite_template_calls_in_tool_call_lists() {
    let model = synth(
        "family-granite",
        "qwen2",
        "ggml-vocab-gpt-2.gguf",
        "ibm-granite-granite-3.3-2B-Instruct.jinja",
    );
    let path = model.to_str().expect("utf-8 path");
    let s = Server::start("family-granite", &["-m", path, "-c", "2048"]);
    choices_hold(&s);
}

#[test]
fn serve_gpt_oss_template_calls_on_the_commentary_channel() {
    let model = synth(
        "family-gpt-oss",
        "qwen2",
        "ggml-vocab-gpt-2.gguf",
        "openai-gpt-oss-120b.jinja",
    );
    let path = model.to_str().expect("utf-8 path");
    let s = Server::start("family-gpt-oss", &["-m", path, "-c", "2048"]);
    for name in ["get_weather", "get_time"] {
        let named = json!({"type": "function", "function": {"name": name}});
        let whole = called(&s, &named);
        assert_eq!(whole[0].0, name);
        let (pieces, finish) = streamed(&s, &named);
        assert_eq!(finish, "tool_calls");
        assert_eq!(pieces, whole, "streamed pieces assemble to the whole call");
    }
    // `reasoning_effort` reaches the template (its system message says it).
    let ask = json!([{"role": "user", "content": "Hi"}]);
    let medium = prompt_tokens(&s, json!({"messages": ask}));
    let mut low = Map::new();
    low.insert("reasoning_effort".into(), json!("low"));
    let served_low = prompt_tokens(&s, json!({"messages": ask, "reasoning_effort": "low"}));
    let hi = [ChatMessage::user("Hi")];
    assert_eq!(served_low as usize, rendered_tokens(&model, &hi, &low));
    assert_eq!(medium as usize, rendered_tokens(&model, &hi, &Map::new()));
}
