//! `memoria route --events-cluster` on a real 3-node Redis Cluster (spawned by the test): two
//! hosts on the cluster publish their events and liveness there (streams and liveness keys in
//! different slots, the hosts' registry set in a third); the router finds them through the
//! registry set, reads each stream with its own XREAD, and sends each prefix to the host that
//! served it. Once a host's liveness key expires its id leaves the registry set.

use memoria_store::remote::test_cluster::TestCluster;
use serde_json::json;

use super::backend;
use super::events::{teach, wait_live};
use super::eventually;
use super::router::Router;
use crate::serve::client::post;
use crate::serve::server::{Server, model, temp_dir};

#[test]
fn route_events_on_a_cluster_send_a_prefix_to_its_host() {
    let c = TestCluster::start().unwrap_or_else(|e| panic!("{e}"));
    let nodes = c.urls();
    let list = nodes
        .iter()
        .map(|u| format!("\"{u}\""))
        .collect::<Vec<_>>()
        .join(", ");
    let mut hosts: Vec<Server> = (0..2)
        .map(|i| {
            let name = format!("route-events-cluster-{i}");
            let cfg = temp_dir(&name).join("host.toml");
            std::fs::write(
                &cfg,
                format!(
                    "[store.remote]\ncluster = [{list}]\nevents = true\nliveness_ttl_s = 1\n\
                     host_id = \"cluster-host-{i}\"\n"
                ),
            )
            .expect("write host.toml");
            Server::start(
                &name,
                &["-m", &model(), "--config", cfg.to_str().expect("utf-8")],
            )
        })
        .collect();
    // The keys a router needs live on more than one node.
    let node_of = |k: &str| c.node_of(k).expect("CLUSTER KEYSLOT");
    let keys = [
        "memoria:events:cluster-host-0",
        "memoria:events:cluster-host-1",
        "memoria:host:cluster-host-0",
        "memoria:host:cluster-host-1",
        "memoria:hosts",
    ];
    let spread: std::collections::BTreeSet<usize> = keys.iter().map(|k| node_of(k)).collect();
    assert!(spread.len() >= 2, "all on one node: {spread:?}");

    let refs: Vec<&Server> = hosts.iter().collect();
    let flag = nodes.join(",");
    let r = Router::start("route-events-cluster", &refs, &["--events-cluster", &flag]);
    let urls = wait_live(&r, &hosts);
    let prefixes: Vec<String> = (0..2)
        .map(|i| {
            format!("Cluster host {i} keeps a lighthouse by the grey northern sea. ").repeat(3)
        })
        .collect();
    teach(&r, &hosts, &prefixes, &urls);
    for (i, p) in prefixes.iter().enumerate() {
        for q in ["Who keeps it?", "Which sea?"] {
            let body = json!({"prompt": format!("{p} {q}"), "max_tokens": 2});
            let resp = post(r.addr, "/v1/completions", &body, &[]);
            assert_eq!(resp.status, 200, "{}\nrouter: {}", resp.text(), r.stderr());
            assert_eq!(backend(&resp), urls[i], "prefix {i} went elsewhere");
        }
    }

    // Host 1 stops: its liveness key expires, the router drops it and prunes the registry.
    drop(hosts.remove(1));
    let mut conn = c.connection_for("memoria:hosts").expect("connect");
    assert!(
        eventually(300, || {
            let members: Vec<String> = redis::cmd("SMEMBERS")
                .arg("memoria:hosts")
                .query(&mut conn)
                .expect("SMEMBERS");
            members == ["cluster-host-0"]
        }),
        "the registry kept the stopped host: {}",
        r.stderr()
    );
    let body = json!({"prompt": format!("{} Still there?", prefixes[1]), "max_tokens": 2});
    let resp = post(r.addr, "/v1/completions", &body, &[]);
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(backend(&resp), urls[0]);
}
