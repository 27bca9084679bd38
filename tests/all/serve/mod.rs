//! `memoria serve` end to end over real sockets on 127.0.0.1: the official `openai` Python
//! package, `promtool check metrics`, admission under overload, the malformed-request corpus
//! with a fixed-seed canary, cancellation on disconnect, namespaces and keys, the admin API,
//! SIGTERM draining, the demo model and `memoria bench serve`.

mod agents;
mod api;
pub mod client;
mod corpus;
mod cors_proxy;
mod default_model;
mod deploy;
mod dropin;
mod family_chat;
mod faults;
mod infill;
mod limits;
mod llama_gaps;
mod llama_native;
mod memory;
pub mod server;
mod small;
mod speculation;
mod structured;
mod structured_tools;
mod tools;

use std::process::Command;

use serde_json::{Value, json};

use client::{Stream, get, post, request};
use server::{Server, model, temp_dir};

fn stats(s: &Server) -> Value {
    let r = get(s.addr, "/stats", &[]);
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

fn assert_openai_error(r: &client::Resp, what: &str) {
    assert!(
        (400..500).contains(&r.status),
        "{what}: status {} body {}",
        r.status,
        r.text()
    );
    let v = r.json();
    let e = &v["error"];
    assert!(
        e["message"].as_str().is_some_and(|m| !m.is_empty()) && e["type"].as_str().is_some(),
        "{what}: not an OpenAI error object: {v}"
    );
}

/// Polls `cond` up to `tries` times, 50 ms apart; the bound only keeps a broken server from
/// hanging the test.
fn eventually(tries: usize, mut cond: impl FnMut() -> bool) -> bool {
    for _ in 0..tries {
        if cond() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    false
}

/// Runs `promtool check metrics` on an exposition.
pub(crate) fn promtool_check(name: &str, text: &str) {
    let file = temp_dir(name).join("metrics.txt");
    std::fs::write(&file, text).expect("write metrics");
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("promtool check metrics < {}", file.display()))
        .output()
        .unwrap_or_else(|e| panic!("this test needs promtool (apt-get install prometheus): {e}"));
    assert!(
        out.status.success(),
        "promtool check metrics failed (install: apt-get install prometheus):\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn serve_openai_python_client() {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let check = Command::new(&python).args(["-c", "import openai"]).output();
    match check {
        Ok(o) if o.status.success() => {}
        _ => panic!(
            "this test needs {python} with the `openai` package: pip install openai (.ci/run installs it)"
        ),
    }
    let s = Server::start("python", &["-m", &model()]);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/python/openai_client.py");
    let out = Command::new(&python)
        .arg(script)
        .arg(format!("http://{}", s.addr))
        .output()
        .expect("run the python client");
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("ok"),
        "openai client failed:\nstdout: {}\nstderr: {}\nserver: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        s.stderr()
    );
}

/// Issue 10: the README's main command on a real instruct model answers in English.
#[test]
fn serve_smollm2_answers_paris_through_the_openai_client() {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let smollm = crate::shared::path("models/SmolLM2-135M-Instruct.Q4_1.gguf");
    let s = Server::start(
        "paris",
        &["-m", smollm.to_str().expect("utf-8 path"), "-c", "512"],
    );
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/python/openai_paris.py");
    let out = Command::new(&python)
        .arg(script)
        .arg(format!("http://{}", s.addr))
        .output()
        .expect("run the python client (pip install openai)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{stdout}");
    assert!(
        out.status.success() && stdout.contains("ok"),
        "SmolLM2 through the openai client:\nstdout: {stdout}\nstderr: {}\nserver: {}",
        String::from_utf8_lossy(&out.stderr),
        s.stderr()
    );
}

#[test]
fn serve_metrics_pass_promtool_and_stats_report_the_state_cache() {
    let s = Server::start("metrics", &["-m", &model()]);
    let prompt = "Lily and Tim went to the park to play with a big red ball. ".repeat(4);
    for _ in 0..2 {
        let r = post(
            s.addr,
            "/v1/completions",
            &json!({"prompt": prompt, "max_tokens": 8}),
            &[],
        );
        assert_eq!(r.status, 200, "{}", r.text());
    }
    let r = post(
        s.addr,
        "/v1/chat/completions",
        &json!({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "stream": true}),
        &[],
    );
    assert_eq!(r.status, 200);
    assert!(
        r.text().trim_end().ends_with("data: [DONE]"),
        "{}",
        r.text()
    );
    let m = get(s.addr, "/metrics", &[]);
    assert_eq!(m.status, 200);
    let text = m.text();
    for needle in [
        "memoria_state_cache_hits_total{namespace=\"shared\"}",
        "memoria_state_cache_misses_total{namespace=\"shared\"}",
        "memoria_state_cache_hit_rate{namespace=\"shared\"}",
        "memoria_kv_blocks{tier=\"hot\",state=\"used\"}",
        "memoria_kv_bytes{tier=\"hot\",state=\"cached\"}",
        "memoria_kv_pool_bytes{kind=\"reserved\"}",
        "memoria_kv_pool_bytes{kind=\"committed\"}",
        "memoria_kv_evictions_total{namespace=\"shared\",reason=\"capacity\"}",
        "memoria_sessions ",
        "memoria_tokens_prefilled_total ",
        "memoria_tokens_saved_total{namespace=\"shared\"}",
        "memoria_tokens_generated_total{namespace=\"shared\"}",
        "memoria_time_to_first_token_seconds_bucket{namespace=\"shared\",le=\"+Inf\"} 3",
        "memoria_token_latency_seconds_count{namespace=\"shared\"}",
        "memoria_queue_depth{namespace=\"shared\"}",
        "memoria_requests_rejected_total{namespace=\"shared\",reason=\"overload\"}",
    ] {
        assert!(text.contains(needle), "/metrics lacks {needle}:\n{text}");
    }
    promtool_check("metrics", &text);
    let st = stats(&s);
    let cache = &st["state_cache"];
    assert!(cache["hits"].as_u64().expect("hits") > 0, "{st}");
    assert!(cache["misses"].as_u64().expect("misses") > 0, "{st}");
    assert!(cache["hit_rate"].as_f64().expect("hit_rate") > 0.0, "{st}");
    // Issue 11: the pool reserves its budget and commits only the blocks it has used.
    let pool = &st["pool"];
    let committed = pool["bytes_committed"].as_u64().expect("bytes_committed");
    let reserved = pool["bytes_reserved"].as_u64().expect("bytes_reserved");
    assert!(committed > 0 && committed < reserved / 2, "{pool}");
}

#[test]
fn serve_overload_gives_429s_and_no_failures_among_accepted() {
    let s = Server::start(
        "overload",
        &["-m", &model(), "-np", "1", "--max-queue", "1"],
    );
    let addr = s.addr;
    let threads: Vec<_> = (0..12)
        .map(|i| {
            std::thread::spawn(move || {
                let body = json!({"prompt": format!("Once upon a time {i}"), "max_tokens": 48, "ignore_eos": true});
                post(addr, "/v1/completions", &body, &[])
            })
        })
        .collect();
    let results: Vec<_> = threads
        .into_iter()
        .map(|t| t.join().expect("client thread"))
        .collect();
    let ok: Vec<_> = results.iter().filter(|r| r.status == 200).collect();
    let rejected: Vec<_> = results.iter().filter(|r| r.status == 429).collect();
    assert_eq!(
        ok.len() + rejected.len(),
        results.len(),
        "only 200 and 429 are expected: {:?}",
        results
            .iter()
            .map(|r| (r.status, r.text()))
            .collect::<Vec<_>>()
    );
    assert!(
        !rejected.is_empty(),
        "12 requests against 1 slot + 1 queued gave no 429"
    );
    assert!(!ok.is_empty());
    for r in &rejected {
        assert!(r.header("retry-after").is_some(), "429 without Retry-After");
        assert_openai_error(r, "429");
    }
    for r in ok {
        let v = r.json();
        assert_eq!(v["usage"]["completion_tokens"], 48, "{v}");
        assert_eq!(v["choices"][0]["finish_reason"], "length");
    }
    let m = get(addr, "/metrics", &[]).text();
    assert!(
        !m.contains(
            "memoria_requests_rejected_total{namespace=\"shared\",reason=\"overload\"} 0\n"
        ),
        "{m}"
    );
}

fn canary(s: &Server) -> (Value, Value) {
    let r = post(
        s.addr,
        "/v1/completions",
        &json!({"prompt": "Once upon a time", "max_tokens": 32, "temperature": 0.9, "seed": 1234}),
        &[],
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    (v["choices"][0].clone(), v["usage"].clone())
}

#[test]
fn serve_rejects_the_malformed_corpus_and_the_canary_is_unchanged() {
    let s = Server::start("corpus", &["-m", &model()]);
    let before = canary(&s);
    let cases = corpus::cases();
    assert!(cases.len() >= 50, "{} cases", cases.len());
    for c in &cases {
        let headers: Vec<(&str, &str)> = c.headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let r = match c.declared_len {
            Some(n) => {
                let len = n.to_string();
                let mut h = headers.clone();
                h.push(("Content-Length", &len));
                client::request_head_only(s.addr, c.method, c.path, &h)
            }
            None => {
                let mut h = headers.clone();
                h.push(("Content-Type", "application/json"));
                request(s.addr, c.method, c.path, &h, &c.body)
            }
        };
        assert_openai_error(&r, c.name);
        if let Some(st) = c.status {
            assert_eq!(r.status, st, "{}: {}", c.name, r.text());
        }
        if let Some(p) = c.param {
            assert_eq!(r.json()["error"]["param"], p, "{}: {}", c.name, r.text());
        }
    }
    for (name, bytes, status) in corpus::raw_cases() {
        let r = client::raw(s.addr, &bytes);
        assert_openai_error(&r, name);
        assert_eq!(r.status, status, "{name}: {}", r.text());
    }
    assert_eq!(canary(&s), before, "the canary changed after the corpus");
    assert_eq!(get(s.addr, "/health", &[]).status, 200);
}

#[test]
fn serve_disconnect_mid_stream_cancels_and_frees_blocks() {
    let s = Server::start("disconnect", &["-m", &model()]);
    let base = stats(&s);
    let body = json!({"prompt": "Once upon a time", "max_tokens": 400, "ignore_eos": true, "stream": true});
    let mut st = Stream::open(s.addr, "/v1/completions", &body, &[]);
    assert_eq!(st.status, 200);
    let first = st.next_event().expect("a first chunk");
    assert!(first.starts_with('{'), "{first}");
    drop(st);
    let freed = eventually(400, || {
        let now = stats(&s);
        now["engine"]["sessions"] == 0
            && now["pool"]["blocks_used"] == base["pool"]["blocks_used"]
            && now["engine"]["cancelled"].as_u64().unwrap_or(0) >= 1
    });
    assert!(
        freed,
        "blocks not freed after a disconnect: before {base}, now {}",
        stats(&s)
    );
    let m = get(s.addr, "/metrics", &[]).text();
    assert!(
        m.contains("memoria_client_disconnects_total{namespace=\"shared\"} 1"),
        "{m}"
    );
}

#[test]
fn serve_namespaces_keys_and_admin_api() {
    let dir = temp_dir("auth");
    let cfg = dir.join("host.toml");
    std::fs::write(
        &cfg,
        "[server]\nadmin_key = \"admin-key-for-tests\"\n\n[namespaces.alpha]\nisolation = \"isolated\"\napi_keys = [\"alpha-key-0001\"]\npreload = [\"Once upon a time there was a little girl named Lily. She loved to play with her big red ball in the park.\"]\n",
    )
    .expect("config");
    let s = Server::start(
        "auth",
        &[
            "-m",
            &model(),
            "--config",
            cfg.to_str().expect("utf-8"),
            "--api-key",
            "shared-key-0001",
        ],
    );
    let addr = s.addr;
    let body = json!({"prompt": "Once upon a time", "max_tokens": 4});
    let shared = [("Authorization", "Bearer shared-key-0001")];
    let alpha = [("Authorization", "Bearer alpha-key-0001")];
    let admin = [("Authorization", "Bearer admin-key-for-tests")];
    assert_eq!(post(addr, "/v1/completions", &body, &[]).status, 401);
    assert_eq!(
        post(
            addr,
            "/v1/completions",
            &body,
            &[("Authorization", "Bearer nope-nope-nope")]
        )
        .status,
        401
    );
    assert_eq!(post(addr, "/v1/completions", &body, &shared).status, 200);
    assert_eq!(post(addr, "/v1/completions", &body, &alpha).status, 200);
    assert_eq!(
        post(addr, "/ns/alpha/v1/completions", &body, &alpha).status,
        200
    );
    // One 401 for another namespace's key, no key, a bad key and an unknown namespace: names
    // cannot be probed.
    let wrong_ns = post(addr, "/ns/alpha/v1/completions", &body, &shared);
    assert_eq!(wrong_ns.status, 401, "{}", wrong_ns.text());
    let no_key = post(addr, "/ns/alpha/v1/completions", &body, &[]);
    assert_eq!(no_key.status, 401);
    let bad = [("Authorization", "Bearer nope-nope-nope")];
    for (what, name, key) in [
        ("unknown namespace", "nope", &alpha),
        ("bad key", "alpha", &bad),
    ] {
        let r = post(addr, &format!("/ns/{name}/v1/completions"), &body, key);
        assert_eq!(r.status, 401, "{what}: {}", r.text());
        assert_eq!(
            r.text(),
            wrong_ns.text().replace("alpha", name),
            "{what}: the refusal differs"
        );
    }
    // The scheme is case-insensitive and spaces around the key are ignored (documented).
    assert_eq!(
        post(
            addr,
            "/ns/alpha/v1/completions",
            &body,
            &[("Authorization", "bearer   alpha-key-0001  ")]
        )
        .status,
        200
    );
    assert_eq!(
        post(
            addr,
            "/v1/completions",
            &body,
            &[("Authorization", "Basic abc")]
        )
        .status,
        401
    );
    assert_eq!(
        get(addr, "/metrics", &[]).status,
        401,
        "metrics need the admin key on a keyed host"
    );
    assert_eq!(get(addr, "/metrics", &admin).status, 200);
    assert_eq!(get(addr, "/admin/namespaces", &[]).status, 401);
    assert_eq!(get(addr, "/admin/namespaces", &alpha).status, 403);
    let ns = get(addr, "/admin/namespaces", &admin);
    assert_eq!(ns.status, 200, "{}", ns.text());
    let names: Vec<_> = ns.json()["data"]
        .as_array()
        .expect("list")
        .iter()
        .map(|n| n["name"].clone())
        .collect();
    assert_eq!(names, [json!("shared"), json!("alpha")]);
    let warm = post(
        addr,
        "/admin/warm",
        &json!({"namespace": "alpha", "text": "Once upon a time there was a little girl named Lily. She loved to play with her big red ball in the park."}),
        &admin,
    );
    assert_eq!(warm.status, 200, "{}", warm.text());
    assert!(
        warm.json()["cached_tokens"].as_u64().expect("cached") > 0,
        "the preloaded prefix was not cached: {}",
        warm.text()
    );
    // Issue 12: a TTL past what an Instant holds used to panic the engine thread for good.
    let huge = post(
        addr,
        "/admin/warm",
        &json!({"namespace": "alpha", "text": "hello", "ttl_s": 9223372036854775808u64}),
        &admin,
    );
    assert_eq!(huge.status, 400, "{}", huge.text());
    assert_openai_error(&huge, "an unrepresentable warm TTL");
    let after = post(
        addr,
        "/admin/warm",
        &json!({"namespace": "alpha", "text": "Once upon a time", "ttl_s": 31536000u64}),
        &admin,
    );
    assert_eq!(after.status, 200, "the engine survives: {}", after.text());
    assert_eq!(get(addr, "/admin/sessions", &admin).status, 200);
    let r = request(
        addr,
        "PUT",
        "/admin/namespaces/alpha/component",
        &admin,
        b"\0asm",
    );
    assert_eq!(r.status, 400, "{}", r.text());
    assert_openai_error(&r, "a truncated component");
    std::fs::write(
        &cfg,
        "[server]\nadmin_key = \"admin-key-for-tests\"\n\n[namespaces.alpha]\nisolation = \"isolated\"\napi_keys = [\"alpha-key-0002\"]\n\n[namespaces.beta]\napi_keys = [\"beta-key-00001\"]\n",
    )
    .expect("config");
    let r = post(addr, "/admin/reload", &json!({}), &admin);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        post(addr, "/v1/completions", &body, &alpha).status,
        401,
        "the old key still works after reload"
    );
    assert_eq!(
        post(
            addr,
            "/v1/completions",
            &body,
            &[("Authorization", "Bearer alpha-key-0002")]
        )
        .status,
        200
    );
    assert_eq!(
        post(
            addr,
            "/v1/completions",
            &body,
            &[("Authorization", "Bearer beta-key-00001")]
        )
        .status,
        200
    );
    std::fs::write(
        &cfg,
        "[server]\nadmin_key = \"admin-key-for-tests\"\ncolour = 1\n",
    )
    .expect("config");
    let r = post(addr, "/admin/reload", &json!({}), &admin);
    assert_eq!(r.status, 400);
    assert!(r.text().contains("colour"), "{}", r.text());
}

#[test]
fn serve_config_errors_name_the_key() {
    let dir = temp_dir("badcfg");
    let cfg = dir.join("host.toml");
    std::fs::write(&cfg, "[cache]\nblock_tokens = 0\n").expect("config");
    let out = crate::bin::command()
        .args([
            "serve",
            "--port",
            "0",
            "--config",
            cfg.to_str().expect("utf-8"),
        ])
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("spawn");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cache.block_tokens"), "{err}");
    std::fs::write(&cfg, "[modle]\npath = \"x\"\n").expect("config");
    let out = crate::bin::command()
        .args([
            "serve",
            "--port",
            "0",
            "--config",
            cfg.to_str().expect("utf-8"),
        ])
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("spawn");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("modle"), "{err}");
}

