//! Speculative decoding through the API: every generation endpoint answers the same text with
//! `"speculation": "off"` as without it (drafting on by default), streamed or not, greedy and
//! sampled with a seed; llama-server's `timings` report `draft_n` and `draft_n_accepted`;
//! `/stats` and `/metrics` count drafts per namespace; a bad value is a clear 400.

use serde_json::{Value, json};

use super::client::{Stream, get, post};
use super::server::{Server, model};
use super::stats;
use crate::shared;

/// SmolLM2 (a chat model) where it is on this machine, else the tiny story model.
fn chat_model() -> String {
    let p = shared::path("models/SmolLM2-135M-Instruct.Q4_1.gguf");
    if p.exists() {
        p.to_str().expect("utf-8 path").to_string()
    } else {
        model()
    }
}

/// Requests that invite copying: a code edit, a quote, an agent's next tool call; and a story.
fn messages() -> Vec<String> {
    let code = "def area(width, height):\n    return width * height\n\n\
                def perimeter(width, height):\n    return 2 * (width + height)\n";
    let text = "The harbour wall was finished in 1751 after nine years of work. The railway \
                reached the town in 1869. The promenade was built in 1931.";
    vec![
        format!("Rename `width` to `w` in this code and output all of it:\n{code}"),
        format!("{text}\nQuote the sentence about the railway word for word."),
        "Calls so far:\n{\"tool\": \"weather\", \"city\": \"Paris\"}\n\
         {\"tool\": \"weather\", \"city\": \"Rome\"}\nEmit the calls for Oslo and Lima."
            .to_string(),
        "Write a story about a dog.".to_string(),
    ]
}

/// The answer's text on each endpoint.
fn text(path: &str, v: &Value) -> String {
    let s = match path {
        "/v1/chat/completions" => &v["choices"][0]["message"]["content"],
        "/v1/completions" => &v["choices"][0]["text"],
        "/completion" => &v["content"],
        "/v1/messages" => &v["content"][0]["text"],
        _ => &v["output"][0]["content"][0]["text"],
    };
    s.as_str()
        .unwrap_or_else(|| panic!("{path}: no text in {v}"))
        .to_string()
}

fn body(path: &str, message: &str, temperature: f64, off: bool) -> Value {
    let mut b = match path {
        "/v1/completions" | "/completion" => json!({"prompt": message, "max_tokens": 40}),
        "/v1/responses" => json!({"input": message, "max_output_tokens": 40}),
        _ => json!({"messages": [{"role": "user", "content": message}], "max_tokens": 40}),
    };
    b["temperature"] = temperature.into();
    b["seed"] = 7.into();
    if off {
        b["speculation"] = "off".into();
    }
    b
}

