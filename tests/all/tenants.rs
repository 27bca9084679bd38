//! Tenant components: the example guests answer through the engine, misbehaving
//! guests are contained (deadline, memory cap, traps, oversized host-call arguments), invalid
//! components are refused with a message that says why, and namespaces are isolated (blocks,
//! named sessions). Guests are built by tests/build.rs and driven through the runtime's
//! wasi:http path in process.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use http_body_util::BodyExt;
use memoria_model::llama::Model;
use memoria_model::tokenizer::Tokenizer;
use memoria_runtime::{ComponentError, Runtime, RuntimeConfig, full_body};
use memoria_sched::{EngineConfig, EngineHandle};
use memoria_tenant::{NamespaceSpec, Tenants};

use crate::shared;

pub(crate) fn guest(name: &str) -> PathBuf {
    let p = match name {
        "chat" => env!("MEMORIA_GUEST_CHAT"),
        "classify" => env!("MEMORIA_GUEST_CLASSIFY"),
        "agent" => env!("MEMORIA_GUEST_AGENT"),
        "hello" => env!("MEMORIA_GUEST_HELLO"),
        "hostcalls" => env!("MEMORIA_GUEST_HOSTCALLS"),
        "misbehave" => env!("MEMORIA_GUEST_MISBEHAVE"),
        "trivial" => env!("MEMORIA_GUEST_TRIVIAL"),
        "unsatisfied" => env!("MEMORIA_GUEST_UNSATISFIED"),
        _ => panic!("no guest {name}"),
    };
    PathBuf::from(p)
}

pub(crate) fn engine() -> EngineHandle {
    let model = Model::load(shared::path("models/stories260K-f32.gguf")).expect("model loads");
    let tok = Tokenizer::from_gguf(model.gguf()).expect("tokenizer");
    EngineHandle::start(Arc::new(model), Arc::new(tok), EngineConfig::default())
        .expect("engine starts")
}

/// A namespace serving the three examples plus the test guests, with `extra` TOML lines.
fn spec(isolation: &str, extra: &str) -> NamespaceSpec {
    let mut text = format!("isolation = \"{isolation}\"\n[components]\n");
    for g in ["chat", "classify", "agent", "hello", "misbehave"] {
        text.push_str(&format!("{g} = {:?}\n", guest(g).display().to_string()));
    }
    text.push_str("[limits]\nmax_instances = 4\n");
    text.push_str(extra);
    toml::from_str(&text).expect("namespace spec")
}

fn runtime(namespaces: &[(&str, &str, &str)]) -> (Runtime, EngineHandle) {
    let specs = namespaces
        .iter()
        .map(|(n, iso, extra)| (n.to_string(), spec(iso, extra)))
        .collect();
    let tenants = Tenants::new(specs).expect("tenants");
    let eng = engine();
    eng.register_namespaces(tenants.registry_table())
        .expect("namespaces registered");
    let rt = Runtime::new(&tenants, eng.clone(), RuntimeConfig::default())
        .expect("runtime loads the guests");
    (rt, eng)
}

/// Sends `body` to `/ns/{ns}{path}`; returns the status, the body and how many frames it came in.
pub(crate) async fn call(rt: &Runtime, ns: &str, path: &str, body: &str) -> (u16, String, usize) {
    let req = hyper::Request::builder()
        .method(if body.is_empty() { "GET" } else { "POST" })
        .uri(format!("http://localhost/ns/{ns}{path}"))
        .header("host", "localhost")
        .body(full_body(body.to_string()))
        .expect("request");
    let resp = rt.handle_request(ns, path, req).await;
    let status = resp.status().as_u16();
    let mut body = resp.into_body();
    let (mut bytes, mut frames) = (Vec::new(), 0);
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame.expect("body frame").into_data() {
            frames += 1;
            bytes.extend_from_slice(&data);
        }
    }
    (
        status,
        String::from_utf8(bytes).expect("utf-8 body"),
        frames,
    )
}

async fn json(rt: &Runtime, ns: &str, path: &str, body: &str) -> serde_json::Value {
    let (status, text, _) = call(rt, ns, path, body).await;
    assert_eq!(status, 200, "{ns}{path}: {text}");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{ns}{path}: {e}: {text}"))
}

