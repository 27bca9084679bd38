//! Host events after an outage, on a real Valkey/Redis server (spawned by the test): while the
//! server is down a host's `stored` entries are lost (counted); once the server, restarted
//! empty, takes a write again, the host publishes `cleared` and then every routing key it holds
//! as `stored` (those announced before the outage and those served during it), so a router's
//! view of it is whole again.

use std::collections::BTreeSet;
use std::time::Duration;

use memoria_store::remote::test_server::TestServer;
use serde_json::json;

use super::events::{config, entries, field};
use super::events_tiers::hex;
use super::eventually;
use crate::serve::client::{get, post};
use crate::serve::server::{Server, model};

#[test]
fn after_an_outage_a_host_announces_everything_it_holds_again() {
    let mut srv = TestServer::start().unwrap_or_else(|e| panic!("{e}"));
    let url = srv.url();
    let cfg = config("route-events-resync", &url, "host_id = \"resync-host\"");
    let host = Server::start("route-events-resync", &["-m", &model(), "--config", &cfg]);
    let serve = |tokens: &[u32]| {
        let body = json!({"prompt": tokens, "max_tokens": 2});
        let r = post(host.addr, "/v1/completions", &body, &[]);
        assert_eq!(r.status, 200, "{}", r.text());
    };
    let errors = || {
        let s = get(host.addr, "/stats", &[]).json();
        s["events"]["errors"].as_u64().unwrap_or(0)
    };
    let (first, second): (Vec<u32>, Vec<u32>) = ((100..164).collect(), (300..364).collect());
    let stream = "memoria:events:resync-host";
    serve(&first);
    let mut conn = srv.connection().expect("connect");
    assert!(
        eventually(200, || entries(&mut conn, stream)
            .iter()
            .any(|(_, f)| field(f, "kind") == "stored")),
        "no stored event before the outage"
    );

    srv.kill();
    serve(&second);
    assert!(
        eventually(200, || errors() > 0),
        "the lost entry is counted"
    );
    srv.restart().unwrap_or_else(|e| panic!("{e}"));
    let mut conn = srv.connection().expect("reconnect");
    let want: BTreeSet<String> = hex(&first).union(&hex(&second)).cloned().collect();
    assert_eq!(want.len(), 8);
    let mut seen = Vec::new();
    assert!(
        eventually(200, || {
            seen = entries(&mut conn, stream);
            let cleared = seen.iter().position(|(_, f)| field(f, "kind") == "cleared");
            let stored: BTreeSet<String> = seen
                .iter()
                .skip(cleared.map_or(seen.len(), |i| i + 1))
                .filter(|(_, f)| field(f, "kind") == "stored")
                .flat_map(|(_, f)| {
                    field(f, "hashes")
                        .split(',')
                        .map(str::to_string)
                        .collect::<Vec<_>>()
                })
                .collect();
            cleared.is_some() && stored == want
        }),
        "no resync after the restart: {seen:?}\nhost: {}",
        host.stderr()
    );
    std::thread::sleep(Duration::from_millis(1200));
    let cleared = entries(&mut conn, stream)
        .iter()
        .filter(|(_, f)| field(f, "kind") == "cleared")
        .count();
    assert_eq!(cleared, 1, "one resync per recovery");
}
