//! Host events follow a block down the tiers, on a real Valkey/Redis server (spawned by the
//! test): a host with a 1 MiB pool, a 1 MiB cold RAM tier and a redb store answers one prompt
//! (its blocks announced `stored` hot, and on disk once written through), then enough other
//! prompts to push it out of the pool (`removed` hot, `stored` cold) and out of cold RAM
//! (`removed` cold) — so the stream says where each block is, not only what was served.

use std::collections::{BTreeMap, BTreeSet};

use memoria_store::remote::test_server::TestServer;
use serde_json::json;

use super::events::{entries, field};
use super::eventually;
use crate::serve::client::{get, post};
use crate::serve::server::{Server, model, temp_dir};

/// The routing keys (hex) of the whole blocks of `tokens` under the default label.
pub(super) fn hex(tokens: &[u32]) -> BTreeSet<String> {
    memoria_kv::route_key::route_chain("", 16, tokens, 64)
        .iter()
        .map(|h| h.0.iter().map(|b| format!("{b:02x}")).collect())
        .collect()
}

/// Every (kind, tier) the stream says of each key, in stream order.
pub(super) fn history(es: &[(String, Vec<(String, String)>)]) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (_, f) in es {
        let what = format!("{} {}", field(f, "kind"), field(f, "tier"));
        for h in field(f, "hashes").split(',').filter(|h| !h.is_empty()) {
            out.entry(h.to_string()).or_default().push(what.clone());
        }
    }
    out
}

#[test]
fn events_follow_a_block_from_the_pool_to_cold_ram_and_out() {
    let srv = TestServer::start().unwrap_or_else(|e| panic!("{e}"));
    let dir = temp_dir("route-events-tiers");
    let cfg = dir.join("host.toml");
    std::fs::write(
        &cfg,
        format!(
            "[cache]\nbudget_mb = 1\n\n[store]\ncold_mb = 1\n\n[store.remote]\nurl = \"{}\"\n\
             events = true\nliveness_ttl_s = 1\nhost_id = \"tiers-host\"\n",
            srv.url()
        ),
    )
    .expect("write host.toml");
    let store = dir.join("store");
    let host = Server::start(
        "route-events-tiers",
        &[
            "-m",
            &model(),
            "--config",
            cfg.to_str().expect("utf-8"),
            "--store",
            store.to_str().expect("utf-8"),
            "--parallel",
            "1",
            "-c",
            "256",
        ],
    );
    let serve = |tokens: &[u32]| {
        let body = json!({"prompt": tokens, "max_tokens": 1});
        let r = post(host.addr, "/v1/completions", &body, &[]);
        assert_eq!(r.status, 200, "{}", r.text());
    };
    let first: Vec<u32> = (100..164).collect();
    let keys = hex(&first);
    assert_eq!(keys.len(), 4);
    serve(&first);
    let stream = "memoria:events:tiers-host";
    let mut conn = srv.connection().expect("connect");
    let says = |conn: &mut redis::Connection, what: &str| {
        let h = history(&entries(conn, stream));
        keys.iter()
            .all(|k| h.get(k).is_some_and(|v| v.iter().any(|w| w == what)))
    };
    assert!(
        eventually(200, || says(&mut conn, "stored hot")),
        "the first prompt was never announced hot: {:?}",
        entries(&mut conn, stream)
    );
    // Other prompts (12 blocks each, distinct from their first block on) until the first one's blocks left the
    // pool and then cold RAM (the stories260K model's f16 blocks are ~10 KiB: ~100 fit a MiB).
    let mut evicted_cold = false;
    for round in 0..120u32 {
        // The first token tells the rounds apart (the vocabulary has 512 pieces).
        let prompt: Vec<u32> = std::iter::once(300 + round)
            .chain((1..192u32).map(|i| 10 + (i * 7 + round) % 480))
            .collect();
        serve(&prompt);
        if round % 10 == 9 && says(&mut conn, "removed cold") {
            evicted_cold = true;
            break;
        }
    }
    let stats = get(host.addr, "/stats", &[]).json();
    assert!(
        evicted_cold || eventually(100, || says(&mut conn, "removed cold")),
        "the first prompt never left cold RAM in the stream: {:?}\nstats: {stats}",
        history(&entries(&mut conn, stream))
            .into_iter()
            .filter(|(k, _)| keys.contains(k))
            .collect::<Vec<_>>()
    );
    let h = history(&entries(&mut conn, stream));
    for k in &keys {
        let seen = &h[k];
        let at = |what: &str| seen.iter().position(|w| w == what);
        let (Some(hot), Some(gone), Some(cold), Some(out)) = (
            at("stored hot"),
            at("removed hot"),
            at("stored cold"),
            at("removed cold"),
        ) else {
            panic!("{k}: {seen:?}")
        };
        assert!(hot < gone && gone <= cold && cold < out, "{k}: {seen:?}");
        assert!(
            seen.iter().any(|w| w == "stored disk"),
            "written through to the store: {k}: {seen:?}"
        );
        assert!(
            !seen.iter().any(|w| w == "removed disk"),
            "still on disk: {k}: {seen:?}"
        );
    }
    // The cold tier and the pool did evict (the figures behind those events).
    assert!(
        stats["tiers"]["cold"]["evictions"].as_u64() > Some(0),
        "{stats}"
    );
}
