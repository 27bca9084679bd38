//! `memoria route --events` end to end on a real Valkey/Redis server (spawned by the test):
//! three hosts publish what they hold; prompts sharing a prefix go to the host that served it,
//! and once that host's liveness key expired they go elsewhere and still succeed. The stream
//! carries routing-chain hashes only (never token ids), and a restart publishes `cleared`
//! under a new epoch.

use std::collections::BTreeSet;
use std::time::Duration;

use memoria_store::remote::test_server::TestServer;
use redis::Value;
use serde_json::json;

use super::backend;
use super::eventually;
use super::router::Router;
use crate::serve::client::{get, post};
use crate::serve::server::{Server, model, temp_dir};

/// A host config publishing events to `url`, with `extra` lines in `[store.remote]`.
pub(super) fn config(name: &str, url: &str, extra: &str) -> String {
    let path = temp_dir(name).join("host.toml");
    let text =
        format!("[store.remote]\nurl = \"{url}\"\nevents = true\nliveness_ttl_s = 1\n{extra}\n");
    std::fs::write(&path, text).expect("write host.toml");
    path.to_str().expect("utf-8 path").to_string()
}

fn metric(text: &str, line_start: &str) -> Option<u64> {
    text.lines()
        .find(|l| l.starts_with(line_start))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

/// `XRANGE key - +` as `(id, [(field, value)])`.
pub(super) fn entries(
    conn: &mut redis::Connection,
    key: &str,
) -> Vec<(String, Vec<(String, String)>)> {
    let v: Value = redis::cmd("XRANGE")
        .arg(key)
        .arg("-")
        .arg("+")
        .query(conn)
        .expect("XRANGE");
    let text = |v: &Value| match v {
        Value::BulkString(b) => String::from_utf8(b.clone()).expect("utf-8"),
        other => panic!("not a string: {other:?}"),
    };
    let Value::Array(es) = v else {
        panic!("XRANGE reply {v:?}")
    };
    es.iter()
        .map(|e| {
            let Value::Array(pair) = e else {
                panic!("entry {e:?}")
            };
            let Value::Array(f) = &pair[1] else {
                panic!("fields {e:?}")
            };
            let fields = f.chunks(2).map(|p| (text(&p[0]), text(&p[1]))).collect();
            (text(&pair[0]), fields)
        })
        .collect()
}

pub(super) fn field<'a>(fields: &'a [(String, String)], name: &str) -> &'a str {
    fields
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
        .unwrap_or_else(|| panic!("no {name} in {fields:?}"))
}

/// The hosts' URLs, once the router sees every one of them live.
pub(super) fn wait_live(r: &Router, hosts: &[Server]) -> Vec<String> {
    let urls: Vec<String> = hosts.iter().map(|h| format!("http://{}", h.addr)).collect();
    let live = |u: &str| format!("memoria_route_backend_live{{backend=\"{u}\"}} 1");
    assert!(
        eventually(200, || {
            let t = get(r.addr, "/metrics", &[]).text();
            urls.iter().all(|u| t.contains(&live(u)))
        }),
        "the hosts never became live: {}\nrouter: {}",
        get(r.addr, "/metrics", &[]).text(),
        r.stderr()
    );
    urls
}

/// Serves `prefixes[i]` on host `i` directly and waits until the router learnt each one
/// (at least 2 routing keys per host).
pub(super) fn teach(r: &Router, hosts: &[Server], prefixes: &[String], urls: &[String]) {
    for (h, p) in hosts.iter().zip(prefixes) {
        let body = json!({"prompt": format!("{p} Start."), "max_tokens": 2});
        let resp = post(h.addr, "/v1/completions", &body, &[]);
        assert_eq!(resp.status, 200, "{}", resp.text());
    }
    let keys = |u: &str| format!("memoria_route_backend_prefix_keys{{backend=\"{u}\"}}");
    assert!(
        eventually(200, || {
            let t = get(r.addr, "/metrics", &[]).text();
            urls.iter().all(|u| metric(&t, &keys(u)).unwrap_or(0) >= 2)
        }),
        "the router never learnt the prefixes: {}\nrouter: {}",
        get(r.addr, "/metrics", &[]).text(),
        r.stderr()
    );
}

