//! The remote tier's server losing what it held, under engines on real Valkey/Redis servers
//! (spawned on 127.0.0.1 by the test): a FLUSHALL between two hosts, and a tiny `maxmemory`
//! with `allkeys-lru` that keeps only part of a prefix. Every request still succeeds with
//! bit-identical logits and tokens, and the counters say what happened (misses, hits of the
//! surviving leading blocks, the server's evictions); a host that computed the lost blocks
//! again writes them again, so the cluster heals; after a restart a host writes the blocks it
//! holds and the server lost again, so the other host is served from the cache once more.

use std::sync::Arc;
use std::time::Duration;

use memoria_kv::NamespaceSalt;
use memoria_sched::EngineHandle;
use memoria_store::TierStack;
use memoria_store::remote::test_server::TestServer;

use super::remote::{NS, answer, cold_answers, host, prompt, server};

const B: usize = 16;

/// One `INFO` field of the server, as a number.
fn info(srv: &TestServer, section: &str, field: &str) -> u64 {
    let mut c = srv.connection().expect("redis connection");
    let text: String = redis::cmd("INFO").arg(section).query(&mut c).expect("INFO");
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("INFO {section} has no {field}: {text}"))
}

/// What the server's keys take (`MEMORY USAGE` of each).
fn stored_bytes(srv: &TestServer) -> u64 {
    let mut c = srv.connection().expect("redis connection");
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut c).expect("KEYS");
    keys.iter()
        .map(|k| {
            redis::cmd("MEMORY")
                .arg("USAGE")
                .arg(k)
                .query::<u64>(&mut c)
                .expect("MEMORY USAGE")
        })
        .sum()
}

fn dbsize(srv: &TestServer) -> u64 {
    let mut c = srv.connection().expect("redis connection");
    redis::cmd("DBSIZE").query(&mut c).expect("DBSIZE")
}

fn command(srv: &TestServer, args: &[&str]) {
    let mut c = srv.connection().expect("redis connection");
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    let _: redis::Value = cmd
        .query(&mut c)
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
}

fn flushed(stack: &TierStack) {
    assert!(
        stack
            .remote()
            .expect("remote")
            .flush(Duration::from_secs(5))
    );
}

/// Prompt tokens `e` computed while running `f`.
fn computed(e: &EngineHandle, f: impl FnOnce()) -> u64 {
    let before = e.stats().snapshot().prefill_tokens;
    f();
    e.stats().snapshot().prefill_tokens - before
}

#[test]
fn a_flushall_between_hosts_is_counted_misses_and_the_next_host_writes_the_blocks_again() {
    let srv = server();
    let salt = NamespaceSalt::derive("memoria salt v1 shared");
    let tokens = prompt(8 * B + 5);
    let cold = cold_answers(salt, &[&tokens]).remove(0);
    let (a, sa) = host(Some(&srv.url()));
    assert_eq!(answer(&a, NS, salt, &tokens), cold);
    flushed(&sa);
    assert_eq!(dbsize(&srv), 8, "A wrote its 8 blocks");

    command(&srv, &["FLUSHALL"]);
    let (b, sb) = host(Some(&srv.url()));
    let n = computed(&b, || assert_eq!(answer(&b, NS, salt, &tokens), cold));
    let rb = sb.remote().expect("remote").snapshot();
    assert_eq!((rb.hits, rb.bad_values), (0, 0), "{rb:?}");
    assert!(
        rb.miss_absent >= 1,
        "the flushed blocks are counted misses: {rb:?}"
    );
    assert!(n >= tokens.len() as u64, "B computed the whole prompt: {n}");
    // B computed and sealed the blocks, which it never saw on the server: it writes them.
    flushed(&sb);
    assert_eq!(sb.remote().expect("remote").snapshot().writes, 8);
    assert_eq!(dbsize(&srv), 8);

    let (c, sc) = host(Some(&srv.url()));
    let n = computed(&c, || assert_eq!(answer(&c, NS, salt, &tokens), cold));
    let rc = sc.remote().expect("remote").snapshot();
    assert_eq!(rc.hits, 8, "{rc:?}");
    assert!(
        n < (tokens.len() - 8 * B + 5 + 1) as u64,
        "C computed {n} tokens"
    );
    for e in [a, b, c] {
        e.shutdown();
    }
}

