//! The remote tier against a real Valkey/Redis server (spawned per test on 127.0.0.1, see
//! `memoria_store::remote::test_server`): blocks written by one stack are restored bit-exact by
//! another, namespaces stay apart and no salt reaches the server, bad values are misses and are
//! deleted, a killed server is a run of counted misses behind an opening breaker that closes
//! again after a restart, keys expire, the write queue and write modes hold their bounds, and a
//! block the host knows is on the server is looked up again once it leaves the host (written
//! again once half its TTL has passed).

mod remote_support;

use std::time::{Duration, Instant};

use memoria_kv::{BlockHash, NamespaceSalt};
use memoria_store::remote::test_server::{TestServer, test_key};
use memoria_store::remote::{BreakerState, NamespaceRemote};
use memoria_store::{
    BlockIdentity, RemoteOptions, RemoteTier, SessionRecord, Tier, WriteMode, prefetch_wait,
};

use remote_support::*;

fn server() -> TestServer {
    TestServer::start().unwrap_or_else(|e| panic!("{e}"))
}

fn opts(s: &TestServer) -> RemoteOptions {
    RemoteOptions {
        timeout_ms: 300,
        breaker_min_backoff_ms: 200,
        breaker_max_backoff_ms: 800,
        auth: Some(memoria_store::remote::test_server::test_key()),
        ..RemoteOptions::with_url(s.url())
    }
}

fn all_keys(s: &TestServer) -> Vec<String> {
    let mut c = s.connection().expect("connect");
    redis::cmd("KEYS").arg("*").query(&mut c).expect("KEYS")
}

#[test]
fn blocks_written_by_one_host_are_restored_bit_exact_by_another() {
    let srv = server();
    let salt = NamespaceSalt::derive("shared-test");
    let t = tokens(5 * B + 3, 1);
    let a = host(opts(&srv));
    register_label(&a, salt, "shared");
    let chain = seal(&a, salt, &t);
    assert_eq!(a.remote().unwrap().snapshot().writes, 5);
    let mut keys = all_keys(&srv);
    keys.sort();
    assert_eq!(keys.len(), 5);
    assert!(
        keys.iter()
            .all(|k| k.starts_with("memoria:shared:") && k.len() == 15 + 64)
    );

    let b = host(opts(&srv));
    register_label(&b, salt, "shared");
    assert_eq!(
        restore(&b, salt, &t),
        0,
        "nothing staged before the prefetch"
    );
    let staged = rt().block_on(prefetch(&b, salt, &t, None));
    assert_eq!(staged, 5);
    assert_eq!(restore(&b, salt, &t), 5);
    let s = b.remote().unwrap().snapshot();
    assert_eq!((s.hits, s.bad_values, s.fetches), (5, 0, 1));
    assert!(s.bytes_read > 0 && s.latency.iter().sum::<u64>() == 1);
    // B now knows the blocks: sealing them again writes nothing.
    seal(&b, salt, &t);
    assert_eq!(b.remote().unwrap().snapshot().writes, 0);
    // A longer prompt fetches only the blocks after the known ones, in one MGET.
    let long = [t[..5 * B].to_vec(), tokens(200 * B, 2)].concat();
    seal(&a, salt, &long);
    let staged = rt().block_on(prefetch(&b, salt, &long, None));
    assert_eq!(staged, 200);
    let s = b.remote().unwrap().snapshot();
    assert_eq!(s.fetches, 2, "one lookup per prefetch");
    assert_eq!(
        s.mget_runs,
        1 + 200usize.div_ceil(64) as u64,
        "MGET runs of 64"
    );
    assert_eq!(
        chain[..],
        SessionRecord::chain(&chain_root(salt), &long, B)[..5]
    );
}

