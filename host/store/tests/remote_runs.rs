//! The remote tier's batching against a real Valkey/Redis server: a lookup is answered run by
//! run in key order and a leading one stops after the first missing key; a prefetch over several
//! runs of incompressible (raw) blocks stages them bit-exact up to the first damaged value; the
//! write-behind loop lingers for more blocks, yet a flush or a pipeline's worth sends at once.

mod remote_support;

use memoria_kv::{NamespaceSalt, TierSource};
use memoria_store::remote::Lookup;
use memoria_store::remote::test_server::TestServer;
use memoria_store::{BlockIdentity, RemoteOptions, RemoteTier, SessionRecord, TierStack};

use remote_support::*;

fn server() -> TestServer {
    TestServer::start().unwrap_or_else(|e| panic!("{e}"))
}

fn opts(s: &TestServer) -> RemoteOptions {
    RemoteOptions {
        timeout_ms: 2_000,
        auth: Some(memoria_store::remote::test_server::test_key()),
        ..RemoteOptions::with_url(s.url())
    }
}

fn lookup_runs(tier: &RemoteTier, keys: &[String], leading: bool, run: usize) -> Vec<Vec<Lookup>> {
    rt().block_on(async {
        let mut rx = tier.get_runs(keys.to_vec(), leading, run);
        let mut runs = Vec::new();
        while let Some(r) = rx.recv().await {
            runs.push(r);
        }
        runs
    })
}

#[test]
fn runs_arrive_in_key_order_and_a_leading_lookup_stops_after_the_first_missing_key() {
    let srv = server();
    let mut conn = srv.connection().unwrap();
    let keys: Vec<String> = (0..200).map(|i| format!("runs:{i}")).collect();
    for (i, k) in keys.iter().enumerate().filter(|(i, _)| *i != 100) {
        let _: () = redis::cmd("SET")
            .arg(k)
            .arg(i.to_string())
            .query(&mut conn)
            .unwrap();
    }
    let tier = RemoteTier::start(opts(&srv)).unwrap();
    let value = |i: usize| Lookup::Value(i.to_string().into_bytes());

    let runs = lookup_runs(&tier, &keys, true, 30);
    // Runs of 30 up to the one holding key 100, then one message skipping the other 80.
    let sizes: Vec<usize> = runs.iter().map(Vec::len).collect();
    assert_eq!(sizes, [30, 30, 30, 30, 80]);
    let flat = runs.concat();
    assert!((0..100).all(|i| flat[i] == value(i)));
    assert_eq!(flat[100], Lookup::Absent);
    assert!(
        (101..120).all(|i| flat[i] == value(i)),
        "the rest of its run"
    );
    assert!(flat[120..].iter().all(|l| *l == Lookup::Skipped));

    let runs = lookup_runs(&tier, &keys, false, 30);
    let sizes: Vec<usize> = runs.iter().map(Vec::len).collect();
    assert_eq!(sizes, [30, 30, 30, 30, 30, 30, 20]);
    let flat = runs.concat();
    assert!((0..200).all(|i| flat[i] == if i == 100 { Lookup::Absent } else { value(i) }));

    let s = tier.stats().snapshot();
    // The leading lookup had 6 runs in flight: it sent all 7 before reading run 3's miss.
    assert_eq!((s.fetches, s.mget_runs), (2, 7 + 7));
    assert_eq!(s.miss_absent, 2);
    // A run size past the MGET bound is cut to it; 0 is one key per run.
    assert_eq!(lookup_runs(&tier, &keys[..130], false, 1000).len(), 3);
    assert_eq!(lookup_runs(&tier, &keys[..3], false, 0).len(), 3);
}

/// Incompressible bytes for block `i` (the codec keeps them raw).
fn noise_block(i: usize) -> Vec<u8> {
    let mut x = 0x9e37_79b9u32 ^ (i as u32).wrapping_mul(0x85eb_ca6b) | 1;
    (0..layout().block_bytes().unwrap())
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

#[test]
fn a_prefetch_over_several_runs_stages_raw_blocks_bit_exact_up_to_a_damaged_one() {
    let srv = server();
    let salt = NamespaceSalt::derive("raw-runs");
    let t = tokens(200 * B, 5);
    let a = host(opts(&srv));
    let chain = seal_with(&a, salt, &t, noise_block);
    let key = a.remote().unwrap().key("default", &chain[150]);
    let mut conn = srv.connection().unwrap();
    let _: () = redis::cmd("SETRANGE")
        .arg(&key)
        .arg(200)
        .arg("garbage")
        .query(&mut conn)
        .unwrap();
    let b = host(opts(&srv));
    assert_eq!(
        rt().block_on(prefetch(&b, salt, &t, None)),
        150,
        "blocks 0-149, over three MGET runs of 64"
    );
    let s = b.remote().unwrap().snapshot();
    assert_eq!((s.hits, s.bad_values), (150, 1));
    assert!(s.mget_runs >= 3, "{} runs", s.mget_runs);
    // The lookup's latency is observed when its last run answers, which the prefetch, done
    // at the damaged block, need not wait for.
    wait_until("the lookup's latency", || {
        b.remote().unwrap().snapshot().fetches == 1
    });
    let mut src = b.source(MODEL, layout(), chain_root(salt), &t);
    let mut out = vec![0u8; layout().block_bytes().unwrap()];
    for (i, h) in chain.iter().enumerate().take(150) {
        assert!(src.fetch(h, &mut out), "block {i} staged");
        assert_eq!(out, noise_block(i), "block {i} differs");
    }
    assert!(!src.fetch(&chain[150], &mut out), "the damaged block");
}

#[test]
fn writes_linger_for_more_blocks_but_a_flush_or_a_full_pipeline_sends_at_once() {
    let srv = server();
    let linger = |ms| RemoteOptions {
        write_linger_ms: ms,
        ..opts(&srv)
    };
    let salt = NamespaceSalt::derive("linger");
    let t = tokens(600 * B, 9);
    let chain = SessionRecord::chain(&chain_root(salt), &t, B);
    let put = |stack: &TierStack, i: usize| {
        let id = BlockIdentity {
            model: MODEL,
            layout: layout(),
            salt,
            hash: chain[i],
        };
        stack.persist(id, &t[i * B..(i + 1) * B], &noise_block(i), false);
    };
    let writes = |stack: &TierStack| stack.remote().unwrap().snapshot().writes;

    // An hour-long linger: a lone block waits, and a flush sends it at once.
    let a = host(linger(60_000));
    put(&a, 0);
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(writes(&a), 0, "still lingering");
    assert!(a.remote().unwrap().flush(std::time::Duration::from_secs(5)));
    assert_eq!(writes(&a), 1);
    // A pipeline's worth queued (64 blocks; 4 MiB of larger ones): sent without a flush.
    for i in 1..=600 {
        put(&a, i % 600);
    }
    wait_until("a full pipeline's writes", || writes(&a) > 1);
    // Without a linger every block goes out without a flush.
    let b = host(linger(0));
    put(&b, 1);
    wait_until("an unlingered write", || writes(&b) == 1);
}