#[test]
fn serve_sigterm_drains_running_streams() {
    let mut s = Server::start("sigterm", &["-m", &model()]);
    let body = json!({"prompt": "Once upon a time", "max_tokens": 200, "ignore_eos": true, "stream": true});
    let mut st = Stream::open(s.addr, "/v1/completions", &body, &[]);
    assert_eq!(st.status, 200);
    st.next_event().expect("first chunk");
    let kill = Command::new("kill")
        .args(["-TERM", &s.child.id().to_string()])
        .status()
        .expect("kill");
    assert!(kill.success());
    let mut events = Vec::new();
    while let Some(e) = st.next_event() {
        events.push(e);
    }
    assert_eq!(
        events.last().map(String::as_str),
        Some("[DONE]"),
        "the stream was cut: {events:?}"
    );
    let usage = events
        .iter()
        .filter_map(|e| serde_json::from_str::<Value>(e).ok())
        .find(|v| v["choices"][0]["finish_reason"] == "length");
    assert!(usage.is_some(), "no final chunk: {events:?}");
    let status = s.child.wait().expect("wait");
    assert!(status.success(), "exit {status:?}: {}", s.stderr());
    assert!(
        std::net::TcpStream::connect(s.addr).is_err(),
        "still accepting after shutdown"
    );
}

