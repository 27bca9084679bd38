//! Retained partial tails kept on disk: a session's unfilled last block, written when it ends,
//! is reused by a restarted engine exactly as the hot pool reuses it (all but the prompt's
//! last token cached, bit-identical logits); a damaged tail or another continuation's is a
//! miss; an isolated namespace never sees another's tail; a named save writes its session's
//! partial last block, which its restore after a restart reuses the same way.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use memoria_kv::NamespaceId;
use memoria_model::llama::Model;
use memoria_model::tokenizer::Tokenizer;
use memoria_sched::{EngineConfig, EngineHandle};
use memoria_store::{StoreOptions, TierStack};

use super::{model, temp_store};
use crate::shared::{open_salted, register};

const NS: NamespaceId = NamespaceId(3);

/// An engine over the store in `dir` (`None`: no store).
fn start(dir: Option<&Path>) -> (EngineHandle, Option<Arc<TierStack>>) {
    let m = Model::load(model()).expect("model");
    let t = Tokenizer::from_gguf(m.gguf()).expect("tokenizer");
    let stack = dir.map(|d| Arc::new(TierStack::open(d, StoreOptions::default()).expect("store")));
    let cfg = EngineConfig {
        store: stack.clone().map(|s| s as _),
        ..EngineConfig::default()
    };
    let e = EngineHandle::start(Arc::new(m), Arc::new(t), cfg).expect("engine");
    (e, stack)
}

