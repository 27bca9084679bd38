//! A restarted host announces what its disk still holds, on a real Valkey/Redis server
//! (spawned by the test): a host with a redb store answers a prompt (its blocks announced
//! `stored` hot, then on disk once written through), stops on SIGTERM (saving the routing
//! keys of its blocks on disk) and starts again on the same store: behind the new epoch's
//! `cleared` its stream says `stored` on disk for every block of that prompt before any
//! request came, and `store verify` checks the saved keys.

use memoria_store::remote::test_server::TestServer;
use serde_json::json;

use super::events::{entries, field};
use super::events_tiers::{hex, history};
use super::eventually;
use crate::serve::client::post;
use crate::serve::server::{Server, model, temp_dir};
use crate::store::rewarm::stop;

#[test]
fn a_restarted_host_announces_the_blocks_its_disk_still_holds() {
    let srv = TestServer::start().unwrap_or_else(|e| panic!("{e}"));
    let dir = temp_dir("route-events-disk");
    let cfg = dir.join("host.toml");
    std::fs::write(
        &cfg,
        format!(
            "[store.remote]\nurl = \"{}\"\nevents = true\nliveness_ttl_s = 1\n\
             host_id = \"disk-host\"\n",
            srv.url()
        ),
    )
    .expect("write host.toml");
    let store = dir.join("store");
    let _ = std::fs::remove_dir_all(&store);
    let (m, cfg, store) = (
        model(),
        cfg.to_str().expect("utf-8").to_string(),
        store.to_str().expect("utf-8").to_string(),
    );
    let args = ["-m", &m, "--config", &cfg, "--store", &store];
    let host = Server::start("route-events-disk", &args);
    let tokens: Vec<u32> = (100..164).collect();
    let keys = hex(&tokens);
    assert_eq!(keys.len(), 4);
    let r = post(
        host.addr,
        "/v1/completions",
        &json!({"prompt": tokens, "max_tokens": 1}),
        &[],
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let stream = "memoria:events:disk-host";
    let mut conn = srv.connection().expect("connect");
    let on_disk = |es: &[(String, Vec<(String, String)>)]| {
        let h = history(es);
        keys.iter().all(|k| {
            h.get(k)
                .is_some_and(|v| v.iter().any(|w| w == "stored disk"))
        })
    };
    assert!(
        eventually(200, || on_disk(&entries(&mut conn, stream))),
        "the prompt's blocks were never announced on disk: {:?}\n{}",
        entries(&mut conn, stream),
        host.stderr()
    );
    let log = stop(host);
    let before = entries(&mut conn, stream).len();

    // The same store, no request: the disk's blocks are announced behind a new `cleared`.
    let again = Server::start("route-events-disk-2", &args);
    let mut later = Vec::new();
    assert!(
        eventually(200, || {
            later = entries(&mut conn, stream);
            later.len() > before && on_disk(&later[before..])
        }),
        "the restarted host did not announce its disk: {:?}\nfirst run: {log}\nnow: {}",
        later.get(before..),
        again.stderr()
    );
    let run2 = &later[before..];
    assert_eq!(field(&run2[0].1, "kind"), "cleared", "{run2:?}");
    let h = history(&run2[1..]);
    for k in &keys {
        assert_eq!(h[k], vec!["stored disk"], "{k}: {run2:?}");
    }
    assert!(
        again.stderr().contains("4 blocks on disk announced again"),
        "{}",
        again.stderr()
    );
    drop(again);
    let out = crate::bin::command()
        .args(["store", "verify", "--store", &store])
        .output()
        .expect("memoria store verify");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("the routing keys"),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