#[test]
fn namespaces_stay_apart_and_no_salt_reaches_the_server() {
    let srv = server();
    let (sa, sb) = (
        NamespaceSalt::derive("memoria salt v1 isolated:team-a"),
        NamespaceSalt::derive("memoria salt v1 isolated:team-b"),
    );
    let t = tokens(4 * B, 3);
    let a = host(opts(&srv));
    register_label(&a, sa, "team-a");
    seal(&a, sa, &t);
    let b = host(opts(&srv));
    register_label(&b, sb, "team-b");
    assert_eq!(rt().block_on(prefetch(&b, sb, &t, None)), 0);
    assert_eq!(restore(&b, sb, &t), 0);
    let s = b.remote().unwrap().snapshot();
    assert_eq!(
        (s.hits, s.miss_absent, s.bad_values),
        (0, 4, 0),
        "one MGET run of 4"
    );
    // Even a host that labels its namespace like A's cannot read A's blocks with its salt.
    let c = host(opts(&srv));
    register_label(&c, sb, "team-a");
    assert_eq!(rt().block_on(prefetch(&c, sb, &t, None)), 0);
    seal(&b, sb, &t);
    let mut conn = srv.connection().unwrap();
    let keys = all_keys(&srv);
    assert_eq!(keys.len(), 8);
    assert_eq!(
        keys.iter()
            .filter(|k| k.starts_with("memoria:team-a:"))
            .count(),
        4
    );
    for k in &keys {
        let v: Vec<u8> = redis::cmd("GET").arg(k).query(&mut conn).unwrap();
        for salt in [sa, sb] {
            let hex: String = salt.0.iter().map(|b| format!("{b:02x}")).collect();
            assert!(!k.contains(&hex), "salt in key {k}");
            assert!(
                !v.windows(32).any(|w| w == salt.0),
                "salt in the value of {k}"
            );
        }
    }
}

#[test]
fn values_without_the_hosts_key_are_refused_and_keyed_garbage_is_deleted() {
    let srv = server();
    let salt = NamespaceSalt::derive("bad-values");
    let t = tokens(4 * B, 4);
    let a = host(opts(&srv));
    let chain = seal(&a, salt, &t);
    let key = |i: usize| a.remote().unwrap().key("default", &chain[i]);
    let mut conn = srv.connection().unwrap();
    let exists = |conn: &mut redis::Connection, k: &str| {
        redis::cmd("EXISTS").arg(k).query::<u64>(conn).unwrap() == 1
    };
    // Block 2 altered in place by a writer without the key: refused, counted, left there (who
    // wrote it is unknown; a host with the key overwrites it when it writes that block).
    let _: () = redis::cmd("SETRANGE")
        .arg(key(2))
        .arg(400)
        .arg("garbage")
        .query(&mut conn)
        .unwrap();
    let b = host(opts(&srv));
    assert_eq!(rt().block_on(prefetch(&b, salt, &t, None)), 2);
    assert_eq!(restore(&b, salt, &t), 2);
    let s = b.remote().unwrap().snapshot();
    assert_eq!(
        (s.hits, s.bad_values, s.refused_auth, s.deletes),
        (2, 1, 1, 0)
    );
    assert!(exists(&mut conn, &key(2)));
    // A host with the key that computes block 2 writes it again, over the altered value.
    seal(&host(opts(&srv)), salt, &t[..3 * B]);
    // Block 3 is a value sealed with the key that is no block (a key holder's bug): refused as
    // corrupt, and deleted.
    let sealed = test_key().seal(&key(3), b"short".to_vec());
    let _: () = redis::cmd("SET")
        .arg(key(3))
        .arg(sealed)
        .query(&mut conn)
        .unwrap();
    let d = host(opts(&srv));
    assert_eq!(rt().block_on(prefetch(&d, salt, &t, None)), 3);
    let s = d.remote().unwrap().snapshot();
    assert_eq!(
        (s.hits, s.bad_values, s.refused_auth, s.refused_corrupt),
        (3, 1, 0, 1)
    );
    wait_until("the keyed garbage's deletion", || {
        !exists(&mut conn, &key(3))
    });
}

#[test]
fn a_killed_server_is_counted_misses_behind_a_breaker_that_closes_after_restart() {
    let mut srv = server();
    let salt = NamespaceSalt::derive("outage");
    let t = tokens(3 * B, 5);
    let a = host(opts(&srv));
    seal(&a, salt, &t);
    let b = host(opts(&srv));
    let rb = b.remote().unwrap().clone();
    srv.kill();
    let rt = rt();
    let start = Instant::now();
    for _ in 0..3 {
        assert_eq!(rt.block_on(prefetch(&b, salt, &t, None)), 0);
    }
    assert_eq!(rb.breaker_state(), BreakerState::Open);
    let s = rb.snapshot();
    assert_eq!(s.hits, 0);
    assert_eq!(s.miss_error + s.miss_timeout, 3 * 3);
    assert_eq!((s.breaker, s.breaker_opens), (1, 1));
    // While open, lookups answer at once without touching the network.
    let t0 = Instant::now();
    assert_eq!(rt.block_on(prefetch(&b, salt, &t, None)), 0);
    assert!(
        t0.elapsed() < Duration::from_millis(50),
        "{:?}",
        t0.elapsed()
    );
    assert_eq!(rb.snapshot().miss_breaker, 3);
    // Writes are dropped, not queued forever, while the server is down.
    seal(&b, salt, &tokens(2 * B, 6));
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "bounded: {:?}",
        start.elapsed()
    );
    srv.restart().expect("restart");
    assert!(all_keys(&srv).is_empty(), "restarted empty");
    seal(&host(opts(&srv)), salt, &t);
    wait_until("the breaker to close", || {
        rt.block_on(prefetch(&b, salt, &t, None)) == 3
    });
    assert_eq!(rb.breaker_state(), BreakerState::Closed);
    assert_eq!(restore(&b, salt, &t), 3);
    assert!(rb.snapshot().breaker_opens >= 1 && rb.snapshot().breaker == 0);
}