/// 70 tokens: four whole blocks and a 6-token tail.
fn prompt() -> Vec<u32> {
    (0..70u32).map(|i| 1 + (i * 37 + 11) % 500).collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Opens a session of `ns` (salt of `label`) on `tokens`, prefills and closes it:
/// (logits, tokens the prefix match reused).
fn run(e: &EngineHandle, ns: NamespaceId, label: &str, tokens: &[u32]) -> (Vec<f32>, u64) {
    let before = e.pool_stats().snapshot().total.hit_tokens;
    let l = crate::shared::runtime().block_on(async {
        let s = open_salted(e, ns, label).await;
        e.append(ns, s, tokens.to_vec()).await.expect("append");
        let l = e.prefill(ns, s).await.expect("prefill");
        e.close(ns, s).await.expect("close");
        l
    });
    (l, e.pool_stats().snapshot().total.hit_tokens - before)
}

/// Logits of `tokens` computed by an engine without a store.
fn fresh(tokens: &[u32]) -> Vec<f32> {
    let (e, _) = start(None);
    let (l, hit) = run(&e, NS, "fresh", tokens);
    assert_eq!(hit, 0);
    e.shutdown();
    l
}

/// Runs `tokens` once in an engine over `dir` (its tail kept on disk when it closes).
fn seed(dir: &Path, label: &str, tokens: &[u32]) {
    let (e, _) = start(Some(dir));
    run(&e, NS, label, tokens);
    e.shutdown();
}

#[test]
fn a_tail_kept_on_disk_is_reused_after_a_restart_as_when_hot_bit_for_bit() {
    let dir = temp_store("tail-restart");
    let tokens = prompt();
    let want = fresh(&tokens);
    {
        let (e, _) = start(Some(&dir));
        let (l, hit) = run(&e, NS, "t", &tokens);
        assert_eq!((bits(&l), hit), (bits(&want), 0));
        let (l, hot) = run(&e, NS, "t", &tokens);
        assert_eq!(hot, 69, "hot: every token but the last");
        assert_eq!(bits(&l), bits(&want));
        e.shutdown();
    }
    let (e, stack) = start(Some(&dir));
    let (l, hit) = run(&e, NS, "t", &tokens);
    assert_eq!(hit, 69, "after a restart: as many as hot");
    assert_eq!(bits(&l), bits(&want), "restored K/V changed the logits");
    let redb = stack.expect("store").snapshot().redb;
    assert_eq!((redb.hits, redb.tail_hits), (4, 1));
    assert_eq!(e.stats().store_work_in_step.load(Relaxed), 0);
    e.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Flips a payload byte of every stored tail (a value whose last token id is the pad);
/// returns how many there were.
fn damage_tails(dir: &Path) -> usize {
    use memoria_store::disk::open_database;
    use memoria_store::disk::tables::BLOCKS;
    use redb::ReadableTable;
    let db = open_database(dir).expect("open");
    let txn = db.begin_write().expect("write");
    let mut n = 0;
    {
        let mut t = txn.open_table(BLOCKS).expect("blocks");
        let mut all = Vec::new();
        for e in t.iter().expect("iter") {
            let (k, v) = e.expect("entry");
            all.push((k.value(), v.value().to_vec()));
        }
        for (k, mut v) in all {
            let h = memoria_store::codec::parse_header(&v).expect("header");
            if h.tokens().last() != Some(u32::MAX) {
                continue;
            }
            let at = v.len() - 5;
            v[at] ^= 0x5a;
            t.insert(k, v.as_slice()).expect("insert");
            n += 1;
        }
    }
    txn.commit().expect("commit");
    n
}

#[test]
fn a_damaged_tail_or_another_continuations_is_a_miss_and_changes_nothing() {
    let dir = temp_store("tail-bad");
    let tokens = prompt();
    seed(&dir, "t", &tokens);
    assert_eq!(damage_tails(&dir), 1);
    let (e, stack) = start(Some(&dir));
    let (l, hit) = run(&e, NS, "t", &tokens);
    assert_eq!(hit, 64, "the whole blocks only");
    assert_eq!(bits(&l), bits(&fresh(&tokens)));
    let redb = stack.expect("store").snapshot().redb;
    assert_eq!((redb.tail_hits, redb.corrupt_removed), (0, 1));
    e.shutdown();
    // Another continuation of the same whole blocks finds the (sound) tail of this one.
    seed(&dir, "t", &tokens);
    let mut other = tokens.clone();
    other[64..].iter_mut().for_each(|t| *t = 1 + (*t + 7) % 500);
    let (e, stack) = start(Some(&dir));
    let (l, hit) = run(&e, NS, "t", &other);
    assert_eq!(hit, 64);
    assert_eq!(bits(&l), bits(&fresh(&other)));
    let redb = stack.expect("store").snapshot().redb;
    assert_eq!((redb.tail_hits, redb.corrupt_removed), (0, 0));
    e.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_isolated_namespace_never_sees_another_namespaces_tail() {
    let dir = temp_store("tail-isolation");
    let tokens = prompt();
    seed(&dir, "tenant-a", &tokens);
    let (e, stack) = start(Some(&dir));
    let stack = stack.expect("store");
    let (lb, hit) = run(&e, NamespaceId(4), "tenant-b", &tokens);
    assert_eq!(hit, 0, "tenant-b gets nothing of tenant-a's");
    let redb = stack.snapshot().redb;
    assert_eq!((redb.hits, redb.tail_hits, redb.foreign_removed), (0, 0, 0));
    let (la, hit) = run(&e, NS, "tenant-a", &tokens);
    assert_eq!(hit, 69, "tenant-a's own tail comes back");
    assert_eq!(stack.snapshot().redb.tail_hits, 1);
    assert_eq!(bits(&la), bits(&lb));
    e.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_named_saves_tail_is_reused_when_it_is_restored_after_a_restart() {
    let dir = temp_store("tail-save");
    let tokens = prompt();
    let want = fresh(&tokens);
    let rt = crate::shared::runtime();
    {
        let (e, _) = start(Some(&dir));
        rt.block_on(async {
            let s = open_salted(&e, NS, "t").await;
            e.append(NS, s, tokens.clone()).await.expect("append");
            e.prefill(NS, s).await.expect("prefill");
            e.save(NS, s, "kept").await.expect("save");
            // The session goes on past the saved tail: the tail it leaves at close is another.
            e.append(NS, s, vec![7; 20]).await.expect("append");
            e.prefill(NS, s).await.expect("prefill");
            e.close(NS, s).await.expect("close");
        });
        e.shutdown();
    }
    let (e, stack) = start(Some(&dir));
    register(&e, NS, "t");
    let before = e.pool_stats().snapshot().total.hit_tokens;
    let l = rt.block_on(async {
        let s = e.restore(NS, "kept").await.expect("restore");
        let l = e.prefill(NS, s).await.expect("prefill");
        e.close(NS, s).await.expect("close");
        l
    });
    let hit = e.pool_stats().snapshot().total.hit_tokens - before;
    assert_eq!(
        hit, 69,
        "restored: every saved token but the last, tail included"
    );
    assert_eq!(bits(&l), bits(&want), "restored K/V changed the logits");
    let redb = stack.expect("store").snapshot().redb;
    assert_eq!((redb.hits, redb.tail_hits), (4, 1));
    assert_eq!(e.stats().store_work_in_step.load(Relaxed), 0);
    e.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}
