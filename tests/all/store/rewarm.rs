//! Hot-prefix warming across a restart: `memoria serve --store` with `[cache]
//! auto_pin` saves the prefixes it keeps pinned; started again on the same store it re-warms
//! and pins them before accepting a request, so the first request on a hot prefix is served
//! from RAM (no disk read) with the same answer.

use std::process::Command;

use serde_json::{Value, json};

use crate::serve::client::{get, post};
use crate::serve::server::{Server, model, temp_dir};

pub(super) const ADMIN: &str = "rewarm-admin-key-0001";
pub(super) const PROMPT: &str = "Once upon a time there was a little girl named Lily who loved to play \
                      outside in the sunshine with her dog and her friends every single day";

pub(super) fn start(name: &str, cfg: &std::path::Path, store: &std::path::Path) -> Server {
    Server::start(
        name,
        &[
            "-m",
            &model(),
            "--config",
            cfg.to_str().expect("utf-8"),
            "--store",
            store.to_str().expect("utf-8"),
        ],
    )
}

pub(super) fn stats(s: &Server) -> Value {
    let r = get(
        s.addr,
        "/stats",
        &[("Authorization", &format!("Bearer {ADMIN}"))],
    );
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

pub(super) fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// A request counter summed over the namespaces.
pub(super) fn requests(v: &Value, field: &str) -> u64 {
    v["namespaces"]
        .as_object()
        .expect("namespaces")
        .values()
        .filter_map(|ns| ns["requests"][field].as_u64())
        .sum()
}

/// One greedy completion: (text, cached prompt tokens).
pub(super) fn complete(s: &Server) -> (String, u64) {
    let body = json!({"prompt": PROMPT, "max_tokens": 8, "temperature": 0});
    let r = post(s.addr, "/v1/completions", &body, &[]);
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    let text = v["choices"][0]["text"].as_str().expect("text").to_string();
    (
        text,
        n(&v["usage"]["prompt_tokens_details"]["cached_tokens"]),
    )
}

/// SIGTERM, then waits for a clean exit (the drain and the shutdown save).
pub(crate) fn stop(mut s: Server) -> String {
    let kill = Command::new("kill")
        .args(["-TERM", &s.child.id().to_string()])
        .status()
        .expect("kill");
    assert!(kill.success());
    let status = s.child.wait().expect("wait");
    assert!(status.success(), "exit {status:?}: {}", s.stderr());
    s.stderr()
}

#[test]
fn store_restart_rewarms_and_pins_the_hot_prefixes_before_serving() {
    let dir = temp_dir("rewarm");
    let store = dir.join("store");
    let _ = std::fs::remove_dir_all(&store);
    let cfg = dir.join("host.toml");
    std::fs::write(
        &cfg,
        format!("[server]\nadmin_key = \"{ADMIN}\"\n\n[cache]\nauto_pin = 2\n"),
    )
    .expect("config");

    let s = start("rewarm-1", &cfg, &store);
    let (first, cached) = complete(&s);
    assert_eq!(cached, 0, "a cold start");
    for _ in 0..3 {
        assert_eq!(complete(&s).0, first);
    }
    let pinned = n(&stats(&s)["pool"]["auto_pinned_blocks"]);
    assert!(pinned >= 2, "the repeated prompt is auto-pinned: {pinned}");
    let log = stop(s);
    assert!(
        !log.contains("re-warmed"),
        "nothing to re-warm on a new store: {log}"
    );

    let s = start("rewarm-2", &cfg, &store);
    // Before any request: the saved prefix is warm and pinned again.
    let before = stats(&s);
    assert_eq!(n(&before["pool"]["auto_pinned_blocks"]), pinned, "{before}");
    assert_eq!(requests(&before, "total"), 0, "{before}");
    let log = s.stderr();
    assert!(
        log.contains("re-warmed 1 hot prefixes") && log.contains("from disk"),
        "{log}"
    );
    let disk_hits = n(&before["tiers"]["disk"]["hits"]);
    assert!(
        disk_hits >= 1,
        "the re-warm read its blocks back from disk: {before}"
    );

    // The first request hits every full block before its last token, from RAM.
    let (text, cached) = complete(&s);
    assert_eq!(text, first, "the same answer");
    let block = n(&before["pool"]["block_tokens"]);
    assert!(cached >= pinned.min(2) * block, "cached {cached} tokens");
    assert_eq!(cached % block, 0);
    let after = stats(&s);
    assert_eq!(
        n(&after["tiers"]["disk"]["hits"]),
        disk_hits,
        "served from the pinned RAM blocks, not the disk: {after}"
    );
    assert_eq!(requests(&after, "total"), 1, "{after}");
    assert_eq!(requests(&after, "cached_tokens"), cached, "{after}");
    stop(s);

    // A damaged record is refused with a reason and the host still serves.
    damage_hot_record(&store);
    let s = start("rewarm-3", &cfg, &store);
    let log = s.stderr();
    assert!(
        log.contains("saved hot prefixes were refused") && log.contains("checksum"),
        "{log}"
    );
    assert_eq!(n(&stats(&s)["pool"]["auto_pinned_blocks"]), 0);
    assert_eq!(complete(&s).0, first);
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Flips one byte inside the saved hot-prefix record.
fn damage_hot_record(store: &std::path::Path) {
    use memoria_store::disk::open_database;
    use memoria_store::disk::tables::{HOT, HOT_KEY};
    use redb::ReadableDatabase;
    let db = open_database(store).expect("open");
    let mut bytes = {
        let txn = db.begin_read().expect("read");
        let t = txn.open_table(HOT).expect("hot table");
        t.get(HOT_KEY)
            .expect("get")
            .expect("a saved record")
            .value()
            .to_vec()
    };
    bytes[60] ^= 0x20;
    let txn = db.begin_write().expect("write");
    txn.open_table(HOT)
        .expect("hot table")
        .insert(HOT_KEY, bytes.as_slice())
        .expect("insert");
    txn.commit().expect("commit");
}
