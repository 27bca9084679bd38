//! The remote tier against a real 3-node Redis Cluster (started per test on 127.0.0.1, see
//! `memoria_store::remote::test_cluster`): blocks spread over all three nodes by hash slot
//! (checked with `CLUSTER KEYSLOT` and each node's `DBSIZE`) and come back bit-exact and in
//! order through MGET runs that span slots; pipelined writes across slots all land; the size
//! poll sums the nodes; a garbage value is a counted miss and is deleted; a killed node is a run
//! of counted misses and write errors, never an error to the caller, and a restarted node serves
//! again.

mod remote_support;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use memoria_kv::{BlockHash, NamespaceSalt};
use memoria_store::remote::test_cluster::{NODES, TestCluster};
use memoria_store::remote::{Lookup, NamespaceRemote};
use memoria_store::{RemoteOptions, RemoteTier, Tier};

use remote_support::*;

fn cluster() -> TestCluster {
    TestCluster::start().unwrap_or_else(|e| panic!("{e}"))
}

fn opts(c: &TestCluster) -> RemoteOptions {
    RemoteOptions {
        timeout_ms: 500,
        breaker_min_backoff_ms: 200,
        breaker_max_backoff_ms: 800,
        auth: Some(memoria_store::remote::test_server::test_key()),
        ..RemoteOptions::with_cluster(c.urls())
    }
}

/// How many of `keys` each node serves, by `CLUSTER KEYSLOT`.
fn per_node(c: &TestCluster, keys: &[String]) -> [u64; NODES] {
    let mut n = [0; NODES];
    for k in keys {
        n[c.node_of(k).expect("CLUSTER KEYSLOT")] += 1;
    }
    n
}