#[test]
fn route_events_send_a_prefix_to_its_host_and_move_when_its_liveness_expires() {
    let srv = TestServer::start().unwrap_or_else(|e| panic!("{e}"));
    let url = srv.url();
    let m = model();
    let cfg = config("route-events", &url, "");
    let mut hosts: Vec<Server> = (0..3)
        .map(|i| Server::start(&format!("route-events-{i}"), &["-m", &m, "--config", &cfg]))
        .collect();
    for h in &hosts {
        assert!(h.stderr().contains("host events as"), "{}", h.stderr());
    }
    let refs: Vec<&Server> = hosts.iter().collect();
    let r = Router::start("route-events", &refs, &["--events", &url]);
    let urls = wait_live(&r, &hosts);
    // One prefix per host, each served directly by its host first.
    let prefixes: Vec<String> = (0..3)
        .map(|i| {
            format!("Host {i} tells the tale of a cat and a dog who shared a small red boat. ")
                .repeat(3)
        })
        .collect();
    teach(&r, &hosts, &prefixes, &urls);
    for (i, p) in prefixes.iter().enumerate() {
        for q in ["What next?", "Who sailed?", "Why red?"] {
            let body = json!({"prompt": format!("{p} {q}"), "max_tokens": 2});
            let resp = post(r.addr, "/v1/completions", &body, &[]);
            assert_eq!(resp.status, 200, "{}\nrouter: {}", resp.text(), r.stderr());
            assert_eq!(backend(&resp), urls[i], "prefix {i} went elsewhere");
            let blocks: usize = resp
                .header("x-memoria-prefix-blocks")
                .and_then(|v| v.parse().ok())
                .expect("x-memoria-prefix-blocks");
            assert!(blocks >= 2, "prefix {i}: {blocks} blocks matched");
        }
    }
    let t = get(r.addr, "/metrics", &[]).text();
    assert!(
        metric(&t, "memoria_route_choices_total{reason=\"prefix\"}") >= Some(9),
        "{t}"
    );
    let host_metrics = get(hosts[0].addr, "/metrics", &[]).text();
    assert!(
        metric(&host_metrics, "memoria_events_published_total") >= Some(2),
        "{host_metrics}"
    );
    let stats = get(hosts[0].addr, "/stats", &[]).json();
    assert!(stats["events"]["published"].as_u64() >= Some(2), "{stats}");

    // Host 0 dies; its liveness key expires and it leaves the table.
    let dead = urls[0].clone();
    let id = dead.trim_start_matches("http://").replace(':', "_");
    drop(hosts.remove(0));
    let mut conn = srv.connection().expect("connect");
    let live_key = format!("memoria:host:{id}");
    assert!(
        eventually(200, || redis::cmd("EXISTS")
            .arg(&live_key)
            .query::<u64>(&mut conn)
            .expect("EXISTS")
            == 0),
        "{live_key} did not expire"
    );
    let gone = format!("memoria_route_backend_live{{backend=\"{dead}\"}} 0");
    assert!(
        eventually(200, || get(r.addr, "/metrics", &[]).text().contains(&gone)),
        "{}",
        get(r.addr, "/metrics", &[]).text()
    );
    let mut moved = BTreeSet::new();
    for q in ["After the host died?", "Still there?"] {
        let body = json!({"prompt": format!("{} {q}", prefixes[0]), "max_tokens": 2});
        let resp = post(r.addr, "/v1/completions", &body, &[]);
        assert_eq!(resp.status, 200, "{}\nrouter: {}", resp.text(), r.stderr());
        moved.insert(backend(&resp));
    }
    assert!(!moved.contains(&dead), "still routed to {dead}: {moved:?}");
    // The other prefixes stay where they were.
    let body = json!({"prompt": format!("{} Again?", prefixes[1]), "max_tokens": 2});
    assert_eq!(
        backend(&post(r.addr, "/v1/completions", &body, &[])),
        urls[1]
    );
}

