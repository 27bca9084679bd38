//! Two `memoria serve` processes (each with its own redb store) on one real 3-node Redis
//! Cluster (started on 127.0.0.1 by the test): A names the cluster with `--remote-cluster
//! URL,URL,URL`, B with `[store.remote] cluster = [...]` in its host.toml. A's blocks spread over
//! all three nodes; B answers A's prompt with its prefix fetched from the cluster (multi-slot
//! MGET), computing none of those blocks, with the same text at temperature 0; a session saved
//! on A is restored on B.

use memoria_store::remote::test_cluster::{NODES, TestCluster};
use serde_json::{Value, json};

use crate::serve::client::{get, post};
use crate::serve::server::{Server, model, temp_dir};

pub(super) const ADMIN: &str = "admin-key-for-tests";

/// (text, usage) of a greedy completion.
fn complete(s: &Server, prompt: &str) -> (String, Value) {
    let body = json!({"prompt": prompt, "max_tokens": 8, "temperature": 0});
    let r = post(s.addr, "/v1/completions", &body, &[]);
    assert_eq!(r.status, 200, "{}", r.text());
    let j = r.json();
    let text = j["choices"][0]["text"].as_str().expect("text").to_string();
    (text, j["usage"].clone())
}

/// A host's `/stats`, read with the admin key.
pub(super) fn stats(s: &Server) -> Value {
    get(
        s.addr,
        "/stats",
        &[("Authorization", "Bearer admin-key-for-tests")],
    )
    .json()
}

#[test]
fn serve_with_a_remote_cluster_shares_a_prefix_and_a_save_between_two_processes() {
    let c = TestCluster::start().unwrap_or_else(|e| panic!("{e}"));
    let urls = c.urls();
    let prompt = "Lily and Tim went to the park to play with a big red ball. ".repeat(20);
    let m = model();
    let store_a = temp_dir("cluster-a").join("store");
    let flag = urls.join(",");
    let a = Server::start(
        "cluster-a",
        &[
            "-m",
            &m,
            "--store",
            store_a.to_str().expect("utf-8"),
            "--remote-cluster",
            &flag,
            "--admin-key",
            ADMIN,
        ],
    );
    assert!(
        a.stderr().contains("remote tier cluster redis://"),
        "{}",
        a.stderr()
    );
    let (want, usage_a) = complete(&a, &prompt);
    let prompt_tokens = usage_a["prompt_tokens"].as_u64().expect("prompt_tokens");
    let full_blocks = prompt_tokens / 16;
    assert!(full_blocks >= 12, "{prompt_tokens} prompt tokens");
    let mut keys = Vec::new();
    for _ in 0..100 {
        keys = c.keys("memoria:shared:*").expect("KEYS");
        if keys.len() as u64 >= full_blocks {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(
        keys.len() as u64 >= full_blocks,
        "A wrote its blocks: {keys:?}"
    );
    let sizes = c.dbsizes().expect("DBSIZE");
    assert!(
        sizes.len() == NODES && sizes.iter().all(|&n| n > 0),
        "the blocks spread over all three nodes: {sizes:?}"
    );

    // B: its own store, the cluster from its config file.
    let dir_b = temp_dir("cluster-b");
    let cfg = dir_b.join("host.toml");
    let list = urls.iter().map(|u| format!("{u:?}")).collect::<Vec<_>>();
    std::fs::write(
        &cfg,
        format!("[store.remote]\ncluster = [{}]\n", list.join(", ")),
    )
    .expect("config");
    let store_b = dir_b.join("store");
    let b = Server::start(
        "cluster-b",
        &[
            "-m",
            &m,
            "--store",
            store_b.to_str().expect("utf-8"),
            "--config",
            cfg.to_str().expect("utf-8"),
            "--admin-key",
            ADMIN,
        ],
    );
    let before = stats(&b)["engine"]["prefill_tokens"]
        .as_u64()
        .expect("prefill_tokens");
    let (got, usage_b) = complete(&b, &prompt);
    assert_eq!(got, want, "B's text = A's");
    let sb = stats(&b);
    let remote = &sb["remote"];
    let hits = remote["hits"].as_u64().expect("hits");
    assert!(hits >= full_blocks - 1, "{full_blocks} blocks: {remote}");
    assert_eq!(remote["bad_values"], 0, "{remote}");
    let cached = usage_b["prompt_tokens_details"]["cached_tokens"]
        .as_u64()
        .unwrap_or(0);
    let computed = sb["engine"]["prefill_tokens"].as_u64().expect("prefill") - before;
    assert!(
        cached >= 16 * hits && computed + cached <= prompt_tokens + 1 && computed <= 17,
        "B reused {cached} of {prompt_tokens} prompt tokens and computed {computed} \
         ({hits} remote hits)"
    );

    // A conversation saved on A is restored on B (through the cluster: B's disk never saw it).
    let admin = [("Authorization", "Bearer admin-key-for-tests")];
    let conv =
        json!({"name": "conv-1", "text": "Once upon a time there was a little dog named Max."});
    let saved = post(a.addr, "/admin/sessions/save", &conv, &admin);
    assert_eq!(saved.status, 200, "{}", saved.text());
    let sessions = c.keys("memoria:*:session:*").expect("KEYS");
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    let restored = post(
        b.addr,
        "/admin/sessions/restore",
        &json!({"name": "conv-1"}),
        &admin,
    );
    assert_eq!(restored.status, 200, "{}", restored.text());
    assert_eq!(restored.json()["tokens"], saved.json()["tokens"]);
    let missing = post(
        b.addr,
        "/admin/sessions/restore",
        &json!({"name": "conv-2"}),
        &admin,
    );
    assert_eq!(missing.status, 404, "{}", missing.text());
}