/// Open sessions of `ns` once its requests have finished (a handler may still be returning after
/// its response body ended).
async fn settled_sessions(rt: &Runtime, ns: &str) -> usize {
    for _ in 0..500 {
        if rt.open_sessions(ns) == Some(0) {
            return 0;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    rt.open_sessions(ns).expect("namespace")
}

fn hit_tokens(eng: &EngineHandle, rt_ns: u32) -> u64 {
    eng.pool_stats()
        .namespace(memoria_kv::NamespaceId(rt_ns))
        .map_or(0, |c| c.hit_tokens.load(Relaxed))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_example_answers_and_reuses_its_system_prompt() {
    let (rt, _eng) = runtime(&[("alpha", "isolated", "")]);
    let first = json(
        &rt,
        "alpha",
        "/chat",
        r#"{"message": "Where is the ball?"}"#,
    )
    .await;
    assert!(
        first["prompt_tokens"].as_u64().expect("prompt_tokens") > 20,
        "{first}"
    );
    assert_eq!(first["cached_tokens"], 0, "{first}");
    assert!(
        !first["reply"].as_str().expect("reply").is_empty(),
        "{first}"
    );
    let second = json(&rt, "alpha", "/chat", r#"{"message": "Who is the robot?"}"#).await;
    assert!(
        second["cached_tokens"].as_u64().expect("cached_tokens") >= 16,
        "the system prompt is shared: {second}"
    );
    assert_eq!(
        settled_sessions(&rt, "alpha").await,
        0,
        "sessions close with their request"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_example_streams_tokens() {
    let (rt, _eng) = runtime(&[("alpha", "isolated", "")]);
    let (status, text, frames) = call(
        &rt,
        "alpha",
        "/chat",
        r#"{"message": "Tell me a story.", "stream": true, "max_tokens": 12}"#,
    )
    .await;
    assert_eq!(status, 200, "{text}");
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("NDJSON line"))
        .collect();
    let tokens = lines.iter().filter(|l| l.get("token").is_some()).count();
    assert!(tokens >= 2, "{text}");
    assert!(
        frames >= tokens,
        "each token is its own body frame: {frames} frames for {tokens} tokens"
    );
    let summary = lines.last().expect("summary");
    assert!(
        summary["prompt_tokens"].as_u64().expect("summary") > 0,
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn classify_example_forks_a_warmed_session() {
    let (rt, _eng) = runtime(&[("alpha", "isolated", "")]);
    let body = r#"{"texts": ["The cat played in the sun.", "The boy fell and hurt his knee."]}"#;
    let first = json(&rt, "alpha", "/classify", body).await;
    let labels = first["labels"].as_array().expect("labels");
    assert_eq!(labels.len(), 2, "{first}");
    assert!(
        first["cached_tokens"].as_u64().expect("cached") > 0,
        "forks reuse the warmed examples: {first}"
    );
    assert_eq!(
        settled_sessions(&rt, "alpha").await,
        0,
        "forks close with their request"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_example_restores_its_named_session() {
    let (rt, _eng) = runtime(&[("alpha", "isolated", "")]);
    let turn = |m: &str| format!(r#"{{"conversation": "c1", "message": "{m}"}}"#);
    let first = json(&rt, "alpha", "/agent", &turn("Hello owl.")).await;
    assert_eq!(first["restored"], false, "{first}");
    let second = json(&rt, "alpha", "/agent", &turn("What did I say?")).await;
    assert_eq!(second["restored"], true, "{second}");
    assert!(
        second["context_tokens"].as_u64() > first["context_tokens"].as_u64(),
        "{first} {second}"
    );
    assert!(
        second["cached_tokens"].as_u64().expect("cached") > 0,
        "the restored context comes from the cache: {second}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn infinite_loop_is_interrupted_within_its_deadline() {
    let (rt, _eng) = runtime(&[("bad", "isolated", "wall_time_ms = 200\n")]);
    let started = Instant::now();
    let (status, text, _) = call(&rt, "bad", "/misbehave/loop", "").await;
    let took = started.elapsed();
    assert_eq!(status, 500, "{text}");
    assert!(text.contains("wall-time limit"), "{text}");
    // A guest's failure answers in the OpenAI error shape, as every other error of the host.
    let v: serde_json::Value = serde_json::from_str(&text).expect("a JSON error body");
    assert_eq!(v["error"]["code"], "component_failed", "{v}");
    assert_eq!(v["error"]["type"], "server_error", "{v}");
    assert!(
        took < Duration::from_millis(1000),
        "interrupted after {took:?} (limit 200 ms)"
    );
    let (status, text, _) = call(&rt, "bad", "/misbehave/ok", "").await;
    assert_eq!(
        (status, text.as_str()),
        (200, "ok"),
        "the namespace keeps serving"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_bomb_stops_at_its_cap() {
    let (rt, _eng) = runtime(&[("bad", "isolated", "memory_bytes = 16777216\n")]);
    let (status, text, _) = call(&rt, "bad", "/misbehave/bomb", "").await;
    assert_eq!(status, 500, "{text}");
    assert!(text.contains("memory limit"), "{text}");
    assert!(rt.stats().failed.load(Relaxed) >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traps_fail_only_their_own_request() {
    let (rt, _eng) = runtime(&[("bad", "isolated", ""), ("good", "isolated", "")]);
    let bad = [
        "/misbehave/trap",
        "/misbehave/overflow",
        "/misbehave/trap",
        "/misbehave/overflow",
    ];
    let mut tasks = Vec::new();
    for (i, path) in bad.into_iter().enumerate() {
        let rt2 = rt.clone();
        tasks.push(tokio::spawn(async move {
            ("bad", path, call(&rt2, "bad", path, "").await)
        }));
        let rt2 = rt.clone();
        let good = if i % 2 == 0 { "/hello/x" } else { "/chat" };
        let body = if i % 2 == 0 {
            ""
        } else {
            r#"{"message": "hi", "max_tokens": 4}"#
        };
        tasks.push(tokio::spawn(async move {
            ("good", good, call(&rt2, "good", good, body).await)
        }));
    }
    for t in tasks {
        let (ns, path, (status, text, _)) = t.await.expect("task");
        if ns == "bad" {
            assert_eq!(status, 500, "{path}: {text}");
            let why = if path.ends_with("trap") {
                "trapped"
            } else {
                "overflowed its stack"
            };
            assert!(text.contains(why), "{path}: {text}");
        } else {
            assert_eq!(status, 200, "{path}: {text}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_host_call_argument_is_refused_before_copying() {
    let (rt, _eng) = runtime(&[("bad", "isolated", "max_host_call_bytes = 4096\n")]);
    let before = rt.stats().host_call_bytes.load(Relaxed);
    let (status, text, _) = call(&rt, "bad", "/misbehave/oversize?bytes=2000000", "").await;
    assert_eq!(status, 200, "{text}");
    assert!(
        text.contains("refused: invalid argument") && text.contains("max_host_call_bytes = 4096"),
        "{text}"
    );
    assert_eq!(rt.stats().host_call_refused.load(Relaxed), 1);
    assert_eq!(
        rt.stats().host_call_bytes.load(Relaxed),
        before,
        "nothing was copied out of the guest"
    );
    let (_, text, _) = call(&rt, "bad", "/misbehave/oversize?bytes=100", "").await;
    assert!(text.starts_with("accepted"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_components_are_refused_with_the_reason() {
    let (rt, eng) = runtime(&[("alpha", "isolated", "")]);
    let err = |bytes: &[u8]| {
        rt.check_component("probe.wasm", bytes)
            .expect_err("refused")
            .to_string()
    };
    let random: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    assert!(
        err(&random).contains("not a WebAssembly binary"),
        "{}",
        err(&random)
    );
    let core = b"\0asm\x01\0\0\0";
    assert!(
        err(core).contains("a core WebAssembly module, not a component"),
        "{}",
        err(core)
    );
    let unsatisfied = std::fs::read(guest("unsatisfied")).expect("guest");
    let msg = err(&unsatisfied);
    assert!(
        msg.contains("unsatisfied import") && msg.contains("memoria-test:unsatisfied/missing"),
        "{msg}"
    );
    let trivial = std::fs::read(guest("trivial")).expect("guest");
    assert!(
        err(&trivial).contains("does not export wasi:http/incoming-handler"),
        "{}",
        err(&trivial)
    );
    let mut truncated = std::fs::read(guest("hello")).expect("guest");
    truncated.truncate(truncated.len() / 2);
    assert!(
        err(&truncated).contains("invalid component"),
        "{}",
        err(&truncated)
    );

    let dir = std::env::temp_dir().join(format!("memoria-bad-component-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let bad = dir.join("core.wasm");
    std::fs::write(&bad, core).expect("write");
    let spec: NamespaceSpec =
        toml::from_str(&format!("component = {:?}", bad.display().to_string())).expect("spec");
    let tenants = Tenants::new(vec![("broken".into(), spec)]).expect("tenants");
    let e = Runtime::new(&tenants, eng, RuntimeConfig::default()).expect_err("refused at load");
    assert!(
        e.to_string().starts_with("namespaces.broken: ")
            && e.to_string().contains("core WebAssembly module"),
        "{e}"
    );
    assert!(matches!(
        rt.check_component("x", core),
        Err(ComponentError::CoreModule { .. })
    ));
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn isolated_namespaces_never_share_blocks_and_grouped_ones_do() {
    let (rt, eng) = runtime(&[
        ("alpha", "isolated", ""),
        ("beta", "isolated", ""),
        ("gamma", "group:shared", ""),
        ("delta", "group:shared", ""),
    ]);
    let ask = r#"{"message": "Is the sky blue?", "max_tokens": 4}"#;
    json(&rt, "alpha", "/chat", ask).await;
    let beta = json(&rt, "beta", "/chat", ask).await;
    assert_eq!(beta["cached_tokens"], 0, "{beta}");
    assert_eq!(hit_tokens(&eng, 2), 0, "beta never hits alpha's blocks");
    json(&rt, "gamma", "/chat", ask).await;
    let delta = json(&rt, "delta", "/chat", ask).await;
    // A group pads its hits by default, so the guest's usage hides them; the pool counts them.
    assert_eq!(delta["cached_tokens"], 0, "{delta}");
    assert!(hit_tokens(&eng, 4) >= 16, "delta hits gamma's blocks");
    let (_, stats, _) = call(&rt, "beta", "/misbehave/stats", "").await;
    assert!(
        stats.starts_with("hit_tokens=0 "),
        "a guest sees its own namespace's counters: {stats}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_cannot_open_anothers_named_session() {
    let (rt, _eng) = runtime(&[
        ("alpha", "isolated", ""),
        ("beta", "isolated", ""),
        ("gamma", "group:shared", ""),
    ]);
    let (_, saved, _) = call(&rt, "alpha", "/misbehave/save?name=secret", "").await;
    assert_eq!(saved, "saved");
    for other in ["beta", "gamma"] {
        let (_, text, _) = call(&rt, other, "/misbehave/restore?name=secret", "").await;
        assert!(text.starts_with("refused: not found"), "{other}: {text}");
    }
    let (_, text, _) = call(&rt, "alpha", "/misbehave/restore?name=secret", "").await;
    assert!(
        text.starts_with("restored ") && !text.starts_with("restored 0 "),
        "{text}"
    );
    let other = json(
        &rt,
        "beta",
        "/agent",
        r#"{"conversation": "c1", "message": "hi"}"#,
    )
    .await;
    assert_eq!(other["restored"], false);
}

#[test]
fn example_tenants_toml_defines_the_four_namespaces() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../guest/examples/tenants.toml");
    let text = std::fs::read_to_string(&path).expect("tenants.toml");
    let doc: toml::Table = toml::from_str(&text).expect("toml");
    let nss = doc["namespaces"].as_table().expect("[namespaces]");
    let specs: Vec<(String, NamespaceSpec)> = nss
        .iter()
        .map(|(k, v)| {
            (
                k.clone(),
                v.clone()
                    .try_into()
                    .unwrap_or_else(|e| panic!("namespaces.{k}: {e}")),
            )
        })
        .collect();
    let tenants = Tenants::new(specs).expect("valid");
    for ns in ["alpha", "beta", "gamma", "delta"] {
        let n = tenants.get(ns).expect(ns);
        let keys: Vec<&str> = n.spec.components.keys().map(String::as_str).collect();
        assert_eq!(keys, ["agent", "chat", "classify"], "{ns}");
    }
    let table = tenants.registry_table();
    let salt = |ns: &str| tenants.get(ns).and_then(|n| table.salt(n.id));
    assert_ne!(salt("alpha"), salt("beta"));
    assert_eq!(salt("gamma"), salt("delta"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guests_get_embeddings_of_the_model_width_from_the_engines_cache() {
    let (rt, eng) = runtime(&[("alpha", "isolated", ""), ("beta", "isolated", "")]);
    let (status, text, _) = call(&rt, "alpha", "/misbehave/embed", "").await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(
        text,
        format!("count=2 dims={}", eng.model().hparams().n_embd)
    );
    // The guest's vectors went through the engine into its cache, under alpha's salt: the
    // OpenAI side (the same `EngineHandle::embed`) finds them there, beta does not.
    let texts: Vec<Vec<u32>> = ["a happy dog", "a sad cat"]
        .iter()
        .map(|t| eng.tokenizer().encode(t, true, false))
        .collect();
    let tenants = Tenants::new(
        [
            ("alpha", spec("isolated", "")),
            ("beta", spec("isolated", "")),
        ]
        .into_iter()
        .map(|(n, s)| (n.to_string(), s))
        .collect(),
    )
    .expect("tenants");
    let (alpha, beta) = (
        tenants.get("alpha").expect("alpha"),
        tenants.get("beta").expect("beta"),
    );
    let computed = eng.stats().snapshot().embeddings;
    assert_eq!(computed, 2);
    let hits = eng.embed(alpha.id, &texts).await.expect("embed");
    assert!(
        hits.iter().all(|e| e.cached),
        "alpha's guest filled the cache"
    );
    let misses = eng.embed(beta.id, &texts).await.expect("embed");
    assert!(
        misses.iter().all(|e| !e.cached),
        "isolated beta never hits alpha's"
    );
    assert_eq!(eng.stats().snapshot().embeddings, computed + 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn named_sessions_survive_a_restart_with_a_durable_store() {
    let dir = std::env::temp_dir().join(format!("memoria-durable-sessions-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let turn = r#"{"conversation": "c7", "message": "Remember the red ball."}"#;
    let mut lengths = Vec::new();
    for round in 0..2 {
        let stack = memoria_store::TierStack::open(&dir, memoria_store::StoreOptions::default())
            .expect("store");
        let model = Model::load(shared::path("models/stories260K-f32.gguf")).expect("model loads");
        let tok = Tokenizer::from_gguf(model.gguf()).expect("tokenizer");
        let cfg = EngineConfig {
            store: Some(Arc::new(stack)),
            ..EngineConfig::default()
        };
        let eng = EngineHandle::start(Arc::new(model), Arc::new(tok), cfg).expect("engine");
        let specs = vec![
            ("alpha".to_string(), spec("isolated", "")),
            ("beta".to_string(), spec("isolated", "")),
        ];
        let tenants = Tenants::new(specs).expect("tenants");
        let cfg = RuntimeConfig {
            durable_sessions: true,
            ..RuntimeConfig::default()
        };
        eng.register_namespaces(tenants.registry_table())
            .expect("namespaces registered");
        let rt = Runtime::new(&tenants, eng.clone(), cfg).expect("runtime");
        let r = json(&rt, "alpha", "/agent", turn).await;
        assert_eq!(r["restored"], round == 1, "round {round}: {r}");
        lengths.push(r["context_tokens"].as_u64().expect("context_tokens"));
        let (_, text, _) = call(&rt, "beta", "/misbehave/restore?name=agent-c7", "").await;
        assert!(text.starts_with("refused: not found"), "beta: {text}");
        settled_sessions(&rt, "alpha").await;
        drop(rt);
        eng.shutdown();
    }
    assert!(
        lengths[1] > lengths[0],
        "the second turn extends the restored context: {lengths:?}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_and_token_quotas_hold_per_namespace() {
    let (rt, _eng) = runtime(&[
        ("one", "isolated", "max_sessions = 1\n"),
        ("short", "isolated", "max_tokens_per_request = 3\n"),
    ]);
    let (status, text, _) = call(
        &rt,
        "one",
        "/classify",
        r#"{"texts": ["The sun is warm."]}"#,
    )
    .await;
    assert_eq!(status, 429, "a fork needs a second session: {text}");
    assert!(text.contains("max_sessions"), "{text}");
    assert_eq!(settled_sessions(&rt, "one").await, 0);
    let (status, text, _) = call(
        &rt,
        "short",
        "/chat",
        r#"{"message": "Go on.", "stream": true, "max_tokens": 20}"#,
    )
    .await;
    assert_eq!(status, 200, "{text}");
    let tokens = text.lines().filter(|l| l.contains("\"token\"")).count();
    assert!(
        (1..=3).contains(&tokens),
        "max_tokens_per_request caps the generation: {text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compiled_components_are_cached_on_disk_and_reused() {
    let dir = std::env::temp_dir().join(format!("memoria-cwasm-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("cache dir");
    let tenants = Tenants::new(vec![("alpha".into(), spec("isolated", ""))]).expect("tenants");
    let eng = engine();
    let cfg = RuntimeConfig {
        cache_dir: Some(dir.clone()),
        ..RuntimeConfig::default()
    };
    eng.register_namespaces(tenants.registry_table())
        .expect("namespaces registered");
    let first = Runtime::new(&tenants, eng.clone(), cfg.clone()).expect("compiles");
    drop(first);
    let cached = std::fs::read_dir(&dir).expect("list").filter(|e| {
        e.as_ref()
            .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "cwasm"))
    });
    assert_eq!(
        cached.count(),
        5,
        "one compiled file per distinct component"
    );
    let second = Runtime::new(&tenants, eng, cfg).expect("loads compiled code");
    let (status, text, _) = call(&second, "alpha", "/hello/again", "").await;
    assert_eq!(
        (status, text.as_str()),
        (200, "hello from /ns/alpha/hello/again")
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// `POST body` to `addr` with a one-shot HTTP/1.1 connection; returns the status and body.
fn http_post(addr: &str, path: &str, body: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    let req = format!(
        "POST {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).expect("send");
    let mut raw = String::new();
    s.read_to_string(&mut raw).expect("read");
    let (head, rest) = raw.split_once("\r\n\r\n").expect("response head");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("status");
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    let mut body = String::new();
    if chunked {
        let mut rest = rest;
        while let Some((size, after)) = rest.split_once("\r\n") {
            let n = usize::from_str_radix(size.trim(), 16).expect("chunk size");
            if n == 0 {
                break;
            }
            body.push_str(&after[..n]);
            rest = &after[n + 2..];
        }
    } else {
        body.push_str(rest);
    }
    (status, body)
}

#[test]
fn memoria_serve_routes_the_example_config_to_each_example() {
    let dir = std::env::temp_dir().join(format!("memoria-serve-tenants-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut config =
        std::fs::read_to_string(root.join("guest/examples/tenants.toml")).expect("tenants.toml");
    for g in ["chat", "classify", "agent"] {
        let rel = format!("\"target/guests/wasm32-wasip2/release/{g}.wasm\"");
        config = config.replace(&rel, &format!("{:?}", guest(g).display().to_string()));
    }
    let config_path = dir.join("tenants.toml");
    std::fs::write(&config_path, config).expect("write config");
    let mut child = crate::bin::command()
        .arg("serve")
        .arg("--config")
        .arg(&config_path)
        .args(["--port", "0", "-m"])
        .arg(shared::path("models/stories260K-f32.gguf"))
        .env_remove("RUST_BACKTRACE")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("memoria serve starts");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stdout));
    let addr = lines
        .find_map(|l| {
            l.ok()?
                .strip_prefix("memoria: listening on http://")
                .map(str::to_string)
        })
        .expect("the server prints its address");
    let results = std::panic::catch_unwind(|| {
        let (status, chat) = http_post(
            &addr,
            "/ns/alpha/chat",
            r#"{"message": "Where is the ball?"}"#,
        );
        assert_eq!(status, 200, "{chat}");
        let chat: serde_json::Value = serde_json::from_str(&chat).expect("chat JSON");
        assert!(
            !chat["reply"].as_str().expect("reply").is_empty()
                && chat["prompt_tokens"].as_u64() > Some(0),
            "{chat}"
        );
        let (status, classify) = http_post(
            &addr,
            "/ns/beta/classify",
            r#"{"texts": ["The dog is happy."]}"#,
        );
        assert_eq!(status, 200, "{classify}");
        assert!(classify.contains("\"labels\""), "{classify}");
        let turn = r#"{"conversation": "e2e", "message": "Hello."}"#;
        let (_, first) = http_post(&addr, "/ns/gamma/agent", turn);
        let (status, second) = http_post(&addr, "/ns/gamma/agent", turn);
        assert_eq!(status, 200, "{second}");
        assert!(
            first.contains("\"restored\":false") && second.contains("\"restored\":true"),
            "{first} {second}"
        );
        let (status, stream) = http_post(
            &addr,
            "/ns/delta/chat",
            r#"{"message": "Go on.", "stream": true, "max_tokens": 6}"#,
        );
        assert_eq!(status, 200, "{stream}");
        assert!(
            stream.lines().filter(|l| l.contains("\"token\"")).count() >= 2,
            "{stream}"
        );
    });
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(dir);
    if let Err(p) = results {
        std::panic::resume_unwind(p);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn padded_groups_hold_back_and_hide_component_hits() {
    // Two groups: `g` pads hits (the default of a group), `h` does not.
    let spec = |group: &str, timing: &str| -> NamespaceSpec {
        let text = format!(
            "isolation = \"group:{group}\"\n{timing}[components]\nchat = {:?}\n",
            guest("chat").display().to_string()
        );
        toml::from_str(&text).expect("namespace spec")
    };
    let off = "hit_timing = \"off\"\n";
    let specs = vec![
        ("a".to_string(), spec("g", "")),
        ("b".to_string(), spec("g", "")),
        ("c".to_string(), spec("h", off)),
        ("d".to_string(), spec("h", off)),
    ];
    let tenants = Tenants::new(specs).expect("tenants");
    let eng = engine();
    eng.register_namespaces(tenants.registry_table())
        .expect("namespaces registered");
    let rt = Runtime::new(&tenants, eng, RuntimeConfig::default()).expect("runtime");
    let message = |i: usize| {
        format!(
            r#"{{"message": "Tell me story number {i} about Lily, Tim, the big red ball and the little dog in the park."}}"#
        )
    };
    for i in 0..4 {
        for stream in [false, true] {
            let body = if stream {
                message(i).replace('}', r#", "stream": true}"#)
            } else {
                message(i)
            };
            // A miss in one namespace, then the same prompt from its neighbour: a group hit.
            for (victim, attacker, padded) in [("a", "b", true), ("c", "d", false)] {
                let (status, text, _) = call(&rt, victim, "/chat", &body).await;
                assert_eq!(status, 200, "{text}");
                let t = Instant::now();
                let (status, text, _) = call(&rt, attacker, "/chat", &body).await;
                let took = t.elapsed();
                assert_eq!(status, 200, "{text}");
                let last = text.lines().last().unwrap_or_default();
                let v: serde_json::Value = serde_json::from_str(last).expect("json");
                let cached = v["cached_tokens"].as_u64().expect("cached_tokens");
                if padded {
                    assert_eq!(cached, 0, "a padded namespace's usage hides its hits: {v}");
                    assert!(
                        took >= memoria_tenant::BUCKET,
                        "a padded hit waits at least one bucket: {took:?}"
                    );
                } else {
                    assert!(cached > 16, "an unpadded group hit shows: {v}");
                }
            }
        }
    }
}