#[test]
fn route_events_carry_hashes_not_tokens_and_a_restart_clears() {
    let srv = TestServer::start().unwrap_or_else(|e| panic!("{e}"));
    let url = srv.url();
    let m = model();
    let cfg = config("route-events-iso", &url, "host_id = \"iso-host\"");
    let host = Server::start("route-events-iso", &["-m", &m, "--config", &cfg]);
    let tokens: Vec<u32> = (100..164).collect();
    let resp = post(
        host.addr,
        "/v1/completions",
        &json!({"prompt": tokens, "max_tokens": 2}),
        &[],
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let want: BTreeSet<String> = memoria_kv::route_key::route_chain("", 16, &tokens, 64)
        .iter()
        .map(|h| h.0.iter().map(|b| format!("{b:02x}")).collect())
        .collect();
    assert_eq!(want.len(), 4);
    let mut conn = srv.connection().expect("connect");
    let stream = "memoria:events:iso-host";
    let mut seen = Vec::new();
    assert!(
        eventually(200, || {
            seen = entries(&mut conn, stream);
            seen.iter().any(|(_, f)| field(f, "kind") == "stored")
        }),
        "no stored event: {seen:?}\nhost: {}",
        host.stderr()
    );
    let allowed = ["epoch", "seq", "kind", "tier", "hashes"];
    let mut announced = BTreeSet::new();
    for (id, f) in &seen {
        let names: Vec<&str> = f.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, allowed, "entry {id}: {f:?}");
        assert!(field(f, "epoch").bytes().all(|c| c.is_ascii_digit()));
        assert!(field(f, "seq").bytes().all(|c| c.is_ascii_digit()));
        assert!(["stored", "removed", "cleared"].contains(&field(f, "kind")));
        assert!(["hot", "cold", "disk"].contains(&field(f, "tier")));
        for h in field(f, "hashes").split(',').filter(|h| !h.is_empty()) {
            assert!(
                h.len() == 64 && h.bytes().all(|c| c.is_ascii_hexdigit()),
                "{h}"
            );
            announced.insert(h.to_string());
        }
        // No token id in any value, whatever its form.
        for (_, v) in f {
            for part in v.split(',') {
                assert!(
                    part.len() >= 13 || !part.parse::<u32>().is_ok_and(|t| tokens.contains(&t)),
                    "a token id in entry {id}: {f:?}"
                );
            }
        }
    }
    assert_eq!(announced, want, "the announced keys are the routing chain");
    let (first_id, first) = &seen[0];
    assert_eq!(field(first, "kind"), "cleared", "{first_id}");
    assert_eq!(field(first, "seq"), "1");
    let epoch1: u64 = field(first, "epoch").parse().expect("epoch");
    let live: String = redis::cmd("GET")
        .arg("memoria:host:iso-host")
        .query(&mut conn)
        .expect("GET liveness");
    let live: serde_json::Value = serde_json::from_str(&live).expect("liveness JSON");
    assert_eq!(live["addr"], format!("http://{}", host.addr));
    assert_eq!(live["epoch"], epoch1);
    assert!(live["load"].is_u64(), "{live}");

    drop(host);
    std::thread::sleep(Duration::from_millis(5));
    let again = Server::start("route-events-iso-2", &["-m", &m, "--config", &cfg]);
    let mut later = Vec::new();
    assert!(
        eventually(200, || {
            later = entries(&mut conn, stream);
            later.len() > seen.len()
        }),
        "the restarted host published nothing: {later:?}\n{}",
        again.stderr()
    );
    let (_, restart) = &later[seen.len()];
    assert_eq!(field(restart, "kind"), "cleared");
    assert_eq!(field(restart, "seq"), "1");
    let epoch2: u64 = field(restart, "epoch").parse().expect("epoch");
    assert!(epoch2 > epoch1, "epoch {epoch2} after {epoch1}");
}
