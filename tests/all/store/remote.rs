//! Engines on two "hosts" sharing one real Valkey/Redis server (spawned on 127.0.0.1 by the
//! test): host B serves a prefix host A computed from the remote tier with bit-identical logits
//! (and computes only the tail), an isolated namespace gets none of it, and a server killed mid
//! run turns into counted misses while every request still succeeds with the same output; a
//! block altered on the server by a writer without the hosts' key (checksum recomputed) is
//! refused by every host that reads it, counted, and computed instead.

use std::sync::Arc;
use std::time::Duration;

use memoria_kv::{BlockHash, LostTier, NamespaceId, NamespaceSalt};
use memoria_model::llama::Model;
use memoria_model::tokenizer::Tokenizer;
use memoria_sched::{EngineConfig, EngineHandle};
use memoria_store::remote::auth::TAG_BYTES;
use memoria_store::remote::test_server::TestServer;
use memoria_store::{
    BlockIdentity, Endpoint, RemoteOptions, RemoteTier, StoreOptions, TierStack, codec,
};

use super::model;

/// An engine over an in-memory stack (cold RAM tier) with the remote tier at `url`, or none.
pub(super) fn host(url: Option<&str>) -> (EngineHandle, Arc<TierStack>) {
    host_on(url.map(|u| Endpoint::Server(u.to_string())))
}

/// [`host`] with the remote tier on one server or a cluster.
pub(super) fn host_on(endpoint: Option<Endpoint>) -> (EngineHandle, Arc<TierStack>) {
    let m = Model::load(model()).expect("model");
    let t = Tokenizer::from_gguf(m.gguf()).expect("tokenizer");
    let mut stack = TierStack::in_memory(StoreOptions::default());
    if let Some(endpoint) = endpoint {
        let o = RemoteOptions {
            endpoint,
            timeout_ms: 300,
            breaker_min_backoff_ms: 100,
            breaker_max_backoff_ms: 400,
            auth: Some(memoria_store::remote::test_server::test_key()),
            ..RemoteOptions::default()
        };
        stack = stack.with_remote(RemoteTier::start(o).expect("remote"));
    }
    let stack = Arc::new(stack);
    let cfg = EngineConfig {
        store: Some(stack.clone()),
        ..EngineConfig::default()
    };
    (
        EngineHandle::start(Arc::new(m), Arc::new(t), cfg).expect("engine"),
        stack,
    )
}

pub(super) fn server() -> TestServer {
    TestServer::start().unwrap_or_else(|e| panic!("{e}"))
}

pub(super) fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

pub(super) fn prompt(n: usize) -> Vec<u32> {
    (0..n as u32).map(|i| 1 + (i * 53 + 7) % 500).collect()
}

pub(super) fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// A fresh session on `tokens`, prefilled, then five greedy tokens: the bits of every logits
/// vector, then the whole context.
pub(super) fn answer(
    e: &EngineHandle,
    ns: NamespaceId,
    salt: NamespaceSalt,
    tokens: &[u32],
) -> Vec<u32> {
    rt().block_on(async {
        crate::shared::register_salt(e, ns, "default", salt);
        let s = e.open(ns).await.expect("open");
        e.append(ns, s, tokens.to_vec()).await.expect("append");
        let mut l = e.prefill(ns, s).await.expect("prefill");
        let mut out = bits(&l);
        let mut ctx = tokens.to_vec();
        for _ in 0..5 {
            let next = (0..l.len())
                .max_by(|&a, &b| l[a].total_cmp(&l[b]).then(b.cmp(&a)))
                .expect("vocab") as u32;
            ctx.push(next);
            e.append(ns, s, vec![next]).await.expect("append");
            l = e.prefill(ns, s).await.expect("prefill");
            out.extend(bits(&l));
        }
        out.extend(ctx);
        e.close(ns, s).await.expect("close");
        out
    })
}

pub(super) const NS: NamespaceId = NamespaceId(1);

