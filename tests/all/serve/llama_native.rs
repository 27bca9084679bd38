//! What llama.cpp's server test suite checks of llama-server's own behaviour, pinned here:
//! a too-long prompt answers `exceed_context_size_error` with both figures, `/completion`
//! takes a prompt object and mixed prompt lists and an object `logit_bias` keyed by text, an
//! answer that fills the context is `truncated`, `/chat/completions/input_tokens` counts a
//! conversation, `--metrics` adds the `llamacpp:*` families and `Process-Start-Time-Unix`,
//! `timings` rates exclude the first token, conversations that cannot be continued are 400,
//! `verbose` shows the rendered prompt,
//! Vertex AI's `/predict` (with `AIP_MODE=PREDICTION`) answers each instance, and
//! `--host a,b` listens on both addresses.

use serde_json::{Value, json};

use super::client::{get, post};
use super::server::{Server, model};

fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in\n{text}"))
}

#[test]
fn serve_llama_native_requests_and_errors() {
    let m = model();
    let s = Server::start("llama-native", &["-m", &m, "-c", "256", "--temp", "0"]);
    // A prompt past the context: llama-server's type and figures, OpenAI's code.
    let long = "the quick brown fox jumps over the lazy dog ".repeat(40);
    for path in ["/completion", "/v1/chat/completions"] {
        let body = json!({"prompt": long, "messages": [{"role": "user", "content": long}]});
        let r = post(s.addr, path, &body, &[]);
        assert_eq!(r.status, 400, "{path}: {}", r.text());
        let e = &r.json()["error"];
        assert_eq!(e["type"], "exceed_context_size_error", "{path}: {e}");
        assert_eq!(e["n_ctx"], 256, "{e}");
        assert!(
            e["n_prompt_tokens"].as_u64().is_some_and(|n| n > 256),
            "{e}"
        );
        assert!(
            e["message"]
                .as_str()
                .is_some_and(|m| m.contains("exceeds the available context size")),
            "{e}"
        );
    }
    // Prompt forms: an object with `prompt_string`, ids, text and a mix in one list.
    let text = "I believe the meaning of life is";
    let ids = post(
        s.addr,
        "/tokenize",
        &json!({"content": text, "add_special": true}),
        &[],
    )
    .json()["tokens"]
        .clone();
    let one = |prompt: Value| {
        let r = post(
            s.addr,
            "/completion",
            &json!({"prompt": prompt, "n_predict": 4}),
            &[],
        );
        assert_eq!(r.status, 200, "{}", r.text());
        r.json()
    };
    let by_text = one(json!(text));
    let by_object = one(json!({"prompt_string": text}));
    assert_eq!(by_object["content"], by_text["content"]);
    let both = one(json!([ids.clone(), {"prompt_string": text}]));
    assert_eq!(both.as_array().map(Vec::len), Some(2), "{both}");
    assert_eq!(both[0]["content"], both[1]["content"], "{both}");
    let media = json!({"prompt": {"prompt_string": text, "multimodal_data": ["aGk="]}});
    let r = post(s.addr, "/completion", &media, &[]);
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(r.json()["error"]["param"], "prompt");
    // Settings llama.cpp reports (adaptive-p off), and `truncated` only when the context fills.
    let gs = &by_text["generation_settings"];
    assert_eq!(gs["adaptive_target"], -1.0, "{gs}");
    assert!(gs["adaptive_decay"].is_number(), "{gs}");
    assert_eq!(by_text["truncated"], false);
    let full = one(json!("Hi how are you"));
    assert_eq!(full["truncated"], false, "n_predict 4 leaves room");
    let r = post(
        s.addr,
        "/completion",
        &json!({"prompt": "Hi", "ignore_eos": true}),
        &[],
    );
    let v = r.json();
    assert_eq!(v["truncated"], true, "{v}");
    assert_eq!(
        v["timings"]["prompt_n"].as_u64().unwrap_or(0)
            + v["timings"]["cache_n"].as_u64().unwrap_or(0)
            + v["tokens_predicted"].as_u64().unwrap_or(0),
        256,
        "{v}"
    );
    // An object `logit_bias` keyed by a token's id bans that token; keyed by a text, every
    // token of the text's tokenization (as llama-server tokenizes it).
    let complete = |bias: Value| {
        let body = json!({"prompt": "Once upon a time", "n_predict": 4, "return_tokens": true,
            "logit_bias": bias});
        let r = post(s.addr, "/completion", &body, &[]);
        assert_eq!(r.status, 200, "{}", r.text());
        let v = r.json();
        let tokens: Vec<u64> = v["tokens"]
            .as_array()
            .expect("tokens")
            .iter()
            .filter_map(Value::as_u64)
            .collect();
        assert!(!tokens.is_empty(), "{v}");
        (v["content"].as_str().expect("content").to_string(), tokens)
    };
    let (content, greedy_tokens) = complete(json!({}));
    let first = greedy_tokens[0];
    let (_, banned) = complete(json!({first.to_string(): false}));
    assert_ne!(banned[0], first, "the banned id is not generated");
    let r = post(s.addr, "/tokenize", &json!({"content": content}), &[]);
    let text_ids: Vec<u64> = r.json()["tokens"]
        .as_array()
        .expect("tokens")
        .iter()
        .filter_map(Value::as_u64)
        .collect();
    let (_, got) = complete(json!({content.clone(): false}));
    assert!(
        got.iter().all(|t| !text_ids.contains(t)),
        "{content:?} banned {text_ids:?}, generated {got:?}"
    );

    // A conversation's prompt tokens, counted and not run.
    let chat = json!({"messages": [{"role": "system", "content": "Book"},
        {"role": "user", "content": "What is the best book"}]});
    let r = post(s.addr, "/chat/completions/input_tokens", &chat, &[]);
    assert_eq!(r.status, 200, "{}", r.text());
    let n = r.json()["input_tokens"].as_u64().expect("input_tokens");
    let mut run = chat.clone();
    run["max_tokens"] = json!(1);
    let usage = post(s.addr, "/v1/chat/completions", &run, &[]).json()["usage"].clone();
    assert_eq!(usage["prompt_tokens"].as_u64(), Some(n), "{usage}");
    // `verbose`: the prompt as the model sees it, special tokens written.
    run["verbose"] = json!(true);
    let v = post(s.addr, "/v1/chat/completions", &run, &[]).json();
    let prompt = v["__verbose"]["prompt"].as_str().unwrap_or_default();
    assert!(
        prompt.contains("Book") && prompt.contains("What is the best book"),
        "{v}"
    );
    run["verbose"] = json!(false);
    let v = post(s.addr, "/v1/chat/completions", &run, &[]).json();
    assert!(v.get("__verbose").is_none(), "{v}");
    // Conversations llama-server refuses.
    let msgs = |roles: &[&str]| -> Value {
        roles
            .iter()
            .map(|r| json!({"role": r, "content": "x"}))
            .collect()
    };
    let two = json!({"messages": msgs(&["user", "assistant", "assistant"])});
    let r = post(s.addr, "/v1/chat/completions", &two, &[]);
    assert_eq!(r.status, 400, "{}", r.text());
    let both = json!({"messages": msgs(&["user", "assistant"]),
        "add_generation_prompt": true, "continue_final_message": true});
    let r = post(s.addr, "/v1/chat/completions", &both, &[]);
    assert_eq!(r.status, 400, "{}", r.text());
    // Without --metrics, /metrics has memoria's families only.
    let r = get(s.addr, "/metrics", &[]);
    assert!(r.header("process-start-time-unix").is_some());
    assert!(
        !r.text().contains("llamacpp:"),
        "no llamacpp families without --metrics"
    );
}

