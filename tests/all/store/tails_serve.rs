//! A retained partial tail through `memoria serve --store`: kept on disk at shutdown, reused by
//! the restarted server for the same prompt (every token but the last cached, as when hot), and
//! counted as a disk tail hit in `/stats` (`tiers.disk.tail_hits`) and `/metrics`
//! (`memoria_store_tail_hits_total`).

use serde_json::{Value, json};

use super::rewarm::{ADMIN, n, start, stats, stop};
use crate::serve::client::{get, post};
use crate::serve::server::{Server, temp_dir};

/// A prompt that ends inside a block with the test model (the test checks it).
const PROMPT: &str = "Once upon a time there was a little girl named Lily who loved to play \
                      outside in the sunshine with her dog and her friends every single day, \
                      rain or shine";

/// One greedy one-token completion of [`PROMPT`]: (text, prompt tokens, cached prompt tokens).
fn complete_one(s: &Server) -> (String, u64, u64) {
    let body = json!({"prompt": PROMPT, "max_tokens": 1, "temperature": 0});
    let r = post(s.addr, "/v1/completions", &body, &[]);
    assert_eq!(r.status, 200, "{}", r.text());
    let v: Value = r.json();
    (
        v["choices"][0]["text"].as_str().expect("text").to_string(),
        n(&v["usage"]["prompt_tokens"]),
        n(&v["usage"]["prompt_tokens_details"]["cached_tokens"]),
    )
}

fn tail_hits_metric(s: &Server) -> u64 {
    let m = get(
        s.addr,
        "/metrics",
        &[("Authorization", &format!("Bearer {ADMIN}"))],
    )
    .text();
    m.lines()
        .find_map(|l| l.strip_prefix("memoria_store_tail_hits_total{tier=\"disk\"} "))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no disk memoria_store_tail_hits_total in\n{m}"))
}

#[test]
fn store_serve_reuses_a_tail_kept_on_disk_and_reports_the_tail_hit() {
    let dir = temp_dir("tail-serve");
    let store = dir.join("store");
    let _ = std::fs::remove_dir_all(&store);
    let cfg = dir.join("host.toml");
    std::fs::write(&cfg, format!("[server]\nadmin_key = \"{ADMIN}\"\n")).expect("config");
    let s = start("tail-serve-1", &cfg, &store);
    let (first, prompt, cached) = complete_one(&s);
    assert_eq!(cached, 0);
    assert!(prompt % 16 != 0, "the prompt ends inside a block: {prompt}");
    let (_, _, hot) = complete_one(&s);
    assert_eq!(hot, prompt - 1, "hot: every prompt token but the last");
    assert_eq!(n(&stats(&s)["tiers"]["disk"]["tail_hits"]), 0);
    stop(s);

    let s = start("tail-serve-2", &cfg, &store);
    let (text, _, cached) = complete_one(&s);
    assert_eq!(text, first, "the answer does not change");
    assert_eq!(cached, prompt - 1, "after a restart: as many as hot");
    assert_eq!(n(&stats(&s)["tiers"]["disk"]["tail_hits"]), 1);
    assert_eq!(tail_hits_metric(&s), 1);
    stop(s);
    let _ = std::fs::remove_dir_all(&dir);
}