#[test]
fn keys_expire_after_ttl_and_the_tier_view_reads_and_removes() {
    let srv = server();
    let salt = NamespaceSalt::derive("ttl");
    let o = RemoteOptions {
        ttl_s: 120,
        ..opts(&srv)
    };
    let a = host(o.clone());
    let chain = seal(&a, salt, &tokens(2 * B, 7));
    let mut conn = srv.connection().unwrap();
    for k in all_keys(&srv) {
        let ttl: i64 = redis::cmd("TTL").arg(&k).query(&mut conn).unwrap();
        assert!((100..=120).contains(&ttl), "TTL of {k}: {ttl}");
    }
    let view = NamespaceRemote::new(a.remote().unwrap().clone(), "default").unwrap();
    let got = view.get_many(&chain);
    assert!(
        got.iter()
            .all(|v| v.as_ref().is_some_and(|v| v.len() > 168))
    );
    assert!(view.remove(&chain[0]) && !view.remove(&chain[0]));
    assert!(!view.contains(&chain[0]) && view.contains(&chain[1]));
    view.put(&chain[0], b"x".to_vec());
    assert_eq!(view.get(&chain[0]), Some(b"x".to_vec()));
    assert!(NamespaceRemote::new(a.remote().unwrap().clone(), "a:b").is_err());
}

#[test]
fn the_write_queue_is_bounded_and_second_hit_writes_on_the_second_sighting() {
    let srv = server();
    let salt = NamespaceSalt::derive("bounds");
    let block = layout().block_bytes().unwrap();
    let tiny = RemoteOptions {
        max_inflight_bytes: block,
        ..opts(&srv)
    };
    let r = RemoteTier::start(tiny).unwrap();
    let id = |i: u8| BlockIdentity {
        model: MODEL,
        layout: layout(),
        salt,
        hash: BlockHash([i; 32]),
    };
    let t = tokens(B, 8);
    let data = block_data(&t, 0);
    let queued = (0..50u8)
        .filter(|i| {
            let key = r.key("default", &id(*i).hash);
            r.put(key, id(*i), BlockHash([0; 32]), &t, &data)
        })
        .count();
    assert!(r.flush(Duration::from_secs(5)));
    let s = r.snapshot();
    assert!(
        queued < 50 && s.writes_dropped == (50 - queued) as u64,
        "{s:?}"
    );
    assert_eq!(
        (s.writes, s.queue_bytes, s.queue_blocks),
        (queued as u64, 0, 0)
    );

    let second = host(RemoteOptions {
        write: WriteMode::SecondHit,
        ..opts(&srv)
    });
    let u = tokens(3 * B, 9);
    seal(&second, salt, &u);
    assert_eq!(second.remote().unwrap().snapshot().writes, 0);
    seal(&second, salt, &u);
    assert_eq!(second.remote().unwrap().snapshot().writes, 3);
    seal(&second, salt, &u);
    assert_eq!(second.remote().unwrap().snapshot().writes, 3, "never twice");
    assert!(RemoteTier::start(RemoteOptions::with_url("http://x")).is_err());
}

