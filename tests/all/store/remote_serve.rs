//! Two `memoria serve --remote URL` processes on one real Valkey/Redis server (spawned on
//! 127.0.0.1 by the test): B answers A's prompt with its prefix from the remote tier, the same
//! text as A at temperature 0, and reports it in /stats (`remote.hits`) and /metrics (which
//! promtool accepts).

use std::process::Command;

use memoria_sched::store::remote::test_server::TestServer;
use serde_json::json;

use crate::serve::client::{get, post};
use crate::serve::server::{Server, model, temp_dir};

fn complete(s: &Server, prompt: &str) -> String {
    let r = post(
        s.addr,
        "/v1/completions",
        &json!({"prompt": prompt, "max_tokens": 8, "temperature": 0}),
        &[],
    );
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()["choices"][0]["text"]
        .as_str()
        .expect("text")
        .to_string()
}

#[test]
fn serve_with_remote_shares_a_prefix_between_two_processes() {
    let srv = TestServer::start().unwrap_or_else(|e| panic!("{e}"));
    let url = srv.url();
    let prompt = "Lily and Tim went to the park to play with a big red ball. ".repeat(6);
    let a = Server::start("remote-a", &["-m", &model(), "--remote", &url]);
    assert!(a.stderr().contains("remote tier"), "{}", a.stderr());
    let want = complete(&a, &prompt);
    let mut conn = srv.connection().expect("connect");
    let mut keys: Vec<String> = Vec::new();
    for _ in 0..100 {
        keys = redis::cmd("KEYS")
            .arg("memoria:shared:*")
            .query(&mut conn)
            .expect("KEYS");
        if keys.len() >= 4 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(keys.len() >= 4, "A wrote its blocks: {keys:?}");
    let b = Server::start("remote-b", &["-m", &model(), "--remote", &url]);
    assert_eq!(complete(&b, &prompt), want);
    let stats = get(b.addr, "/stats", &[]).json();
    let remote = &stats["remote"];
    assert!(remote["hits"].as_u64().is_some_and(|h| h >= 4), "{remote}");
    assert_eq!(remote["bad_values"], 0);
    assert!(
        stats["state_cache"]["hits"]
            .as_u64()
            .is_some_and(|h| h >= 64),
        "{stats}"
    );
    let metrics = get(b.addr, "/metrics", &[]).text();
    assert!(metrics.contains("memoria_remote_hits_total "), "{metrics}");
    assert!(metrics.contains("memoria_remote_misses_total{reason=\"bad_value\"} 0"));
    let file = temp_dir("remote-metrics").join("metrics.txt");
    std::fs::write(&file, &metrics).expect("write metrics");
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("promtool check metrics < {}", file.display()))
        .output()
        .expect("promtool (apt-get install prometheus)");
    assert!(
        out.status.success(),
        "promtool: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // A bad URL is refused at start with the key to fix.
    let bad = Command::new(env!("CARGO_BIN_EXE_memoria-under-test"))
        .args([
            "serve",
            "-m",
            &model(),
            "--remote",
            "http://nope",
            "--port",
            "0",
        ])
        .output()
        .expect("spawn");
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("store.remote.url"));
}
