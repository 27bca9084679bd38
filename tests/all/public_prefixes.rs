//! Public prefixes across isolated namespaces, through `memoria serve`: two isolated
//! namespaces declaring the same system prompt hold one copy of its blocks and hit each other's
//! only there (a suffix guessed token for token hits nothing past the declared prefix); a third
//! isolated namespace without the declaration shares nothing; a public-prefix hit generates
//! exactly what the cold run did. Both prompt forms are covered: the declared text as a chat
//! system message (`/v1/chat/completions`) and as the start of a raw prompt (`/v1/completions`).

use serde_json::{Value, json};

use crate::serve::client::{get, post};
use crate::serve::server::{Server, model, temp_dir};

/// Block size of the test server.
const B: u64 = 16;

const SYSTEM: &str = "You are a helpful support assistant for the little town library. \
    You answer questions about books, opening hours, library cards and the reading club. \
    Be kind, be short, and never make up a book that does not exist. When a child asks about \
    a story, tell them where to find it on the shelves and suggest one more story they may like.";

fn server(name: &str) -> Server {
    let dir = temp_dir(name);
    let cfg = dir.join("host.toml");
    let file = dir.join("system.txt");
    std::fs::write(&file, SYSTEM).expect("prefix file");
    let toml_text = format!(
        "[server]\nadmin_key = \"admin-key-for-tests\"\n\n[cache]\nblock_tokens = {B}\n\n\
         [namespaces.alpha]\nisolation = \"isolated\"\napi_keys = [\"alpha-key-0001\"]\npublic_prefixes = [{SYSTEM:?}]\n\n\
         [namespaces.beta]\nisolation = \"isolated\"\napi_keys = [\"beta-key-00001\"]\npublic_prefixes = [\"Another declared text.\", {{file = {:?}}}]\n\n\
         [namespaces.gamma]\nisolation = \"isolated\"\napi_keys = [\"gamma-key-0001\"]\n",
        file.display().to_string()
    );
    std::fs::write(&cfg, toml_text).expect("config");
    Server::start(
        name,
        &["-m", &model(), "--config", cfg.to_str().expect("utf-8")],
    )
}

fn key(ns: &str) -> String {
    match ns {
        "alpha" => "Bearer alpha-key-0001".into(),
        "beta" => "Bearer beta-key-00001".into(),
        _ => "Bearer gamma-key-0001".into(),
    }
}

/// (content, prompt tokens, cached tokens) of a greedy chat completion.
fn chat(s: &Server, ns: &str, user: &str) -> (String, u64, u64) {
    let body = json!({
        "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}],
        "max_tokens": 12, "temperature": 0,
    });
    let r = post(
        s.addr,
        "/v1/chat/completions",
        &body,
        &[("Authorization", &key(ns))],
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    let content = v["choices"][0]["message"]["content"]
        .as_str()
        .expect("content");
    (content.to_string(), prompt_tokens(&v), cached(&v))
}

/// (text, prompt tokens, cached tokens) of a greedy completion.
fn complete(s: &Server, ns: &str, prompt: &str) -> (String, u64, u64) {
    let body = json!({"prompt": prompt, "max_tokens": 12, "temperature": 0});
    let r = post(
        s.addr,
        "/v1/completions",
        &body,
        &[("Authorization", &key(ns))],
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    let text = v["choices"][0]["text"].as_str().expect("text");
    (text.to_string(), prompt_tokens(&v), cached(&v))
}

fn prompt_tokens(v: &Value) -> u64 {
    v["usage"]["prompt_tokens"].as_u64().expect("prompt_tokens")
}

fn cached(v: &Value) -> u64 {
    v["usage"]["prompt_tokens_details"]["cached_tokens"]
        .as_u64()
        .expect("cached_tokens")
}

/// Blocks (in use + cached) attributed to `ns` in `/stats`, read once the last request's
/// session has closed (a close moves blocks from used to cached, one counter after the other,
/// so a read during it could miss one).
fn blocks(s: &Server, ns: &str) -> u64 {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let r = get(
            s.addr,
            "/stats",
            &[("Authorization", "Bearer admin-key-for-tests")],
        );
        assert_eq!(r.status, 200, "{}", r.text());
        let v = r.json();
        let open = v["pool"]["sequences"].as_u64().unwrap_or(0);
        if open == 0 || std::time::Instant::now() > deadline {
            let n = &v["namespaces"][ns];
            return n["blocks_used"].as_u64().unwrap_or(0)
                + n["blocks_cached"].as_u64().unwrap_or(0);
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

#[test]
fn public_prefix_chat_system_prompt_is_shared_once_and_nothing_else() {
    let s = server("public-chat");
    let user = "Where can I find the story about the little red ball?";
    let (cold, prompt, hit) = chat(&s, "alpha", user);
    assert_eq!(hit, 0, "the first request computes everything");
    let public = blocks(&s, "(public)");
    // The system turn (template header, the text, its end, the user header) is > 60 tokens.
    assert!(public >= 4, "public blocks {public}, prompt {prompt}");
    assert!(public * B < prompt, "the user's message stays private");
    let alpha_private = blocks(&s, "alpha");
    assert!(alpha_private > 0);

    // beta sends alpha's conversation token for token: only the public blocks hit, and what it
    // generates from them equals alpha's cold run.
    let (warm, prompt_b, hit_b) = chat(&s, "beta", user);
    assert_eq!(prompt_b, prompt);
    assert_eq!(
        hit_b,
        public * B,
        "exactly the public blocks, none of alpha's suffix"
    );
    assert_eq!(
        warm, cold,
        "a public-prefix hit generates what the cold run did"
    );
    assert_eq!(
        blocks(&s, "(public)"),
        public,
        "one copy of the public blocks"
    );
    assert_eq!(
        blocks(&s, "alpha"),
        alpha_private,
        "beta added nothing to alpha's"
    );

    // A namespace without the declaration shares nothing, not even the system prompt.
    let (plain, _, hit_c) = chat(&s, "gamma", user);
    assert_eq!(hit_c, 0);
    assert_eq!(plain, cold);
    assert_eq!(blocks(&s, "(public)"), public);

    // alpha's own private blocks are still its own to hit.
    let (again, _, hit_a) = chat(&s, "alpha", user);
    assert!(hit_a > public * B, "alpha hits its own suffix ({hit_a})");
    assert_eq!(again, cold);
}

#[test]
fn public_prefix_raw_prompt_form_and_guessed_suffix() {
    let s = server("public-raw");
    let secret = format!("{SYSTEM} Member 4471 asked to renew the card of Lily Smith.");
    let (cold, _, hit) = complete(&s, "beta", &secret);
    assert_eq!(hit, 0);
    let public = blocks(&s, "(public)");
    assert!(public >= 3, "public blocks {public}");
    // alpha guesses beta's whole prompt: it hits the declared text's blocks, never beyond.
    let (warm, _, hit_a) = complete(&s, "alpha", &secret);
    assert_eq!(hit_a, public * B);
    assert_eq!(warm, cold);
    // gamma (no declaration) gets nothing; beta hits its own suffix.
    assert_eq!(complete(&s, "gamma", &secret).2, 0);
    assert!(complete(&s, "beta", &secret).2 > public * B);
    assert_eq!(blocks(&s, "(public)"), public);
}