#[test]
fn serve_llama_metrics_timings_and_predict() {
    let m = model();
    let s = Server::start_with_env(
        "llama-metrics",
        &["-m", &m, "-c", "256", "--metrics", "--temp", "0"],
        &[("AIP_MODE", "PREDICTION")],
    );
    let mut predicted = 0;
    let mut prompt_n = 0;
    for n in [1, 4, 16] {
        let r = post(
            s.addr,
            "/completion",
            &json!({"prompt": "I believe", "n_predict": n, "ignore_eos": true}),
            &[],
        );
        let t = r.json()["timings"].clone();
        assert_eq!(t["predicted_n"], n, "{t}");
        if n == 1 {
            assert_eq!(
                t["predicted_per_second"], 0.0,
                "one token costs no decode step: {t}"
            );
        } else {
            let ms = t["predicted_ms"].as_f64().expect("ms");
            let rate = t["predicted_per_second"].as_f64().expect("rate");
            assert!((rate - 1e3 / ms * (n - 1) as f64).abs() < 1e-6, "{t}");
        }
        predicted += n;
        prompt_n += t["prompt_n"].as_u64().expect("prompt_n");
    }
    let r = get(s.addr, "/metrics", &[]);
    let started: u64 = r
        .header("process-start-time-unix")
        .and_then(|v| v.parse().ok())
        .expect("Process-Start-Time-Unix");
    assert!(started > 1_600_000_000);
    let text = r.text();
    assert_eq!(
        metric(&text, "llamacpp:tokens_predicted_total"),
        f64::from(predicted)
    );
    assert_eq!(
        metric(&text, "llamacpp:prompt_tokens_total"),
        prompt_n as f64
    );
    assert!(metric(&text, "llamacpp:n_decode_total") > 0.0);
    assert_eq!(metric(&text, "llamacpp:requests_processing"), 0.0);
    assert!(text.contains("# TYPE llamacpp:prompt_tokens_seconds gauge"));

    // Vertex AI's route: each instance answered by the endpoint it names.
    let body = json!({"instances": [
        {"@requestFormat": "chatCompletions", "max_tokens": 2, "stream": true,
         "messages": [{"role": "user", "content": "Say hello"}]},
        {"@requestFormat": "/completion", "prompt": "Once", "n_predict": 2},
        {"@requestFormat": "nothing"},
    ]});
    let r = post(s.addr, "/predict", &body, &[]);
    assert_eq!(r.status, 200, "{}", r.text());
    let p = r.json()["predictions"].clone();
    assert_eq!(p[0]["choices"][0]["message"]["role"], "assistant", "{p}");
    assert!(p[1]["content"].is_string(), "{p}");
    assert_eq!(p[2]["error"]["code"], 400, "{p}");
    let r = post(s.addr, "/predict", &json!({"instances": 3}), &[]);
    assert_eq!(r.status, 400, "{}", r.text());
}

