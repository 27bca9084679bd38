//! `memoria serve` as a drop-in for llama-server and for clients written against OpenAI: any
//! model name answered by the served model (`--strict-model-name` keeps OpenAI's 404), unknown
//! fields ignored, CORS (preflight, origins, a keyed host still refusing without its key),
//! routes without `/v1`, `X-Api-Key`, short keys accepted with a warning, llama-server's flags
//! (sampling and length defaults, `--alias`, no-op GPU flags).

use serde_json::json;

use super::client::{get, post, request};
use super::server::{Server, model};

const CHAT: &str = "/v1/chat/completions";

fn chat_body(model_name: &str) -> serde_json::Value {
    json!({
        "model": model_name,
        "messages": [{"role": "user", "content": "Once upon a time"}],
        "max_tokens": 4,
    })
}

#[test]
fn serve_dropin_any_model_name_unknown_fields_and_bare_routes() {
    let m = model();
    let s = Server::start("dropin-names", &["-m", &m, "-c", "256"]);
    let r = post(s.addr, CHAT, &chat_body("gpt-3.5-turbo"), &[]);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["model"], "stories260K-f32", "{}", r.text());
    // Fields of newer OpenAI clients and of llama.cpp's are ignored; known ones keep their type.
    let mut body = chat_body("x");
    body["reasoning_effort"] = json!("low");
    body["cache_prompt"] = json!(true);
    body["timings_per_token"] = json!(false);
    let r = post(s.addr, CHAT, &body, &[]);
    assert_eq!(r.status, 200, "{}", r.text());
    body["max_tokens"] = json!("four");
    let r = post(s.addr, CHAT, &body, &[]);
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(r.json()["error"]["param"], "max_tokens", "{}", r.text());
    // The same endpoints without `/v1`.
    let r = post(s.addr, "/chat/completions", &chat_body("any"), &[]);
    assert_eq!(r.status, 200, "{}", r.text());
    let r = get(s.addr, "/models", &[]);
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["data"][0]["id"], "stories260K-f32");
    // Only the configured names are listed (the file's name is accepted, not listed).
    assert_eq!(v["data"][0]["aliases"], json!(["stories260K-f32"]), "{v}");
    // Retrieving a model by another name is still 404.
    assert_eq!(get(s.addr, "/v1/models/gpt-4o", &[]).status, 404);
    // Every finished request has an access-log line.
    assert!(
        s.stderr().contains("POST /chat/completions 200"),
        "{}",
        s.stderr()
    );
}

#[test]
fn serve_dropin_strict_model_name_keeps_openais_404() {
    let m = model();
    let s = Server::start(
        "dropin-strict",
        &["-m", &m, "-c", "256", "--strict-model-name"],
    );
    let r = post(s.addr, CHAT, &chat_body("gpt-3.5-turbo"), &[]);
    assert_eq!(r.status, 404, "{}", r.text());
    assert_eq!(r.json()["error"]["code"], "model_not_found");
    let r = post(s.addr, CHAT, &chat_body("stories260K-f32"), &[]);
    assert_eq!(r.status, 200, "{}", r.text());
    let r = post(s.addr, CHAT, &chat_body("stories260K-f32.gguf"), &[]);
    assert_eq!(r.status, 200, "the file's name: {}", r.text());
}

#[test]
fn serve_dropin_cors_on_an_open_host() {
    let m = model();
    let s = Server::start("dropin-cors", &["-m", &m, "-c", "256"]);
    let origin = "http://web.example.fr";
    let pre = request(
        s.addr,
        "OPTIONS",
        CHAT,
        &[
            ("Origin", origin),
            ("Access-Control-Request-Method", "POST"),
            (
                "Access-Control-Request-Headers",
                "authorization, content-type",
            ),
        ],
        b"",
    );
    assert_eq!(pre.status, 200, "{}", pre.text());
    assert_eq!(pre.header("access-control-allow-origin"), Some(origin));
    assert_eq!(
        pre.header("access-control-allow-headers"),
        Some("authorization, content-type")
    );
    assert!(
        pre.header("access-control-allow-methods")
            .is_some_and(|m| m.contains("POST"))
    );
    let r = post(s.addr, CHAT, &chat_body("m"), &[("Origin", origin)]);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("access-control-allow-origin"), Some(origin));
    // Without an Origin (not a browser) nothing is added.
    let r = get(s.addr, "/v1/models", &[]);
    assert_eq!(r.header("access-control-allow-origin"), None);
}