#[test]
fn a_tiny_maxmemory_with_allkeys_lru_keeps_part_of_a_prefix_and_every_answer_is_identical() {
    // Exact LRU over a small keyspace: every key is sampled when the server picks what to evict.
    let srv =
        TestServer::start_with(&["--maxmemory-samples", "64"]).unwrap_or_else(|e| panic!("{e}"));
    let salt = NamespaceSalt::derive("memoria salt v1 shared");
    let blocks = 30;
    let tokens = prompt(blocks * B);
    let head = tokens[..10 * B].to_vec();
    let cold = cold_answers(salt, &[&tokens, &head]);
    let (a, sa) = host(Some(&srv.url()));
    assert_eq!(answer(&a, NS, salt, &tokens), cold[0]);
    flushed(&sa);
    assert_eq!(dbsize(&srv), blocks as u64);

    // The server's LRU clock ticks in seconds: C reads the leading 10 blocks a tick later, so
    // they are the most recently used.
    std::thread::sleep(Duration::from_millis(1500));
    let (c, sc) = host(Some(&srv.url()));
    assert_eq!(answer(&c, NS, salt, &head), cold[1]);
    assert_eq!(sc.remote().expect("remote").snapshot().hits, 10);
    // Memory for about 60% of the blocks: the server evicts the least recently used.
    let data = stored_bytes(&srv);
    let tiny = info(&srv, "memory", "used_memory") - data * 2 / 5;
    command(&srv, &["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]);
    command(&srv, &["CONFIG", "SET", "maxmemory", &tiny.to_string()]);
    command(&srv, &["PING"]);
    let left = dbsize(&srv);
    let evicted = info(&srv, "stats", "evicted_keys");
    assert!(
        evicted > 0 && left > 0 && left < blocks as u64,
        "part of the prefix survives: {left} keys, {evicted} evicted (maxmemory {tiny})"
    );

    let (b, sb) = host(Some(&srv.url()));
    let n = computed(&b, || assert_eq!(answer(&b, NS, salt, &tokens), cold[0]));
    let rb = sb.remote().expect("remote").snapshot();
    assert!(
        rb.hits >= 10 && rb.hits < blocks as u64,
        "B took the surviving leading blocks: {rb:?}"
    );
    assert!(
        rb.miss_absent >= 1,
        "and counted the evicted one as a miss: {rb:?}"
    );
    assert_eq!(rb.bad_values, 0);
    eprintln!(
        "maxmemory {tiny}: {left} of {blocks} keys left ({evicted} evicted); B hit {} and missed {}",
        rb.hits, rb.miss_absent
    );
    let tail = (tokens.len() - rb.hits as usize * B) as u64;
    assert!(
        n >= tail && n < tail + 5 + 1,
        "B computed {n} tokens: the {tail} after the {} hits, and its 5 generated",
        rb.hits
    );
    // The tiny server keeps answering: B's writes of what it computed evict, never fail.
    flushed(&sb);
    let wb = sb.remote().expect("remote").snapshot();
    assert_eq!(wb.write_errors, 0, "{wb:?}");
    for e in [a, b, c] {
        e.shutdown();
    }
}

/// Waits (at most 10 s) until `ok`.
fn wait_for(what: &str, ok: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !ok() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn after_a_redis_restart_each_host_writes_the_shared_first_block_again_and_the_other_is_served_from_the_cache()
 {
    let mut srv = server();
    let salt = NamespaceSalt::derive("memoria salt v1 shared");
    // Chat turns: one shared first block (a system prompt), then each turn's own 3 blocks + 5.
    let first = prompt(B);
    let turn = |seed: u32| -> Vec<u32> {
        let own = (0..(3 * B + 5) as u32).map(|i| 1 + (i * 31 + seed) % 500);
        first.iter().copied().chain(own).collect()
    };
    let turns = [turn(11), turn(17), turn(23)];
    let cold = cold_answers(salt, &[&turns[0], &turns[1], &turns[2]]);
    let tail = (5 + 5 + 1) as u64; // the 5 tokens past the last full block, 5 generated, slack
    let (a, sa) = host(Some(&srv.url()));
    let (b, sb) = host(Some(&srv.url()));
    let snap = |s: &Arc<TierStack>| s.remote().expect("remote").snapshot();
    assert_eq!(answer(&a, NS, salt, &turns[0]), cold[0]);
    flushed(&sa);
    assert_eq!(answer(&b, NS, salt, &turns[0]), cold[0]);
    assert_eq!(snap(&sb).hits, 4, "B took A's 4 blocks");
    flushed(&sb);

    // [host that answers first, host served from the cache after it]
    for (round, (w, sw, r, sr)) in [(&a, &sa, &b, &sb), (&b, &sb, &a, &sa)]
        .into_iter()
        .enumerate()
    {
        // Both hosts' size polls have seen the 4 keys the server is about to lose.
        wait_for("both hosts to see the server's keys", || {
            snap(sw).server_keys >= 4 && snap(sr).server_keys >= 4
        });
        let losses = (snap(sw).server_losses, snap(sr).server_losses);
        srv.restart().expect("restart");
        // Each host's size poll sees the server empty: what it knew to be there is forgotten.
        wait_for("both hosts to see the server lost its keys", || {
            snap(sw).server_losses > losses.0 && snap(sr).server_losses > losses.1
        });
        let t = &turns[round + 1];
        // The first host holds the shared first block (hot): its lookup finds it missing, so it
        // writes it again with the 3 blocks it computes.
        let rewrites = snap(sw).rewrites;
        assert_eq!(answer(w, NS, salt, t), cold[round + 1], "round {round}");
        flushed(sw);
        assert_eq!(
            snap(sw).rewrites,
            rewrites + 1,
            "round {round}: {:?}",
            snap(sw)
        );
        assert_eq!(
            dbsize(&srv),
            4,
            "round {round}: the first block and 3 new ones"
        );
        // The other host gets its whole prompt from the cache again.
        let hits = snap(sr).hits;
        let n = computed(r, || assert_eq!(answer(r, NS, salt, t), cold[round + 1]));
        assert_eq!(snap(sr).hits, hits + 4, "round {round}: {:?}", snap(sr));
        assert!(n < tail, "round {round}: computed {n} tokens");
        flushed(sr);
    }
    for e in [a, b] {
        e.shutdown();
    }
}
