//! Named saves in the remote tier: a session saved on host A (no disk, only the shared
//! Valkey/Redis server) is restored on host B with bit-identical logits and continuation, its
//! blocks prefetched from the remote; the key and value never hold the salt; another
//! namespace's salt, a missing name and a value altered without the hosts' key are each "no
//! saved session" (the altered value refused and counted); a server that is down is a clear
//! error, not a wrong answer.

use redis::Commands;

use memoria_kv::{NamespaceId, NamespaceSalt};
use memoria_sched::{EngineError, EngineHandle};

use memoria_store::Endpoint;
use memoria_store::remote::test_cluster::TestCluster;

use super::remote::{NS, bits, host, host_on, prompt, rt, server};
use crate::shared::register_salt;

/// Opens a session on `tokens`, prefills it and generates `n` greedy tokens one by one: the bits
/// of every logits vector and the tokens chosen; the session stays open.
async fn run(e: &EngineHandle, ns: NamespaceId, s: memoria_sched::SessionId, n: usize) -> Vec<u32> {
    let mut l = e.prefill(ns, s).await.expect("prefill");
    let mut out = bits(&l);
    for _ in 0..n {
        let next = (0..l.len())
            .max_by(|&a, &b| l[a].total_cmp(&l[b]).then(b.cmp(&a)))
            .expect("vocab") as u32;
        out.push(next);
        e.append(ns, s, vec![next]).await.expect("append");
        l = e.prefill(ns, s).await.expect("prefill");
        out.extend(bits(&l));
    }
    out
}

#[test]
fn a_session_saved_on_host_a_is_restored_on_host_b_with_identical_logits() {
    let mut srv = server();
    let salt = NamespaceSalt::derive("memoria salt v1 saves");
    let tokens = prompt(53);
    let (a, sa) = host(Some(&srv.url()));
    let (b, sb) = host(Some(&srv.url()));
    rt().block_on(async {
        // A: 53 prompt tokens and 3 generated ones, saved; then 4 more tokens of continuation.
        register_salt(&a, NS, "default", salt);
        register_salt(&b, NS, "default", salt);
        let s = a.open(NS).await.expect("open");
        a.append(NS, s, tokens.clone()).await.expect("append");
        run(&a, NS, s, 3).await;
        a.save(NS, s, "chat/1")
            .await
            .expect("save without a disk, to the remote");
        let on_a = run(&a, NS, s, 4).await;
        assert!(
            sa.remote()
                .expect("remote")
                .flush(std::time::Duration::from_secs(5))
        );

        let before = b.stats().snapshot().prefill_tokens;
        let r = b.restore(NS, "chat/1").await.expect("restore on B");
        assert_eq!(run(&b, NS, r, 4).await, on_a, "B's continuation = A's");
        let computed = b.stats().snapshot().prefill_tokens - before;
        let rb = sb.remote().expect("remote").snapshot();
        assert!(rb.hits >= 3, "B fetched the saved context's blocks: {rb:?}");
        assert!(computed < 56 - 48 + 4 + 4, "B computed {computed} tokens");

        // Another namespace (other salt) with the same label, and a name never saved.
        let other = NamespaceSalt::derive("memoria salt v1 isolated:other");
        for (salt, name) in [(other, "chat/1"), (salt, "chat/2")] {
            register_salt(&b, NamespaceId(2), "default", salt);
            match b.restore(NamespaceId(2), name).await {
                Err(EngineError::NoSavedSession(n)) => assert_eq!(n, name),
                other => panic!("restore of {name:?} gave {other:?}"),
            }
        }
    });

    // The key names the label and the name, never the salt; the value holds the root instead.
    let mut c = srv.connection().expect("redis connection");
    let keys: Vec<String> = c.keys("*:session:*").expect("KEYS");
    assert_eq!(
        keys,
        vec![format!("memoria:default:session:{}", hex("chat/1"))]
    );
    let value: Vec<u8> = c.get(&keys[0]).expect("GET");
    assert!(
        !value.windows(32).any(|w| w == salt.0),
        "the salt left the host"
    );
    assert!(!keys[0].contains(&hex_bytes(&salt.0)));

    // A value altered by a writer without the hosts' key is a missing save, refused and
    // counted (and left: a host with the key overwrites it when it saves that name again).
    let _: () = redis::cmd("SETRANGE")
        .arg(&keys[0])
        .arg(100)
        .arg("garbage")
        .query(&mut c)
        .expect("SETRANGE");
    let before = sb.remote().expect("remote").snapshot();
    rt().block_on(async {
        let r = b.restore(NS, "chat/1").await;
        assert!(matches!(r, Err(EngineError::NoSavedSession(_))), "{r:?}");
    });
    let after = sb.remote().expect("remote").snapshot();
    assert_eq!(
        (after.bad_values, after.refused_auth),
        (before.bad_values + 1, before.refused_auth + 1)
    );

    // A server that is down: a clear error on restore and on save, never a wrong session.
    srv.kill();
    rt().block_on(async {
        match b.restore(NS, "chat/1").await {
            Err(EngineError::Store(e)) => assert!(e.to_string().contains("remote"), "{e}"),
            other => panic!("restore with the server down gave {other:?}"),
        }
        let s = b.open(NS).await.expect("open");
        b.append(NS, s, tokens.clone()).await.expect("append");
        b.prefill(NS, s).await.expect("the engine still computes");
        match b.save(NS, s, "chat/3").await {
            Err(EngineError::Store(e)) => assert!(e.to_string().contains("remote"), "{e}"),
            other => panic!("save with the server down gave {other:?}"),
        }
    });
    a.shutdown();
    b.shutdown();
}