#[test]
fn serve_dropin_cors_localhost_only_and_keyed_host_refuses_without_key() {
    let m = model();
    let key = "sk-this-is-the-secret-key";
    let s = Server::start(
        "dropin-cors-key",
        &[
            "-m",
            &m,
            "-c",
            "256",
            "--api-key",
            key,
            "--cors-origins",
            "localhost",
        ],
    );
    let local = "http://localhost:3000";
    let pre = request(
        s.addr,
        "OPTIONS",
        CHAT,
        &[("Origin", local), ("Access-Control-Request-Method", "POST")],
        b"",
    );
    assert_eq!(pre.status, 200, "a preflight needs no key: {}", pre.text());
    assert_eq!(pre.header("access-control-allow-origin"), Some(local));
    let pre = request(
        s.addr,
        "OPTIONS",
        CHAT,
        &[("Origin", "http://localhost.evil.com")],
        b"",
    );
    assert_eq!(pre.header("access-control-allow-origin"), None);
    // The key is still needed: the refusal is readable by the page (CORS headers on the 401).
    let r = post(s.addr, CHAT, &chat_body("m"), &[("Origin", local)]);
    assert_eq!(r.status, 401, "{}", r.text());
    assert_eq!(r.header("access-control-allow-origin"), Some(local));
    let bearer = format!("Bearer {key}");
    let r = post(
        s.addr,
        CHAT,
        &chat_body("m"),
        &[("Origin", local), ("Authorization", &bearer)],
    );
    assert_eq!(r.status, 200, "{}", r.text());
    // Anthropic's header carries the key too.
    let r = post(s.addr, CHAT, &chat_body("m"), &[("X-Api-Key", key)]);
    assert_eq!(r.status, 200, "{}", r.text());
    let r = post(
        s.addr,
        CHAT,
        &chat_body("m"),
        &[("X-Api-Key", "wrong-key-1")],
    );
    assert_eq!(r.status, 401, "{}", r.text());
}

#[test]
fn serve_dropin_llama_server_flags() {
    let m = model();
    // A short key is accepted with a warning; GPU and batching flags are accepted and ignored;
    // `-n` and `--temp` set the defaults of requests that give none; `--alias` names the model.
    let s = Server::start(
        "dropin-flags",
        &[
            "-m",
            &m,
            "-c",
            "256",
            "-np",
            "2",
            "--api-key",
            "abc",
            "-ngl",
            "99",
            "-fa",
            "on",
            "--jinja",
            "-b",
            "512",
            "-ub",
            "512",
            "--mlock",
            "--no-cache-idle-slots",
            "--cache-ram",
            "100",
            "--backend_sampling",
            "--reasoning",
            "auto",
            "--cont-batching",
            "--metrics",
            "-n",
            "5",
            "--temp",
            "0",
            "--seed",
            "42",
            "--top-k",
            "40",
            "--alias",
            "tinyllama-2,fim,code",
            "--tags",
            "chat,small",
        ],
    );
    assert!(
        s.stderr().contains("warning") && s.stderr().contains("fewer than 8 characters"),
        "{}",
        s.stderr()
    );
    let auth = [("Authorization", "Bearer abc")];
    let body = json!({"prompt": "Once upon a time"});
    let a = post(s.addr, "/v1/completions", &body, &auth);
    assert_eq!(a.status, 200, "{}", a.text());
    let a = a.json();
    assert_eq!(a["usage"]["completion_tokens"], 5, "{a}");
    assert_eq!(a["model"], "code", "{a}");
    let b = post(s.addr, "/v1/completions", &body, &auth).json();
    assert_eq!(
        a["choices"][0]["text"], b["choices"][0]["text"],
        "--temp 0 is greedy"
    );
    let v = get(s.addr, "/v1/models", &auth).json();
    // Exactly the `--alias` names (llama-server's test_server_model_aliases_and_tags).
    let mut aliases: Vec<&str> = v["data"][0]["aliases"]
        .as_array()
        .expect("aliases")
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    aliases.sort_unstable();
    assert_eq!(aliases, ["code", "fim", "tinyllama-2"], "{v}");
    assert_eq!(v["data"][0]["tags"], json!(["chat", "small"]), "{v}");
}