/// [`answer`] to each of `prompts` from a host without a remote tier.
pub(super) fn cold_answers(salt: NamespaceSalt, prompts: &[&[u32]]) -> Vec<Vec<u32>> {
    let (e, _) = host(None);
    let r = prompts.iter().map(|t| answer(&e, NS, salt, t)).collect();
    e.shutdown();
    r
}

#[test]
fn host_b_serves_host_a_prefix_from_the_remote_with_identical_logits() {
    let srv = server();
    let salt = NamespaceSalt::derive("memoria salt v1 shared");
    let tokens = prompt(70);
    let cold = cold_answers(salt, &[&tokens]).remove(0);
    let (a, sa) = host(Some(&srv.url()));
    assert_eq!(answer(&a, NS, salt, &tokens), cold);
    let ra = sa.remote().expect("remote").clone();
    assert!(ra.flush(Duration::from_secs(5)));
    assert!(ra.snapshot().writes >= 4, "{:?}", ra.snapshot());

    let (b, sb) = host(Some(&srv.url()));
    let before = b.stats().snapshot().prefill_tokens;
    assert_eq!(
        answer(&b, NS, salt, &tokens),
        cold,
        "B from the remote = recompute"
    );
    let rb = sb.remote().expect("remote").snapshot();
    assert_eq!((rb.hits, rb.bad_values), (4, 0), "{rb:?}");
    let pool = b.pool_stats().snapshot();
    assert_eq!(pool.total.hit_tokens, 64);
    // Counted per namespace and tier: the 4 blocks came from the remote tier.
    let ns_b = &pool
        .namespaces
        .iter()
        .find(|(id, _)| *id == NS)
        .expect("NS")
        .1;
    assert_eq!(ns_b.promoted_from(LostTier::Remote), 4);
    assert_eq!(ns_b.promoted_from(LostTier::Cold), 0);
    let computed = b.stats().snapshot().prefill_tokens - before;
    assert!(
        computed < 70 - 64 + 10,
        "B computed {computed} tokens of a 70-token prompt"
    );

    // An isolated namespace on B shares none of it.
    let (c, sc) = host(Some(&srv.url()));
    let iso = NamespaceSalt::derive("memoria salt v1 isolated:other");
    answer(&c, NamespaceId(2), iso, &tokens);
    assert_eq!(sc.remote().expect("remote").snapshot().hits, 0);
    let pool = c.pool_stats().snapshot();
    assert_eq!(pool.total.hit_tokens, 0);
    assert_eq!(pool.total.promoted_from(LostTier::Remote), 0);
    for e in [a, b, c] {
        e.shutdown();
    }
}