#[test]
fn a_session_saved_on_host_a_is_restored_on_host_b_through_a_cluster() {
    let c = TestCluster::start().unwrap_or_else(|e| panic!("{e}"));
    let salt = NamespaceSalt::derive("memoria salt v1 cluster saves");
    let tokens = prompt(200);
    let (a, sa) = host_on(Some(Endpoint::Cluster(c.urls())));
    let (b, sb) = host_on(Some(Endpoint::Cluster(c.urls())));
    rt().block_on(async {
        register_salt(&a, NS, "default", salt);
        register_salt(&b, NS, "default", salt);
        let s = a.open(NS).await.expect("open");
        a.append(NS, s, tokens.clone()).await.expect("append");
        run(&a, NS, s, 3).await;
        a.save(NS, s, "chat/cluster")
            .await
            .expect("save to the cluster");
        let on_a = run(&a, NS, s, 4).await;
        let ra = sa.remote().expect("remote");
        assert!(ra.flush(std::time::Duration::from_secs(5)));
        assert_eq!(ra.snapshot().write_errors, 0);

        let before = b.stats().snapshot().prefill_tokens;
        let r = b.restore(NS, "chat/cluster").await.expect("restore on B");
        assert_eq!(run(&b, NS, r, 4).await, on_a, "B's continuation = A's");
        let computed = b.stats().snapshot().prefill_tokens - before;
        let rb = sb.remote().expect("remote").snapshot();
        assert!(
            rb.hits >= 12,
            "B fetched the saved context's blocks: {rb:?}"
        );
        assert!(computed < 203 - 192 + 4 + 4, "B computed {computed} tokens");
    });
    // The context's blocks live on all three nodes; the save is one key, without the salt.
    let sizes = c.dbsizes().expect("DBSIZE");
    assert!(sizes.iter().all(|&n| n > 0), "{sizes:?}");
    let keys = c.keys("*:session:*").expect("KEYS");
    assert_eq!(
        keys,
        vec![format!("memoria:default:session:{}", hex("chat/cluster"))]
    );
    assert!(!keys[0].contains(&hex_bytes(&salt.0)));
    a.shutdown();
    b.shutdown();
}

fn hex(s: &str) -> String {
    hex_bytes(s.as_bytes())
}

fn hex_bytes(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
