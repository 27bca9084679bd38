//! llama-server behaviours its test suite checks, pinned here: a GBNF `grammar` with bounded
//! repetitions constrains the answer (absurd counts and recursion are a 400 naming `grammar`),
//! `post_sampling_probs` reports probabilities after the sampler chain (`prob`, `top_probs`),
//! an assistant prefill is continued verbatim (text parts joined by a blank line, trailing blank
//! lines kept), FireFunction's `functions` renders as empty text, and the Anthropic route
//! accepts empty `messages`, keeps earlier thinking, and answers image blocks with a clear error.

use serde_json::json;

use super::client::post;
use super::server::{Server, model, temp_dir};

#[test]
fn serve_gbnf_grammar_and_post_sampling_probs() {
    let m = model();
    let s = Server::start("llama-gaps-grammar", &["-m", &m, "-c", "256"]);
    let chat = |grammar: &str| {
        post(
            s.addr,
            "/v1/chat/completions",
            &json!({
                "max_tokens": 6,
                "messages": [{"role": "user", "content": "Does not matter what I say, does it?"}],
                "grammar": grammar,
            }),
            &[],
        )
    };
    for (grammar, want) in [
        (r#"root ::= "a"{5,5}"#, "aaaaa"),
        (r#"root ::= "ab"{2}"#, "abab"),
        ("root ::= x{1,}\nx ::= \"b\" # trailing comment\n", "bbbbbb"),
    ] {
        let r = chat(grammar);
        assert_eq!(r.status, 200, "{grammar}: {}", r.text());
        let content = r.json()["choices"][0]["message"]["content"].clone();
        if grammar.contains("x{1,}") {
            let c = content.as_str().unwrap_or_default();
            assert!(!c.is_empty() && c.chars().all(|c| c == 'b'), "{content}");
        } else {
            assert_eq!(content, want, "{grammar}");
        }
    }
    for bad in [
        "root ::= this is (not valid GBNF",
        r#"root ::= "a"{100000}"#,
        r#"root ::= "a"{3,1}"#,
        "root ::= x\nx ::= \"(\" x \")\" | \"\"",
    ] {
        let r = chat(bad);
        assert_eq!(r.status, 400, "{bad}: {}", r.text());
        assert_eq!(r.json()["error"]["param"], "grammar", "{bad}");
    }
    // Probabilities after the sampler chain: llama-server's field names, none of them zero,
    // summing to one when fewer than asked are left.
    let r = post(
        s.addr,
        "/completion",
        &json!({
            "prompt": "Today was the day. Today I would finally become a",
            "n_probs": 10, "temperature": 1.0, "n_predict": 5, "post_sampling_probs": true,
        }),
        &[],
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let probs = r.json()["completion_probabilities"].clone();
    let probs = probs.as_array().expect("a list");
    assert_eq!(probs.len(), 5);
    for tok in probs {
        let p = tok["prob"].as_f64().expect("prob");
        assert!(p > 0.0 && p <= 1.0, "{tok}");
        assert!(tok.get("logprob").is_none(), "{tok}");
        let top = tok["top_probs"].as_array().expect("top_probs");
        assert!(!top.is_empty() && top.len() <= 10, "{tok}");
        let sum: f64 = top.iter().map(|t| t["prob"].as_f64().expect("prob")).sum();
        assert!(top.iter().all(|t| t["prob"].as_f64() > Some(0.0)), "{tok}");
        assert!(sum <= 1.0 + 1e-6, "{tok}");
        if top.len() < 10 {
            assert!((sum - 1.0).abs() < 1e-4, "{tok}");
        }
        assert!(top.iter().any(|t| t["id"] == tok["id"]), "{tok}");
    }
    // Greedy: the pick had probability one.
    let r = post(
        s.addr,
        "/completion",
        &json!({"prompt": "Once upon", "n_probs": 3, "temperature": 0, "n_predict": 2,
                "post_sampling_probs": true}),
        &[],
    );
    let probs = r.json()["completion_probabilities"].clone();
    assert_eq!(probs[0]["prob"], 1.0, "{probs}");
}

#[test]
fn serve_prefill_template_vars_and_anthropic_blocks() {
    let m = model();
    let dir = temp_dir("llama-gaps-prefill");
    // A template that trims contents (as Llama 3.1's) and reads FireFunction's variables.
    let tpl = dir.join("trim.jinja");
    std::fs::write(
        &tpl,
        "{{ 'Available:' + functions + '; today ' + datetime + '\n' }}\
         {% for m in messages %}<{{ m.role }}>{{ m.reasoning_content or '' }}{{ m.content | trim }}</{{ m.role }}>{% endfor %}\
         {% if add_generation_prompt %}<assistant>{% endif %}",
    )
    .expect("template");
    let s = Server::start(
        "llama-gaps-prefill",
        &[
            "-m",
            &m,
            "-c",
            "512",
            "--chat-template-file",
            tpl.to_str().expect("utf-8"),
        ],
    );
    let prompt = |messages: serde_json::Value| {
        let r = post(
            s.addr,
            "/apply-template",
            &json!({"messages": messages}),
            &[],
        );
        assert_eq!(r.status, 200, "{}", r.text());
        r.json()["prompt"].as_str().expect("prompt").to_string()
    };
    let user = json!({"role": "user", "content": "What is the best book"});
    let parts = json!([{"type": "text", "text": "Wh"}, {"type": "text", "text": "ill"}]);
    let p = prompt(json!([user, {"role": "assistant", "content": parts}]));
    assert!(p.ends_with("Wh\n\nill"), "{p:?}");
    let p = prompt(json!([user, {"role": "assistant", "content": "Once\n\n"}]));
    assert!(
        p.ends_with("</user><assistant>Once\n\n"),
        "the prefill is continued verbatim: {p:?}"
    );
    assert!(p.starts_with("Available:; today "), "{p:?}");
    let today = memoria_model::chat::strftime_utc_now("%b %d %Y");
    assert!(p.contains(&today), "{p:?}");

    // Anthropic: empty messages are answered, thinking counts, images are refused clearly.
    let r = post(
        s.addr,
        "/v1/messages",
        &json!({"model": "test", "max_tokens": 4, "messages": []}),
        &[],
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["type"], "message");
    let history = |thinking: bool| {
        let mut blocks = vec![json!({"type": "tool_use", "id": "c1", "name": "ls", "input": {}})];
        if thinking {
            blocks.insert(
                0,
                json!({"type": "thinking", "thinking": "Look around first."}),
            );
        }
        json!([
            {"role": "user", "content": "Fix the bug"},
            {"role": "assistant", "content": blocks},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "a.py"}]},
        ])
    };
    let count = |thinking: bool| {
        let r = post(
            s.addr,
            "/v1/messages/count_tokens",
            &json!({"model": "test", "messages": history(thinking),
                    "tools": [{"name": "ls", "input_schema": {"type": "object"}}]}),
            &[],
        );
        assert_eq!(r.status, 200, "{}", r.text());
        r.json()["input_tokens"].as_u64().expect("count")
    };
    assert!(count(true) > count(false));
    let image = json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}});
    for content in [
        json!([image, {"type": "text", "text": "What is this?"}]),
        json!([{"type": "tool_result", "tool_use_id": "t", "content": [image]}]),
    ] {
        let r = post(
            s.addr,
            "/v1/messages",
            &json!({"model": "test", "max_tokens": 4,
                    "messages": [{"role": "user", "content": content}]}),
            &[],
        );
        assert_eq!(r.status, 500, "{}", r.text());
        let msg = r.json()["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_lowercase();
        assert!(msg.contains("image input is not supported"), "{msg}");
    }
}