#[test]
fn a_server_binary_is_found() {
    // CI installs one (.ci/run); a machine without one fails here, saying how to install it.
    TestServer::binary().unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn one_prefetch_stages_no_more_than_fits_and_keeps_its_leading_blocks() {
    let srv = server();
    let salt = NamespaceSalt::derive("staging");
    let t = tokens(10 * B, 11);
    seal(&host(opts(&srv)), salt, &t);
    let small = RemoteOptions {
        max_inflight_bytes: 3 * layout().block_bytes().unwrap(),
        ..opts(&srv)
    };
    let b = host(small);
    assert_eq!(rt().block_on(prefetch(&b, salt, &t, None)), 3);
    assert_eq!(restore(&b, salt, &t), 3, "the leading three, all usable");
    assert_eq!(rt().block_on(prefetch(&b, salt, &t, None)), 3);
    assert_eq!(
        restore(&b, salt, &t),
        0,
        "blocks 0-2 are now known (hot in a real pool)"
    );
}

#[test]
fn a_known_block_that_leaves_the_host_is_looked_up_again_and_a_stale_one_written_again() {
    let srv = server();
    let salt = NamespaceSalt::derive("leaving");
    let t = tokens(4 * B, 12);
    let a = host(opts(&srv));
    let chain = seal(&a, salt, &t);
    assert_eq!(
        rt().block_on(prefetch(&a, salt, &t, None)),
        0,
        "blocks it wrote are taken to be hot here"
    );
    // The pool evicts blocks 0 and 1; no local tier keeps them (this stack has none).
    for (i, h) in chain.iter().enumerate().take(2) {
        a.demote(
            identity(salt, *h),
            &t[i * B..(i + 1) * B],
            &block_data(&t, i),
        );
    }
    assert_eq!(
        rt().block_on(prefetch(&a, salt, &t, None)),
        2,
        "the two that left come back from the server"
    );
    assert_eq!(restore(&a, salt, &t), 2);
    let s = a.remote().unwrap().snapshot();
    assert_eq!((s.writes, s.hits), (4, 2), "nothing written twice: {s:?}");

    // A block stays known for half the keys' TTL: then sealing it again refreshes its key.
    let short = host(RemoteOptions {
        ttl_s: 1,
        ..opts(&srv)
    });
    let u = tokens(2 * B, 13);
    seal(&short, salt, &u);
    seal(&short, salt, &u);
    assert_eq!(short.remote().unwrap().snapshot().writes, 2, "known: once");
    std::thread::sleep(Duration::from_millis(600));
    seal(&short, salt, &u);
    assert_eq!(short.remote().unwrap().snapshot().writes, 4, "stale: again");
}

#[test]
fn a_prefetch_waits_no_longer_than_computing_its_blocks_would_take() {
    // DEBUG SLEEP stalls the server (a slow remote); the tier's own timeout is 3 s.
    let srv = TestServer::start_with(&["--enable-debug-command", "yes"])
        .unwrap_or_else(|e| panic!("{e}"));
    let salt = NamespaceSalt::derive("deadline");
    let t = tokens(8 * B, 14);
    seal(&host(opts(&srv)), salt, &t);
    let b = host(RemoteOptions {
        timeout_ms: 3000,
        ..opts(&srv)
    });
    // Connected first (one lookup of another prompt), so the deadline times only the stall.
    let other = tokens(B, 15);
    rt().block_on(prefetch(&b, salt, &other, None));
    let url = srv.url();
    let stall = std::thread::spawn(move || {
        let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
        let _: redis::Value = redis::cmd("DEBUG")
            .arg("SLEEP")
            .arg("1.5")
            .query(&mut c)
            .unwrap();
    });
    std::thread::sleep(Duration::from_millis(200));
    // Computing 8 blocks at 1 µs a token: shorter than the floor, so the wait is the floor.
    let per_token = Some(Duration::from_micros(1));
    let start = Instant::now();
    let staged = rt().block_on(prefetch(&b, salt, &t, per_token));
    let waited = start.elapsed();
    assert_eq!(staged, 0);
    assert!(
        waited >= Duration::from_millis(90) && waited < Duration::from_millis(900),
        "waited {waited:?} of the stall, not the 3 s timeout"
    );
    let s = b.remote().unwrap().snapshot();
    assert_eq!(s.miss_deadline, 8, "{s:?}");
    stall.join().unwrap();
    // The server is back: no deadline is needed, the blocks come.
    let staged = rt().block_on(prefetch(&b, salt, &t, per_token));
    assert_eq!(staged, 8);
    assert_eq!(
        prefetch_wait(Some(Duration::from_millis(1)), 8, B, Duration::from_secs(3)),
        Some(Duration::from_millis(128)),
        "the time computing them takes"
    );
    assert_eq!(
        prefetch_wait(
            Some(Duration::from_micros(1)),
            8,
            B,
            Duration::from_millis(20)
        ),
        Some(Duration::from_millis(20)),
        "the floor never exceeds the tier's timeout"
    );
    assert_eq!(prefetch_wait(None, 8, B, Duration::from_secs(3)), None);
    // An absurd cost saturates (and a deadline past the clock's range is no deadline).
    let forever = prefetch_wait(Some(Duration::MAX), usize::MAX, B, Duration::from_secs(3));
    assert_eq!(forever, Some(Duration::MAX));
    let more = tokens(2 * B, 16);
    seal(&host(opts(&srv)), salt, &more);
    let staged = rt().block_on(prefetch(&b, salt, &more, forever));
    assert_eq!(staged, 2);
}