#[test]
fn serve_speculation_changes_no_answer_on_any_endpoint() {
    let s = Server::start("speculation", &["-m", &chat_model()]);
    let paths = [
        "/v1/chat/completions",
        "/v1/completions",
        "/completion",
        "/v1/messages",
        "/v1/responses",
    ];
    for message in messages() {
        for path in paths {
            for temperature in [0.0, 0.7] {
                let answer = |off| {
                    let r = post(s.addr, path, &body(path, &message, temperature, off), &[]);
                    assert_eq!(r.status, 200, "{path}: {}", r.text());
                    r.json()
                };
                let (plain, fast) = (answer(true), answer(false));
                assert_eq!(
                    text(path, &fast),
                    text(path, &plain),
                    "{path} at temperature {temperature}: {message:?}"
                );
                if path == "/completion" {
                    assert!(plain["timings"].get("draft_n").is_none(), "{plain}");
                }
            }
        }
        // Streamed: the same text, token by token as verified.
        let mut b = body("/v1/completions", &message, 0.0, false);
        b["stream"] = true.into();
        let mut st = Stream::open(s.addr, "/v1/completions", &b, &[]);
        assert_eq!(st.status, 200);
        let mut streamed = String::new();
        while let Some(ev) = st.next_event() {
            if ev == "[DONE]" {
                break;
            }
            let v: Value = serde_json::from_str(&ev).expect("chunk");
            streamed.push_str(v["choices"][0]["text"].as_str().unwrap_or(""));
        }
        let plain = post(
            s.addr,
            "/v1/completions",
            &body("/v1/completions", &message, 0.0, true),
            &[],
        );
        assert_eq!(streamed, text("/v1/completions", &plain.json()));
    }
    // The drafts are counted, per namespace and in llama-server's timings.
    let spec = &stats(&s)["speculation"];
    let shared = &spec["namespaces"]["shared"];
    let (drafted, accepted) = (&shared["drafted"], &shared["accepted"]);
    assert!(
        drafted.as_u64().is_some_and(|d| d > 0) && accepted.as_u64().is_some_and(|a| a > 0),
        "{spec}"
    );
    assert!(
        shared["tokens_per_pass"].as_f64().is_some_and(|t| t > 1.0),
        "{spec}"
    );
    // What a row costs, measured from the server's own passes.
    assert!(
        spec["row_cost"]
            .as_f64()
            .is_some_and(|c| c > 0.0 && c <= 1.0),
        "{spec}"
    );
    let m = get(s.addr, "/metrics", &[]).text();
    let line =
        format!("memoria_speculation_drafted_tokens_total{{namespace=\"shared\"}} {drafted}");
    assert!(m.contains(&line), "{line} not in /metrics");
    let repeat = "one two three four five six seven eight nine ten. ".repeat(4);
    let r = post(
        s.addr,
        "/completion",
        &json!({"prompt": repeat, "n_predict": 24, "temperature": 0}),
        &[],
    );
    let t = &r.json()["timings"];
    assert!(
        t["draft_n"].as_u64().is_some_and(|d| d > 0)
            && t["draft_n_accepted"].as_u64().is_some_and(|a| a > 0),
        "{t}"
    );
    // A value other than auto or off is refused with the field's name.
    let r = post(
        s.addr,
        "/v1/chat/completions",
        &json!({"messages": [{"role": "user", "content": "hi"}], "speculation": "fast"}),
        &[],
    );
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("speculation"), "{}", r.text());
}

#[test]
fn serve_speculation_keeps_constraints_logprobs_and_choices() {
    let s = Server::start("speculation-features", &["-m", &chat_model()]);
    let schema = json!({"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 12},
        "items": {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": 6}
    }, "required": ["name", "items"]});
    let base = json!({
        "messages": [{"role": "user", "content":
            "List the items a b c a b c a b c as JSON with the name abcabc."}],
        "max_tokens": 60, "temperature": 0.7, "seed": 3, "n": 2,
        "logprobs": true, "top_logprobs": 2,
        "response_format": {"type": "json_schema", "json_schema": {"name": "l", "schema": schema}},
        "stop": ["\n\n"],
    });
    let answer = |off: bool| {
        let mut b = base.clone();
        if off {
            b["speculation"] = "off".into();
        }
        let r = post(s.addr, "/v1/chat/completions", &b, &[]);
        assert_eq!(r.status, 200, "{}", r.text());
        r.json()
    };
    let (plain, fast) = (answer(true), answer(false));
    for i in 0..2 {
        let (p, f) = (&plain["choices"][i], &fast["choices"][i]);
        assert_eq!(
            f["message"]["content"], p["message"]["content"],
            "choice {i}"
        );
        assert_eq!(
            f["logprobs"], p["logprobs"],
            "choice {i}: the verifying rows' log-probs"
        );
        assert_eq!(f["finish_reason"], p["finish_reason"]);
        let text = f["message"]["content"].as_str().expect("content");
        if f["finish_reason"] == "stop" {
            let v: Value = serde_json::from_str(text).expect("the constraint holds");
            assert!(v["items"].is_array(), "{v}");
        }
    }
}

#[test]
fn serve_spec_type_none_turns_drafting_off_for_the_default_namespace() {
    let s = Server::start("speculation-none", &["-m", &model(), "--spec-type", "none"]);
    let repeat = "one two three four five six seven eight nine ten. ".repeat(4);
    let r = post(
        s.addr,
        "/completion",
        &json!({"prompt": repeat, "n_predict": 24, "temperature": 0}),
        &[],
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.json()["timings"].get("draft_n").is_none(), "{}", r.text());
    assert_eq!(stats(&s)["speculation"]["drafted"], 0);
}
