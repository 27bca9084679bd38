//! Two `memoria serve --remote URL` processes on one real Valkey/Redis server (spawned on
//! 127.0.0.1 by the test): B answers A's prompt with its prefix from the remote tier, the same
//! text as A at temperature 0, restores a session A saved (in the remote tier: neither has a
//! disk), and reports it in /stats (`remote.hits`) and /metrics (which promtool accepts).

use std::process::Command;

use memoria_store::remote::test_server::TestServer;
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
    let m = model();
    let args = [
        "-m",
        m.as_str(),
        "--remote",
        url.as_str(),
        "--admin-key",
        "admin-key-for-tests",
    ];
    let a = Server::start("remote-a", &args);
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
    let b = Server::start("remote-b", &args);
    assert_eq!(complete(&b, &prompt), want);
    let admin = [("Authorization", "Bearer admin-key-for-tests")];
    let stats = get(b.addr, "/stats", &admin).json();
    let remote = &stats["remote"];
    assert!(remote["hits"].as_u64().is_some_and(|h| h >= 4), "{remote}");
    assert_eq!(remote["bad_values"], 0);
    assert!(
        stats["state_cache"]["hits"]
            .as_u64()
            .is_some_and(|h| h >= 64),
        "{stats}"
    );
    // Per namespace and tier: the (default) namespace "shared" took its blocks from the remote.
    let ns = &stats["namespaces"]["shared"]["promotions"];
    assert!(ns["remote"].as_u64().is_some_and(|h| h >= 4), "{stats}");
    assert_eq!((&ns["cold"], &ns["disk"]), (&json!(0), &json!(0)), "{ns}");
    assert_eq!(stats["state_cache"]["promotions"]["remote"], ns["remote"]);
    // A conversation saved on A (no disk: the save lives in the remote tier) is restored on B.
    let conv =
        json!({"name": "conv-1", "text": "Once upon a time there was a little dog named Max."});
    let saved = post(a.addr, "/admin/sessions/save", &conv, &admin);
    assert_eq!(saved.status, 200, "{}", saved.text());
    let restore = json!({"name": "conv-1"});
    let restored = post(b.addr, "/admin/sessions/restore", &restore, &admin);
    assert_eq!(restored.status, 200, "{}", restored.text());
    assert_eq!(restored.json()["tokens"], saved.json()["tokens"]);
    let missing = post(
        b.addr,
        "/admin/sessions/restore",
        &json!({"name": "conv-2"}),
        &admin,
    );
    assert_eq!(missing.status, 404, "{}", missing.text());
    let metrics = get(b.addr, "/metrics", &[]).text();
    assert!(metrics.contains("memoria_remote_hits_total "), "{metrics}");
    assert!(metrics.contains("memoria_remote_misses_total{reason=\"bad_value\"} 0"));
    let promoted = format!(
        "memoria_kv_tier_promotions_total{{namespace=\"shared\",tier=\"remote\"}} {}",
        ns["remote"]
    );
    assert!(metrics.contains(&promoted), "{promoted}\n{metrics}");
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
    let bad = crate::bin::command()
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

/// A declared public prefix, long enough for several blocks.
const PUBLIC: &str = "You are a helpful support assistant for the little town library. You answer \
    questions about books, opening hours, library cards and the reading club. Be kind and short.";

fn public_host(name: &str, url: &str) -> Server {
    let cfg = temp_dir(name).join("host.toml");
    std::fs::write(
        &cfg,
        format!(
            "[server]\nadmin_key = \"admin-key-for-tests\"\n\n[namespaces.alpha]\n\
             isolation = \"isolated\"\napi_keys = [\"alpha-key-0001\"]\n\
             public_prefixes = [{PUBLIC:?}]\n"
        ),
    )
    .expect("config");
    let cfg = cfg.to_str().expect("utf-8").to_string();
    Server::start(name, &["-m", &model(), "--remote", url, "--config", &cfg])
}

/// (prompt tokens, cached tokens) of a completion in namespace `alpha`.
fn alpha_completion(s: &Server, prompt: &str) -> (u64, u64) {
    let body = json!({"prompt": prompt, "max_tokens": 2, "temperature": 0});
    let r = post(
        s.addr,
        "/v1/completions",
        &body,
        &[("Authorization", "Bearer alpha-key-0001")],
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let u = &r.json()["usage"];
    (
        u["prompt_tokens"].as_u64().expect("prompt_tokens"),
        u["prompt_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap_or(0),
    )
}

#[test]
fn serve_with_remote_finds_a_public_prefix_under_the_common_salt() {
    let srv = TestServer::start().unwrap_or_else(|e| panic!("{e}"));
    let url = srv.url();
    let a = public_host("remote-public-a", &url);
    let (prompt_tokens, _) = alpha_completion(&a, &format!("{PUBLIC} Where are the cat books?"));
    let public_blocks = (prompt_tokens - 12) / 16;
    assert!(public_blocks >= 3, "{prompt_tokens} prompt tokens");
    let mut conn = srv.connection().expect("connect");
    let mut keys = 0;
    for _ in 0..100 {
        let all: Vec<String> = redis::cmd("KEYS")
            .arg("memoria:*")
            .query(&mut conn)
            .expect("KEYS");
        keys = all.len();
        if keys as u64 >= public_blocks {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(
        keys as u64 >= public_blocks,
        "A wrote its blocks ({keys} keys)"
    );
    // Another host, another question: only the public blocks are shared, and they come from
    // the remote tier under the common salt (the namespace's own chain forks after them).
    let b = public_host("remote-public-b", &url);
    let (_, cached) = alpha_completion(&b, &format!("{PUBLIC} Who runs the reading club?"));
    let admin = [("Authorization", "Bearer admin-key-for-tests")];
    let stats = get(b.addr, "/stats", &admin).json();
    let hits = stats["remote"]["hits"].as_u64().unwrap_or(0);
    assert!(
        hits >= public_blocks - 1 && cached >= 16 * (public_blocks - 1),
        "B found {hits} remote blocks and reused {cached} tokens of a {public_blocks}-block \
         public prefix: {}",
        stats["remote"]
    );
}