#[test]
fn serve_runs_the_demo_model_without_arguments() {
    let s = Server::start("demo", &[]);
    assert!(s.stderr().contains("RANDOM"), "{}", s.stderr());
    let r = post(
        s.addr,
        "/v1/chat/completions",
        &json!({"messages": [{"role": "user", "content": "héllo ✓"}], "max_tokens": 8}),
        &[],
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["model"], "memoria-demo-random");
    assert!(v["usage"]["completion_tokens"].as_u64().expect("tokens") > 0);
    let e = post(
        s.addr,
        "/v1/embeddings",
        &json!({"input": "hello", "encoding_format": "float"}),
        &[],
    );
    assert_eq!(e.status, 200, "{}", e.text());
    assert_eq!(
        e.json()["data"][0]["embedding"]
            .as_array()
            .expect("vector")
            .len(),
        128
    );
}

#[test]
fn bench_serve_reports_rounds_against_a_running_server() {
    let s = Server::start("bench", &["-m", &model(), "-np", "4"]);
    let out = crate::bin::command()
        .args([
            "bench",
            "serve",
            "--url",
            &format!("http://{}", s.addr),
            "-c",
            "4",
            "--system-tokens",
            "100",
            "--question-tokens",
            "10",
            "-n",
            "4",
            "--rounds",
            "2",
            "--json",
        ])
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("spawn bench serve");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    let rounds = v["rounds"].as_array().expect("rounds");
    assert_eq!(rounds.len(), 2);
    for r in rounds {
        assert_eq!(r["ok"], 4, "{r}");
        assert_eq!(r["errors"], 0, "{r}");
    }
    assert!(
        rounds[1]["hit_rate"].as_f64().expect("hit rate") > 0.5,
        "{v}"
    );
    let refused = crate::bin::command()
        .args(["bench", "serve", "--url", "http://192.0.2.1:80"])
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("spawn");
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("loopback"));
}

