//! The remote tier's two-host test at full length, on one real Valkey/Redis server and on a real
//! 3-node Redis Cluster: two `memoria serve` processes (separate stores) on the remote; A
//! answers a prompt of more than 1,000 tokens, B then answers it with every full block from the
//! remote (multi-slot MGET runs on the cluster) and computes only the last partial block, and
//! B's tokens and per-token log-probabilities (every top-5 alternative) equal those of a cold
//! host without a remote tier, bit for bit. The model is a small random-weight llama with a
//! 2,048-token context (stories260K's 512 cannot hold it).

use memoria_store::remote::test_cluster::TestCluster;
use memoria_store::remote::test_server::TestServer;
use serde_json::{Value, json};

use super::remote_cluster_serve::{ADMIN, stats};
use crate::serve::client::post;
use crate::serve::server::{Server, small_synth, temp_dir};

/// (tokens' text, top-5 log-probs of each, usage) of a greedy completion.
fn complete(s: &Server, prompt: &str) -> (String, Value, Value) {
    let body = json!({"prompt": prompt, "max_tokens": 8, "temperature": 0, "logprobs": 5});
    let r = post(s.addr, "/v1/completions", &body, &[]);
    assert_eq!(r.status, 200, "{}", r.text());
    let j = r.json();
    let c = &j["choices"][0];
    let text = c["text"].as_str().expect("text").to_string();
    (text, c["logprobs"].clone(), j["usage"].clone())
}

#[test]
fn a_long_prompt_crosses_one_server_with_bit_identical_log_probs() {
    let srv = TestServer::start().unwrap_or_else(|e| panic!("{e}"));
    let keys = || {
        let mut c = srv.connection().expect("redis connection");
        let n: u64 = redis::cmd("DBSIZE").query(&mut c).expect("DBSIZE");
        vec![n]
    };
    crosses("server-long", &["--remote", &srv.url()], keys);
}

#[test]
fn a_long_prompt_crosses_the_cluster_with_bit_identical_log_probs() {
    let c = TestCluster::start().unwrap_or_else(|e| panic!("{e}"));
    let flag = c.urls().join(",");
    crosses("cluster-long", &["--remote-cluster", &flag], || {
        c.dbsizes().expect("DBSIZE")
    });
}

/// Host A then host B on the remote named by `remote` (flags); `keys()` counts the keys on
/// each of its nodes.
fn crosses(name: &str, remote: &[&str], keys: impl Fn() -> Vec<u64>) {
    let m = small_synth(&temp_dir(&format!("{name}-model")).join("long.gguf"), 2048);
    let prompt: String = (0..700).map(|i| format!("w{} ", (i * 37) % 101)).collect();
    let cold = Server::start(&format!("{name}-cold"), &["-m", &m]);
    let (want, want_lp, usage) = complete(&cold, &prompt);
    drop(cold);
    let prompt_tokens = usage["prompt_tokens"].as_u64().expect("prompt_tokens");
    assert!(prompt_tokens >= 1000, "{prompt_tokens} prompt tokens");
    let full_blocks = prompt_tokens / 16;
    let tops = want_lp["top_logprobs"].as_array().map(Vec::len);
    assert_eq!(tops, Some(8), "top-5 log-probs of 8 tokens: {want_lp}");

    let host = |name: &str| {
        let store = temp_dir(name).join("store");
        let store = store.to_str().expect("utf-8").to_string();
        let args = ["-m", &m, "--store", &store];
        Server::start(name, &[&args[..], remote, &["--admin-key", ADMIN]].concat())
    };
    let a = host(&format!("{name}-a"));
    let (got_a, lp_a, _) = complete(&a, &prompt);
    assert_eq!((&got_a, &lp_a), (&want, &want_lp), "A = a cold host");
    let mut written = 0;
    for _ in 0..200 {
        written = stats(&a)["remote"]["writes"].as_u64().unwrap_or(0);
        if written >= full_blocks {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(
        written >= full_blocks,
        "A wrote {written} of {full_blocks} blocks"
    );
    let sizes = keys();
    assert!(
        sizes.iter().all(|&n| n > 0),
        "keys on every node: {sizes:?}"
    );

    let b = host(&format!("{name}-b"));
    let before = stats(&b)["engine"]["prefill_tokens"]
        .as_u64()
        .expect("prefill_tokens");
    let (got_b, lp_b, usage_b) = complete(&b, &prompt);
    assert_eq!(got_b, want, "B's tokens = a cold host's");
    assert_eq!(lp_b, want_lp, "B's log-probs = a cold host's, bit for bit");
    let sb = stats(&b);
    let r = &sb["remote"];
    assert_eq!(r["hits"].as_u64(), Some(full_blocks), "{r}");
    assert_eq!(r["bad_values"], 0, "{r}");
    assert!(
        r["mget_runs"].as_u64().is_some_and(|n| n >= 1),
        "MGET runs counted: {r}"
    );
    let computed = sb["engine"]["prefill_tokens"].as_u64().expect("prefill") - before;
    let cached = usage_b["prompt_tokens_details"]["cached_tokens"]
        .as_u64()
        .unwrap_or(0);
    assert_eq!(cached, 16 * full_blocks, "{usage_b}");
    assert!(
        computed <= prompt_tokens - 16 * full_blocks + 1,
        "B computed {computed} of {prompt_tokens} prompt tokens"
    );
}