#[test]
fn blocks_spread_over_the_three_nodes_and_come_back_in_order() {
    let c = cluster();
    let salt = NamespaceSalt::derive("cluster-spread");
    let t = tokens(200 * B + 5, 1);
    let a = host(opts(&c));
    register_label(&a, salt, "shared");
    let chain = seal(&a, salt, &t);
    let s = a.remote().unwrap().snapshot();
    assert_eq!((s.writes, s.write_errors, s.writes_dropped), (200, 0, 0));
    // Every block is on the node its slot names, and every node holds some.
    let keys: Vec<String> = chain
        .iter()
        .map(|h| a.remote().unwrap().key("shared", h))
        .collect();
    let expected = per_node(&c, &keys);
    assert_eq!(c.dbsizes().unwrap(), expected.to_vec());
    assert!(expected.iter().all(|&n| n > 0), "{expected:?}");
    let first_run: HashSet<usize> = keys[..64].iter().map(|k| c.node_of(k).unwrap()).collect();
    assert_eq!(first_run.len(), NODES, "one MGET run spans all three nodes");
    let mut listed = c.keys("memoria:shared:*").unwrap();
    listed.sort();
    let mut want = keys.clone();
    want.sort();
    assert_eq!(listed, want);

    // Another host restores all 200 in order, bit-exact, in ceil(200 / 64) MGET runs.
    let b = host(opts(&c));
    register_label(&b, salt, "shared");
    let staged = rt().block_on(prefetch(&b, salt, &t, None));
    assert_eq!(staged, 200);
    assert_eq!(restore(&b, salt, &t), 200);
    let s = b.remote().unwrap().snapshot();
    assert_eq!(
        (s.hits, s.bad_values, s.fetches, s.mget_runs),
        (200, 0, 1, 4)
    );
    assert_eq!(s.miss_error + s.miss_timeout + s.miss_breaker, 0);
    // The size poll (every 2 s) counts every node's keys.
    let r = b.remote().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while r.snapshot().server_keys != 200 {
        assert!(Instant::now() < deadline, "size poll: {:?}", r.snapshot());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(r.snapshot().server_bytes > 0);
}

#[test]
fn a_multi_slot_mget_answers_in_key_order_with_its_gaps() {
    let c = cluster();
    let tier = RemoteTier::start(opts(&c)).unwrap();
    let view = NamespaceRemote::new(tier.clone(), "order").unwrap();
    let hashes: Vec<BlockHash> = (0..64u8).map(|i| BlockHash([i; 32])).collect();
    let value = |i: usize| format!("value of block {i}").into_bytes();
    for (i, h) in hashes.iter().enumerate() {
        if i % 5 != 4 {
            view.put(h, value(i));
        }
    }
    let keys: Vec<String> = hashes.iter().map(|h| tier.key("order", h)).collect();
    assert_eq!(
        per_node(&c, &keys).iter().filter(|&&n| n > 0).count(),
        NODES,
        "the 64 keys span all three nodes"
    );
    // Every stored value carries the hosts' tag; opened, it is the value written.
    let got: Vec<Lookup> = tier
        .get_many_blocking(keys.clone(), false)
        .into_iter()
        .zip(&keys)
        .map(|(l, k)| match l {
            Lookup::Value(v) => Lookup::Value(tier.open_value(k, v).expect("tag verifies")),
            l => l,
        })
        .collect();
    let want: Vec<Lookup> = (0..64)
        .map(|i| {
            if i % 5 == 4 {
                Lookup::Absent
            } else {
                Lookup::Value(value(i))
            }
        })
        .collect();
    assert_eq!(got, want);
    let s = tier.snapshot();
    assert_eq!((s.fetches, s.miss_absent, s.writes), (1, 12, 52));
    // The blocking tier view reads, removes and writes single keys on whichever node.
    assert_eq!(view.get(&hashes[8]), Some(value(8)));
    assert!(view.remove(&hashes[8]) && !view.contains(&hashes[8]));
    assert_eq!(view.get(&hashes[9]), None);
}

#[test]
fn a_value_altered_without_the_key_is_a_counted_miss() {
    let c = cluster();
    let salt = NamespaceSalt::derive("cluster-garbage");
    let t = tokens(4 * B, 2);
    let a = host(opts(&c));
    let chain = seal(&a, salt, &t);
    let key = a.remote().unwrap().key("default", &chain[2]);
    let mut conn = c.connection_for(&key).unwrap();
    let _: () = redis::cmd("SETRANGE")
        .arg(&key)
        .arg(400)
        .arg("garbage")
        .query(&mut conn)
        .unwrap();
    let b = host(opts(&c));
    assert_eq!(rt().block_on(prefetch(&b, salt, &t, None)), 2);
    assert_eq!(restore(&b, salt, &t), 2);
    let s = b.remote().unwrap().snapshot();
    assert_eq!((s.hits, s.bad_values, s.refused_auth), (2, 1, 1));
}

#[test]
fn a_killed_node_is_counted_misses_never_an_error_and_a_restarted_one_serves_again() {
    let mut c = cluster();
    let salt = NamespaceSalt::derive("cluster-outage");
    let t = tokens(40 * B, 3);
    let a = host(opts(&c));
    let chain = seal(&a, salt, &t);
    let key0 = a.remote().unwrap().key("default", &chain[0]);
    let dead = c.node_of(&key0).unwrap();
    let b = host(opts(&c));
    let rb = b.remote().unwrap().clone();
    c.kill(dead);
    let start = Instant::now();
    let rt = rt();
    assert_eq!(
        rt.block_on(prefetch(&b, salt, &t, None)),
        0,
        "block 0's node is down: no leading run"
    );
    assert_eq!(restore(&b, salt, &t), 0);
    let s = rb.snapshot();
    assert_eq!(s.hits, 0);
    assert_eq!(s.miss_error + s.miss_timeout, 40, "{s:?}");
    // Writes to the live nodes' slots land; the dead node's are counted, nothing hangs.
    let u = tokens(30 * B, 4);
    seal(&b, salt, &u);
    let s = rb.snapshot();
    assert_eq!(s.writes + s.write_errors + s.writes_dropped, 30, "{s:?}");
    assert!(s.write_errors + s.writes_dropped > 0, "{s:?}");
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "bounded: {:?}",
        start.elapsed()
    );
    // The node comes back (empty, same slots): a fresh write of the chain is served again.
    c.restart(dead).unwrap_or_else(|e| panic!("{e}"));
    seal(&host(opts(&c)), salt, &t);
    wait_until("the cluster to serve the chain again", || {
        rt.block_on(prefetch(&b, salt, &t, None)) == 40
    });
    assert_eq!(restore(&b, salt, &t), 40);
    assert_eq!(rb.snapshot().breaker, 0, "closed");
}