#[test]
fn a_remote_killed_mid_run_still_answers_every_request_identically() {
    let mut srv = server();
    let salt = NamespaceSalt::derive("outage");
    let (t1, t2) = (prompt(50), prompt(90));
    let cold = cold_answers(salt, &[&t1, &t2]);
    let (a, sa) = host(Some(&srv.url()));
    assert_eq!(answer(&a, NS, salt, &t1), cold[0]);
    srv.kill();
    // Writes of t2's blocks and B's reads all fail: every request still succeeds, unchanged.
    assert_eq!(answer(&a, NS, salt, &t2), cold[1]);
    let (b, sb) = host(Some(&srv.url()));
    for t in 0..3 {
        assert_eq!(answer(&b, NS, salt, &t1), cold[0], "round {t}");
    }
    let s = sb.remote().expect("remote").snapshot();
    assert_eq!(s.hits, 0);
    assert!(s.miss_error + s.miss_timeout + s.miss_breaker >= 3, "{s:?}");
    let wa = sa.remote().expect("remote").snapshot();
    assert!(wa.write_errors + wa.writes_dropped > 0, "{wa:?}");
    srv.restart().expect("restart");
    // After the restart the breakers probe again: A's next blocks reach B.
    let t3 = prompt(120);
    let mut served = false;
    for _ in 0..40 {
        answer(&a, NS, salt, &t3);
        assert!(sa.remote().expect("remote").flush(Duration::from_secs(5)));
        let (c, sc) = host(Some(&srv.url()));
        answer(&c, NS, salt, &t3);
        c.shutdown();
        if sc.remote().expect("remote").snapshot().hits > 0 {
            served = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(served, "the remote serves again after a restart");
    a.shutdown();
    b.shutdown();
}

/// What a writer who can reach the server but lacks the hosts' key can do to a stored block:
/// decode it, change its K/V data, encode it again with a valid (unkeyed) checksum and keep
/// the old tag.
fn forged(stored: &[u8], salt: NamespaceSalt) -> Vec<u8> {
    let (value, tag) = stored.split_at(stored.len() - TAG_BYTES);
    let h = codec::verify(value).expect("a stored block");
    let mut data = vec![0u8; h.raw_len as usize];
    h.decode(&mut data).expect("it decodes");
    for b in data.iter_mut().step_by(7) {
        *b ^= 0x40;
    }
    let tokens: Vec<u32> = h.tokens().collect();
    let identity = BlockIdentity { salt, ..h.identity };
    let l = identity.layout;
    let root = BlockHash::root(&identity.model, l.elem, l.block_tokens, &salt);
    let mut v =
        codec::encode_shared(&identity, &root, &tokens, &data, h.encoding).expect("encodes");
    assert!(
        codec::verify(&v).is_ok(),
        "the forged value's checksum is valid"
    );
    assert_ne!(v.as_slice(), value, "and its data differ");
    v.extend_from_slice(tag);
    v
}

/// Replaces every value on the server with its forgery.
fn forge_all(srv: &TestServer, salt: NamespaceSalt) -> usize {
    let mut c = srv.connection().expect("redis connection");
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut c).expect("KEYS");
    for k in &keys {
        let v: Vec<u8> = redis::cmd("GET").arg(k).query(&mut c).expect("GET");
        let _: () = redis::cmd("SET")
            .arg(k)
            .arg(forged(&v, salt))
            .query(&mut c)
            .expect("SET");
    }
    keys.len()
}

#[test]
fn a_block_altered_in_redis_without_the_hosts_key_is_refused_on_every_host_counted_and_computed_instead()
 {
    let srv = server();
    let salt = NamespaceSalt::derive("memoria salt v1 shared");
    let tokens = prompt(70);
    let cold = cold_answers(salt, &[&tokens]).remove(0);
    let (a, sa) = host(Some(&srv.url()));
    assert_eq!(answer(&a, NS, salt, &tokens), cold);
    assert!(sa.remote().expect("remote").flush(Duration::from_secs(5)));
    for round in 0..2 {
        // The writer without the key alters every block (again: the last host wrote them back).
        assert_eq!(forge_all(&srv, salt), 4, "round {round}");
        let (h, sh) = host(Some(&srv.url()));
        let before = h.stats().snapshot().prefill_tokens;
        assert_eq!(
            answer(&h, NS, salt, &tokens),
            cold,
            "round {round}: the output is what computing it gives"
        );
        let computed = h.stats().snapshot().prefill_tokens - before;
        assert!(computed >= 70, "round {round}: computed {computed} tokens");
        let r = sh.remote().expect("remote").snapshot();
        assert_eq!(
            (
                r.hits,
                r.bad_values,
                r.refused_auth,
                r.refused_corrupt,
                r.refused_foreign
            ),
            (0, 1, 1, 0, 0),
            "round {round}: refused and counted as unauthenticated: {r:?}"
        );
        assert_eq!(h.pool_stats().snapshot().total.hit_tokens, 0);
        // It computed the blocks, so it writes them again, over the forgeries.
        assert!(sh.remote().expect("remote").flush(Duration::from_secs(5)));
        h.shutdown();
    }
    a.shutdown();
}
