//! The smaller reproduction "`/stats` shows `queue_depth` 1 when idle" (the session cap's
//! 429 is checked in memoria-http's `error.rs` tests, since a single HTTP request cannot hold a
//! session open).

use serde_json::json;

use super::client::post;
use super::server::{Server, model};
use super::{eventually, stats};

#[test]
fn serve_stats_shows_queue_depth_1_when_idle() {
    let s = Server::start("idle-queue", &["-m", &model()]);
    for _ in 0..3 {
        let r = post(
            s.addr,
            "/v1/completions",
            &json!({"prompt": "Once upon a time", "max_tokens": 8}),
            &[],
        );
        assert_eq!(r.status, 200, "{}", r.text());
    }
    assert!(
        stats(&s)["engine"]["steps"].as_u64().is_some_and(|n| n > 0),
        "{}",
        stats(&s)["engine"]
    );
    assert!(
        eventually(100, || stats(&s)["engine"]["queue_depth"] == json!(0)),
        "an idle engine reports a queue: {}",
        stats(&s)["engine"]
    );
}

/// A one-shot chat completion takes one engine round trip (open with the prompt) and one
/// send (its generation), whatever the server does around it.
#[test]
fn serve_a_one_shot_chat_completion_is_one_engine_round_trip() {
    let s = Server::start("one-round-trip", &["-m", &model()]);
    let body = json!({
        "messages": [{"role": "user", "content": "Once upon a time"}],
        "max_tokens": 4
    });
    // The first request settles anything the server does once.
    assert_eq!(post(s.addr, "/v1/chat/completions", &body, &[]).status, 200);
    assert!(eventually(100, || stats(&s)["engine"]["sessions"] == json!(0)));
    let commands = || stats(&s)["engine"]["commands"].as_u64().expect("commands");
    let before = commands();
    let r = post(s.addr, "/v1/chat/completions", &body, &[]);
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(eventually(100, || stats(&s)["engine"]["sessions"] == json!(0)));
    assert_eq!(
        commands() - before,
        2,
        "open-with-prompt and generate: {}",
        stats(&s)["engine"]
    );
    assert_eq!(stats(&s)["engine"]["store_work_in_step"], json!(0));
}
