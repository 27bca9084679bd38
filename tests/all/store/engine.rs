//! In-process engines over a store: namespace isolation across a restart, session save/restore
//! with bit-identical logits in the same engine and after the engine and store are reopened,
//! and prefix preload.

use std::path::Path;
use std::sync::Arc;

use memoria_kv::{NamespaceId, PinLevel};
use memoria_model::llama::Model;
use memoria_model::tokenizer::Tokenizer;
use memoria_sched::{EngineConfig, EngineHandle, Preload, preload};
use memoria_store::{StoreOptions, TierStack};

use super::{model, temp_store};
use crate::shared::{open_salted, register};

fn start(dir: &Path) -> (EngineHandle, Arc<TierStack>) {
    start_with(dir, EngineConfig::default().kv_budget_bytes)
}

/// [`start`] with a K/V pool of `kv_budget_bytes`.
fn start_with(dir: &Path, kv_budget_bytes: usize) -> (EngineHandle, Arc<TierStack>) {
    let m = Model::load(model()).expect("model");
    let t = Tokenizer::from_gguf(m.gguf()).expect("tokenizer");
    let stack = Arc::new(TierStack::open(dir, StoreOptions::default()).expect("store"));
    let cfg = EngineConfig {
        store: Some(stack.clone()),
        kv_budget_bytes,
        ..EngineConfig::default()
    };
    (
        EngineHandle::start(Arc::new(m), Arc::new(t), cfg).expect("engine"),
        stack,
    )
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

fn prompt(n: usize) -> Vec<u32> {
    (0..n as u32).map(|i| 1 + (i * 37 + 11) % 500).collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Registers `ns` keyed by the salt of `label`, opens a session in it on `tokens` and
/// prefills it: (session, logits).
async fn compute(
    e: &EngineHandle,
    ns: NamespaceId,
    label: &str,
    tokens: &[u32],
) -> (memoria_sched::SessionId, Vec<f32>) {
    let s = open_salted(e, ns, label).await;
    e.append(ns, s, tokens.to_vec()).await.expect("append");
    let l = e.prefill(ns, s).await.expect("prefill");
    (s, l)
}

#[test]
fn an_isolated_namespace_never_receives_another_namespaces_stored_blocks() {
    let dir = temp_store("isolation");
    let (a, b) = ((NamespaceId(1), "tenant-a"), (NamespaceId(2), "tenant-b"));
    let tokens = prompt(70);
    let rt = rt();
    let want = {
        let (e, _) = start(&dir);
        let (_, l) = rt.block_on(compute(&e, a.0, a.1, &tokens));
        e.shutdown();
        l
    };
    let (e, stack) = start(&dir);
    let (_, lb) = rt.block_on(compute(&e, b.0, b.1, &tokens));
    let snap = stack.snapshot();
    assert_eq!(e.pool_stats().snapshot().total.hit_tokens, 0);
    assert_eq!(snap.redb.hits, 0, "tenant-b got none of tenant-a's blocks");
    assert_eq!(
        (snap.redb.corrupt_removed, snap.redb.foreign_removed),
        (0, 0)
    );
    assert_eq!(
        bits(&lb),
        bits(&want),
        "same model, same tokens, computed afresh"
    );
    let (_, la) = rt.block_on(compute(&e, a.0, a.1, &tokens));
    assert_eq!(
        stack.snapshot().redb.hits,
        4,
        "tenant-a's own blocks come back"
    );
    assert_eq!(bits(&la), bits(&want));
    e.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn save_and_restore_give_bit_identical_logits_in_process_and_after_a_restart() {
    let dir = temp_store("save-restore");
    let (ns, salt) = (NamespaceId(7), "tenant-s");
    let tokens = prompt(83);
    let rt = rt();
    let original = {
        let (e, _) = start(&dir);
        let l = rt.block_on(async {
            let (s, l) = compute(&e, ns, salt, &tokens).await;
            e.save(ns, s, "chat-1").await.expect("save");
            // Same engine: the restored session matches without touching the original.
            let r = e.restore(ns, "chat-1").await.expect("restore");
            assert_ne!(r, s);
            assert_eq!(e.tokens(ns, r).await.expect("tokens"), tokens);
            let lr = e.prefill(ns, r).await.expect("prefill");
            assert_eq!(bits(&lr), bits(&l));
            // Wrong or unregistered namespace, another salt, unknown name: clear errors,
            // nothing restored.
            assert!(e.restore(NamespaceId(8), "chat-1").await.is_err());
            register(&e, NamespaceId(8), salt);
            assert!(e.restore(NamespaceId(8), "chat-1").await.is_err());
            register(&e, ns, "x");
            assert!(e.restore(ns, "chat-1").await.is_err());
            register(&e, ns, salt);
            let err = e.restore(ns, "nope").await.expect_err("missing");
            assert!(err.to_string().contains("no saved session"), "{err}");
            assert!(e.save(ns, s, "").await.is_err());
            l
        });
        e.shutdown();
        l
    };
    let (e, stack) = start(&dir);
    rt.block_on(async {
        register(&e, ns, salt);
        let r = e
            .restore(ns, "chat-1")
            .await
            .expect("restore after restart");
        let l = e.prefill(ns, r).await.expect("prefill");
        assert_eq!(bits(&l), bits(&original));
    });
    assert_eq!(
        stack.snapshot().redb.hits,
        5,
        "all five full blocks came from disk"
    );
    e.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn saving_needs_a_store_and_preload_pins_configured_prefixes() {
    let m = Model::load(model()).expect("model");
    let t = Tokenizer::from_gguf(m.gguf()).expect("tokenizer");
    let e = EngineHandle::start(Arc::new(m), Arc::new(t), EngineConfig::default()).expect("engine");
    let rt = rt();
    let (ns, salt) = (NamespaceId(1), "p");
    rt.block_on(async {
        let (s, _) = compute(&e, ns, salt, &prompt(20)).await;
        let err = e.save(ns, s, "x").await.expect_err("no store");
        assert!(err.to_string().contains("--store"), "{err}");
        let text = "Once upon a time there was a little girl who loved her dog very much and";
        let entries = [Preload {
            ns,
            texts: vec![text.to_string()],
            pin: PinLevel::Pinned,
            ttl: None,
        }];
        let info = preload(&e, &entries).await.expect("preload");
        assert_eq!(info.len(), 1);
        assert!(info[0].blocks_pinned >= 1);
    });
    e.shutdown();
}

/// The store's work stays off the engine thread: a prompt whose blocks come back from redb after
/// a restart, prompts that overflow a small pool (evictions demoted to cold RAM and disk), sealed
/// blocks written through, a save and a restore all run without a redb transaction, a stored
/// block's checksum or a store lock inside a step, and give the same logits as computing afresh.
#[test]
fn no_step_runs_a_redb_transaction_or_verifies_a_stored_block() {
    use std::sync::atomic::Ordering::Relaxed;
    let dir = temp_store("no-store-work-in-step");
    let (ns, label) = (NamespaceId(3), "tenant-step");
    let tokens = prompt(90);
    let rt = rt();
    let want = {
        let (e, _) = start(&dir);
        let l = rt.block_on(async {
            let (s, l) = compute(&e, ns, label, &tokens).await;
            e.save(ns, s, "kept").await.expect("save");
            l
        });
        assert_eq!(e.stats().store_work_in_step.load(Relaxed), 0);
        e.shutdown();
        l
    };
    // After a restart, in a pool of a few blocks: the prompt's blocks come from redb through
    // staging; other prompts then push them out (evictions handed to the store).
    let (e, stack) = start_with(&dir, 256 << 10);
    let (s, l) = rt.block_on(compute(&e, ns, label, &tokens));
    assert_eq!(bits(&l), bits(&want));
    assert_eq!(
        stack.snapshot().redb.hits,
        5,
        "the prompt's blocks came from disk"
    );
    rt.block_on(async {
        e.close(ns, s).await.expect("close");
        for k in 1..6u32 {
            let other: Vec<u32> = prompt(90).iter().map(|t| 1 + (t + 97 * k) % 500).collect();
            let (s, _) = compute(&e, ns, label, &other).await;
            e.close(ns, s).await.expect("close");
        }
        let (s, l) = compute(&e, ns, label, &tokens).await;
        assert_eq!(bits(&l), bits(&want), "after evictions");
        e.close(ns, s).await.expect("close");
        let r = e.restore(ns, "kept").await.expect("restore");
        assert_eq!(bits(&e.prefill(ns, r).await.expect("prefill")), bits(&want));
    });
    assert!(
        e.pool_stats().snapshot().total.evictions() > 0,
        "the small pool evicted"
    );
    let steps = e.stats().steps.load(Relaxed);
    assert!(steps > 0);
    assert_eq!(
        e.stats().store_work_in_step.load(Relaxed),
        0,
        "a step did the store's work itself ({steps} steps)"
    );
    e.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A prompt is hashed once on the engine thread: the shared-prefix wait, staging, the prefix
/// match and the sealing of its computed blocks share one chain, one hash per whole block,
/// with a store and without, on a miss and on a hit.
#[test]
fn a_prompt_is_hashed_once_per_block() {
    use std::sync::atomic::Ordering::Relaxed;
    let dir = temp_store("hashed-once");
    let (ns, label) = (NamespaceId(5), "tenant-hash");
    // 8 whole blocks of 16, and 5 tokens more.
    let tokens = prompt(8 * 16 + 5);
    let rt = rt();
    let m = Arc::new(Model::load(model()).expect("model"));
    let t = Arc::new(Tokenizer::from_gguf(m.gguf()).expect("tokenizer"));
    for with_store in [false, true] {
        let cfg = EngineConfig {
            store: with_store.then(|| {
                Arc::new(TierStack::open(&dir, StoreOptions::default()).expect("store")) as _
            }),
            ..EngineConfig::default()
        };
        let e = EngineHandle::start(m.clone(), t.clone(), cfg).expect("engine");
        let hashes = || e.stats().chain_hashes.load(Relaxed);
        rt.block_on(async {
            // Read after a later round trip: the engine sets the figure once its step is over.
            let before = hashes();
            let (s, miss) = compute(&e, ns, label, &tokens).await;
            e.close(ns, s).await.expect("close");
            assert_eq!(
                hashes() - before,
                8,
                "a missed prompt (store: {with_store})"
            );
            let before = hashes();
            let (s, hit) = compute(&e, ns, label, &tokens).await;
            e.close(ns, s).await.expect("close");
            assert_eq!(
                hashes() - before,
                8,
                "a cached prompt (store: {with_store})"
            );
            assert_eq!(bits(&hit), bits(&miss));
        });
        e.shutdown();
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// With a remote tier the caller hashes a fresh context's chain for its prefetch (on its own
/// task) and hands it down: the engine thread then hashes none of it, whether the session was
/// opened with its prompt, given it by an append, or warmed, so the prompt is still hashed once
/// per whole block in all.
#[test]
fn a_remote_prefetch_hands_its_chain_to_the_engine() {
    use std::sync::atomic::Ordering::Relaxed;
    let srv = super::remote::server();
    let (e, _stack) = super::remote::host(Some(&srv.url()));
    let (ns, label) = (NamespaceId(6), "tenant-handed");
    let tokens = prompt(8 * 16 + 5);
    let engine = || e.stats().chain_hashes.load(Relaxed);
    let here = memoria_kv::hash::chain_hashes_here;
    let rt = rt();
    rt.block_on(async {
        let (before, caller) = (engine(), here());
        let (s, miss) = compute(&e, ns, label, &tokens).await;
        e.close(ns, s).await.expect("close");
        assert_eq!(here() - caller, 8, "the caller hashed the prompt once");
        assert_eq!(
            engine() - before,
            0,
            "the engine took the appended prompt's chain"
        );
        let (before, caller) = (engine(), here());
        let s = e.open_with(ns, tokens.clone()).await.expect("open");
        let hit = e.prefill(ns, s).await.expect("prefill");
        e.close(ns, s).await.expect("close");
        assert_eq!(here() - caller, 8, "the caller hashed the prompt once");
        assert_eq!(
            engine() - before,
            0,
            "the engine took the opened prompt's chain"
        );
        assert_eq!(
            bits(&hit),
            bits(&miss),
            "the handed chain matched the cached blocks"
        );
        let hit_tokens = e.pool_stats().snapshot().total.hit_tokens;
        assert!(
            hit_tokens >= 8 * 16,
            "the second prompt's whole blocks were found by the handed chain ({hit_tokens})"
        );
        // A warm takes the chain its prefetch hashed too.
        let (before, caller) = (engine(), here());
        let warm = e
            .warm(ns, tokens.clone(), PinLevel::Pinned, None)
            .await
            .expect("warm");
        assert_eq!(
            here() - caller,
            8,
            "the caller hashed the warmed prefix once"
        );
        assert_eq!(
            engine() - before,
            0,
            "the engine took the warmed prefix's chain"
        );
        assert!(warm.cached_tokens >= 8 * 16, "{warm:?}");
        assert_eq!(
            warm.blocks_pinned, 8,
            "every whole block of the prefix is pinned"
        );
    });
    e.shutdown();
}

/// A caller that watches what the pool holds (the host's events) keeps a copy of the chain its
/// open hashed instead of hashing the prompt again: the kept hashes are the ones the engine
/// took and keyed the prompt's blocks by (a second open finds every whole block through them),
/// and the prompt is still hashed once per whole block in all. A plain open keeps none.
#[test]
fn an_open_keeps_the_chain_it_handed_to_the_engine() {
    use memoria_sched::OwnedSession;
    use std::sync::atomic::Ordering::Relaxed;
    let srv = super::remote::server();
    let (e, _stack) = super::remote::host(Some(&srv.url()));
    let (ns, label) = (NamespaceId(7), "tenant-kept");
    let tokens = prompt(8 * 16 + 5);
    let engine = || e.stats().chain_hashes.load(Relaxed);
    let here = memoria_kv::hash::chain_hashes_here;
    let rt = rt();
    rt.block_on(async {
        let s = open_salted(&e, ns, label).await;
        e.close(ns, s).await.expect("close");
        let mut kept = Vec::new();
        for _ in 0..2 {
            let (before, caller) = (engine(), here());
            let s = OwnedSession::open_keeping_chain(&e, ns, tokens.clone())
                .await
                .expect("open");
            e.prefill(ns, s.id()).await.expect("prefill");
            assert_eq!(here() - caller, 8, "the caller hashed the prompt once");
            assert_eq!(engine() - before, 0, "the engine took the handed chain");
            kept.push(s.pool_chain().expect("a kept chain").clone());
            s.close().await;
        }
        assert_eq!(kept[0].len(), 8, "one hash per whole block");
        assert_eq!(kept[0], kept[1]);
        let hits = e.pool_stats().snapshot().total.hit_tokens;
        assert!(
            hits >= 8 * 16,
            "the second open found the blocks keyed by the kept chain ({hits})"
        );
        let plain = OwnedSession::open(&e, ns, tokens.clone())
            .await
            .expect("open");
        assert!(plain.pool_chain().is_none(), "a plain open keeps nothing");
        plain.close().await;
    });
    e.shutdown();
}