#[test]
fn serve_with_a_store_saves_and_restores_sessions_and_reports_tiers() {
    let dir = temp_dir("store").join("store");
    let s = Server::start(
        "store",
        &[
            "-m",
            &model(),
            "--store",
            dir.to_str().expect("utf-8"),
            "--admin-key",
            "admin-key-for-tests",
        ],
    );
    let admin = [("Authorization", "Bearer admin-key-for-tests")];
    let text = "Once upon a time there was a little girl named Lily. She loved to play with her big red ball in the park.";
    let r = post(
        s.addr,
        "/admin/sessions/save",
        &json!({"name": "lily", "text": text}),
        &admin,
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let saved = r.json()["tokens"].clone();
    let r = post(
        s.addr,
        "/admin/sessions/restore",
        &json!({"name": "lily"}),
        &admin,
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["tokens"], saved);
    let r = post(
        s.addr,
        "/admin/sessions/restore",
        &json!({"name": "nobody"}),
        &admin,
    );
    assert_openai_error(&r, "restore of an unknown name");
    let m = get(s.addr, "/metrics", &admin).text();
    assert!(
        m.contains("memoria_kv_blocks{tier=\"disk\",state=\"stored\"}"),
        "{m}"
    );
    // The store's own figures, as `/stats` reports them under `tiers.disk`.
    for series in [
        "memoria_store_budget_bytes{tier=\"disk\"}",
        "memoria_store_puts_total{tier=\"disk\"}",
        "memoria_store_dropped_total{tier=\"cold\"}",
        "memoria_store_write_errors_total{tier=\"disk\"}",
        "memoria_store_read_errors_total{tier=\"disk\"}",
        "memoria_store_corrupt_removed_total{tier=\"disk\"}",
        "memoria_store_disk_file_bytes ",
        "memoria_store_disk_charged_bytes ",
        "memoria_store_saves_budget_bytes ",
        "memoria_store_writer_queue_blocks ",
        "memoria_store_writer_queue_bytes ",
        "memoria_store_commits_total ",
        "memoria_store_durable_commits_total ",
        "memoria_store_writer_resumes_total 0",
        "memoria_store_written_bytes_total ",
        "memoria_store_write_seconds_total ",
        "memoria_store_writer_stopped 0",
        "memoria_store_disk_full 0",
    ] {
        assert!(m.contains(series), "no {series} in\n{m}");
    }
    let saves: u64 = m
        .lines()
        .find_map(|l| l.strip_prefix("memoria_store_saves_bytes "))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no memoria_store_saves_bytes in\n{m}"));
    assert!(
        saves > 0,
        "the save of \"lily\" is charged to the saves' budget"
    );
    let stats = get(s.addr, "/stats", &admin).json();
    let disk = &stats["tiers"]["disk"];
    assert_eq!(disk["saves_bytes"], saves, "{disk}");
    assert_eq!(disk["full"], false, "{disk}");
    assert_eq!(disk["writer_stopped"], false, "{disk}");
    assert_eq!(disk["write_errors"], 0, "{disk}");
    assert_eq!(disk["writer_resumes"], 0, "{disk}");
    assert!(
        disk["durable_commits"].as_u64() >= Some(1),
        "the save of \"lily\" was durable: {disk}"
    );
    promtool_check("store", &m);
}