#[test]
fn serve_predict_route_is_off_without_aip_mode() {
    let s = Server::start("llama-no-predict", &["-m", &model(), "-c", "256"]);
    let r = post(s.addr, "/predict", &json!({"instances": []}), &[]);
    assert_eq!(r.status, 404, "{}", r.text());
}

#[test]
fn serve_listens_on_every_address_of_host() {
    use std::io::{BufRead, BufReader};
    let mut child = crate::bin::command()
        .args([
            "serve",
            "-m",
            &model(),
            "-c",
            "256",
            "-t",
            "1",
            "--port",
            "0",
        ])
        .args([
            "--host",
            "127.0.0.1,127.0.0.2",
            "--api-key",
            "test-multiple",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn memoria serve");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut addrs: Vec<std::net::SocketAddr> = Vec::new();
    for _ in 0..2 {
        let mut line = String::new();
        out.read_line(&mut line).expect("a listening line");
        if let Some(a) = line.trim().strip_prefix("memoria: listening on http://") {
            addrs.push(a.parse().expect("address"));
        }
    }
    let answered: Vec<(u16, u16)> = addrs
        .iter()
        .map(|&a| {
            let open = get(a, "/health", &[]).status;
            let keyed = post(a, "/v1/completions", &json!({}), &[]).status;
            (open, keyed)
        })
        .collect();
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(addrs.len(), 2, "{addrs:?}");
    assert_eq!(addrs[0].port(), addrs[1].port(), "one port: {addrs:?}");
    assert_eq!(answered, [(200, 401), (200, 401)], "{addrs:?}");
}
