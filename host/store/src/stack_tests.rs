//! The stack end to end without an engine: write-through, reopen, verified reads, removal of
//! corrupt and foreign values, lossy hit counting, cold spill to disk, queue bound, sessions.

use std::path::PathBuf;

use memoria_kv::{KvElem, KvLayout, NamespaceSalt};
use redb::ReadableDatabase;

use super::*;
use crate::disk::DiskOptions;
use crate::disk::tables::BLOCKS;
use crate::options::Lossy;
use crate::remote::events::Tier as EventTier;

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("memoria-store-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

const MODEL: ModelFingerprint = ModelFingerprint([5; 32]);

fn layout() -> KvLayout {
    KvLayout::new(2, 32, KvElem::F16).with_block_tokens(4)
}

/// A two-block chain for `salt`: (root, [(hash, tokens, data)]).
/// (hash, tokens, data) of one stored block.
type Block = (BlockHash, Vec<u32>, Vec<u8>);

fn chain(salt: &NamespaceSalt) -> (BlockHash, Vec<Block>) {
    let l = layout();
    let root = BlockHash::root(&MODEL, l.elem, l.block_tokens, salt);
    let n = l.block_bytes().unwrap();
    let mut prev = root;
    let blocks = (0..2u32)
        .map(|i| {
            let tokens: Vec<u32> = (0..4).map(|t| t + 10 * i).collect();
            prev = BlockHash::chain(&prev, &tokens);
            let data: Vec<u8> = (0..n)
                .map(|j| {
                    if j % 2 == 1 {
                        0x3c
                    } else {
                        (j as u32 * 3 + i) as u8
                    }
                })
                .collect();
            (prev, tokens, data)
        })
        .collect();
    (root, blocks)
}

fn identity(salt: NamespaceSalt, hash: BlockHash) -> BlockIdentity {
    BlockIdentity {
        model: MODEL,
        layout: layout(),
        salt,
        hash,
    }
}

fn all_tokens(blocks: &[Block]) -> Vec<u32> {
    blocks.iter().flat_map(|b| b.1.clone()).collect()
}

fn no_cold() -> StoreOptions {
    StoreOptions {
        cold_budget_bytes: 0,
        ..StoreOptions::default()
    }
}

#[test]
fn written_blocks_survive_a_reopen_and_verify_on_read() {
    let d = dir("reopen");
    let salt = NamespaceSalt::derive("a");
    let (root, blocks) = chain(&salt);
    {
        let st = open_known(&d, no_cold());
        for (h, t, data) in &blocks {
            assert!(st.persist(identity(salt, *h), t, data, false));
            assert!(
                !st.persist(identity(salt, *h), t, data, false),
                "queued once"
            );
        }
        st.flush().unwrap();
        assert_eq!(st.snapshot().redb.puts, 2);
    }
    let st = open_known(&d, no_cold());
    assert_eq!(st.snapshot().redb.blocks, 2);
    let tokens = all_tokens(&blocks);
    let mut src = st.source(MODEL, layout(), root, &tokens);
    let mut out = vec![0; layout().block_bytes().unwrap()];
    for (h, _, data) in &blocks {
        assert!(src.fetch(h, &mut out));
        assert_eq!(&out, data);
    }
    assert!(
        !src.fetch(&BlockHash([0; 32]), &mut out),
        "not in this chain"
    );
    assert_eq!(st.snapshot().redb.hits, 2);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn corrupt_values_are_misses_removed_and_counted() {
    let d = dir("corrupt");
    let salt = NamespaceSalt::derive("a");
    let (root, blocks) = chain(&salt);
    let st = open_known(&d, no_cold());
    for (h, t, data) in &blocks {
        st.persist(identity(salt, *h), t, data, false);
    }
    st.flush().unwrap();
    let (h0, _, _) = &blocks[0];
    let mut bad = st.disk().unwrap().get(h0).unwrap();
    let last = bad.len() - 1;
    bad[last] ^= 1;
    st.disk().unwrap().remove(h0);
    st.disk().unwrap().put(h0, bad);
    st.flush().unwrap();
    let tokens = all_tokens(&blocks);
    let mut src = st.source(MODEL, layout(), root, &tokens);
    let mut out = vec![0; layout().block_bytes().unwrap()];
    assert!(!src.fetch(h0, &mut out));
    // The pool learns why (the `corrupt` miss reason, lost on disk).
    assert_eq!(src.last_miss(), SourceMiss::Corrupt(LostTier::Disk));
    let s = st.snapshot().redb;
    assert_eq!((s.corrupt_removed, s.hits), (1, 0));
    assert!(!st.disk().unwrap().contains(h0));
    st.flush().unwrap();
    assert!(!src.fetch(h0, &mut out), "gone after removal");
    assert_eq!(src.last_miss(), SourceMiss::Absent);
    assert!(src.fetch(&blocks[1].0, &mut out));
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn another_namespace_never_receives_a_block() {
    let d = dir("isolation");
    let (a, b) = (NamespaceSalt::derive("a"), NamespaceSalt::derive("b"));
    let (_, blocks) = chain(&a);
    let (root_b, blocks_b) = chain(&b);
    let st = open_known(&d, no_cold());
    for (h, t, data) in &blocks {
        st.persist(identity(a, *h), t, data, false);
    }
    st.flush().unwrap();
    let tokens = all_tokens(&blocks_b);
    let mut out = vec![0; layout().block_bytes().unwrap()];
    // B's own chain never names A's hashes.
    let mut src = st.source(MODEL, layout(), root_b, &tokens);
    for (h, _, _) in &blocks_b {
        assert!(!src.fetch(h, &mut out));
    }
    // A forged request for A's hash under B's root is refused by the salt check.
    let forged = Expect {
        model: MODEL,
        layout: layout(),
        hash: blocks[0].0,
        root: Some(root_b),
        salt: Some(b),
        tokens: None,
    };
    assert_eq!(st.fetch(&forged, &mut out), None);
    assert_eq!(st.snapshot().redb.foreign_removed, 1);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn lossy_cold_hits_are_counted_and_never_written_as_exact() {
    let salt = NamespaceSalt::derive("a");
    let (root, blocks) = chain(&salt);
    let st = known(TierStack::in_memory(StoreOptions {
        cold_lossy: Some(Lossy::Q8_0),
        ..StoreOptions::default()
    }));
    for (h, t, data) in &blocks {
        st.demote(identity(salt, *h), t, data);
    }
    let tokens = all_tokens(&blocks);
    let mut src = st.source(MODEL, layout(), root, &tokens);
    let mut out = vec![0; layout().block_bytes().unwrap()];
    assert!(src.fetch(&blocks[0].0, &mut out));
    let s = st.snapshot();
    assert!(s.cold_lossy);
    assert_eq!((s.cold.hits, s.cold.lossy_hits), (1, 1));
    assert!(!st.persist(identity(salt, blocks[0].0), &blocks[0].1, &out, true));

    let exact = known(TierStack::in_memory(StoreOptions::default()));
    for (h, t, data) in &blocks {
        exact.demote(identity(salt, *h), t, data);
    }
    let mut src = exact.source(MODEL, layout(), root, &tokens);
    assert!(src.fetch(&blocks[1].0, &mut out));
    assert_eq!(out, blocks[1].2);
    let s = exact.snapshot();
    assert_eq!(
        (s.cold.hits, s.cold.lossy_hits, s.cold_lossy),
        (1, 0, false)
    );
}

/// A stack in `d` whose cold RAM tier holds one of `blocks` (a second spills the first).
fn one_block_cold(d: &std::path::Path, salt: NamespaceSalt, blocks: &[Block]) -> TierStack {
    let one = codec::encode(
        &identity(salt, blocks[0].0),
        &blocks[0].1,
        &blocks[0].2,
        Encoding::Lz4,
    )
    .unwrap()
    .len();
    open_known(
        d,
        StoreOptions {
            cold_budget_bytes: one + one / 2,
            ..StoreOptions::default()
        },
    )
}

#[test]
fn cold_evictions_spill_to_disk() {
    let d = dir("spill");
    let salt = NamespaceSalt::derive("a");
    let (root, blocks) = chain(&salt);
    let st = one_block_cold(&d, salt, &blocks);
    for (h, t, data) in &blocks {
        st.demote(identity(salt, *h), t, data);
    }
    st.flush().unwrap();
    let s = st.snapshot();
    assert_eq!((s.cold.blocks, s.cold.evictions, s.redb.blocks), (1, 1, 1));
    let tokens = all_tokens(&blocks);
    let mut src = st.source(MODEL, layout(), root, &tokens);
    let mut out = vec![0; layout().block_bytes().unwrap()];
    assert!(src.fetch(&blocks[0].0, &mut out));
    assert_eq!(out, blocks[0].2);
    assert_eq!(st.snapshot().redb.hits, 1);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_full_write_queue_drops_and_counts() {
    let d = dir("queue");
    let salt = NamespaceSalt::derive("a");
    let (_, blocks) = chain(&salt);
    let st = open_known(
        &d,
        StoreOptions {
            cold_budget_bytes: 0,
            disk: DiskOptions {
                queue_bytes: 1,
                ..DiskOptions::default()
            },
            ..StoreOptions::default()
        },
    );
    let (h, t, data) = &blocks[0];
    assert!(!st.persist(identity(salt, *h), t, data, false));
    assert_eq!(st.snapshot().redb.dropped, 1);
    assert!(st.persist(identity(salt, *h), t, data, true), "forced");
    st.flush().unwrap();
    assert_eq!(st.snapshot().redb.blocks, 1);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn disk_budget_evicts_least_recently_used() {
    let d = dir("budget");
    let salt = NamespaceSalt::derive("a");
    let (_, blocks) = chain(&salt);
    let st = open_known(
        &d,
        StoreOptions {
            cold_budget_bytes: 0,
            disk: DiskOptions {
                budget_bytes: 1,
                compress: false,
                ..DiskOptions::default()
            },
            ..StoreOptions::default()
        },
    );
    let (h, t, data) = &blocks[0];
    st.persist(identity(salt, *h), t, data, false);
    st.flush().unwrap();
    let s = st.snapshot().redb;
    assert_eq!(
        (s.blocks, s.dropped),
        (0, 1),
        "larger than the whole budget"
    );
    drop(st);
    let one = codec::encode(&identity(salt, *h), t, data, Encoding::Raw)
        .unwrap()
        .len() as u64;
    // The smallest budget whose cache-block share holds one block (and not two).
    let c = crate::disk::budget::charge(one);
    let budget = (c..)
        .find(|b| crate::disk::budget::block_target(*b, 0) >= c)
        .unwrap();
    assert!(crate::disk::budget::block_target(budget, 0) < 2 * c);
    let st = open_known(
        &d,
        StoreOptions {
            cold_budget_bytes: 0,
            disk: DiskOptions {
                budget_bytes: budget,
                compress: false,
                ..DiskOptions::default()
            },
            ..StoreOptions::default()
        },
    );
    for (h, t, data) in &blocks {
        st.persist(identity(salt, *h), t, data, false);
        st.flush().unwrap();
    }
    let s = st.snapshot().redb;
    assert_eq!((s.blocks, s.evictions), (1, 1));
    assert!(st.disk().unwrap().on_disk(&blocks[1].0));
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn saved_sessions_are_durable_and_checked() {
    let d = dir("sessions");
    let salt = NamespaceSalt::derive("a");
    let tokens: Vec<u32> = (0..10).collect();
    let root = BlockHash::root(&MODEL, KvElem::F16, 4, &salt);
    let rec = SessionRecord {
        model: MODEL,
        elem: KvElem::F16,
        block_tokens: 4,
        salt,
        hashes: SessionRecord::chain(&root, &tokens, 4),
        tokens,
    };
    {
        let st = open_known(&d, no_cold());
        let (tx, rx) = std::sync::mpsc::channel();
        st.save_session(
            NamespaceId(3),
            "chat",
            &rec,
            Box::new(move |r| tx.send(r.is_ok()).unwrap()),
        );
        assert!(rx.recv().unwrap());
    }
    let st = open_known(&d, no_cold());
    assert_eq!(st.load_session(NamespaceId(3), "chat").unwrap(), Some(rec));
    assert_eq!(st.load_session(NamespaceId(4), "chat").unwrap(), None);
    drop(st);
    let db = crate::disk::open_database(&d).unwrap();
    let n = db
        .begin_read()
        .unwrap()
        .open_table(BLOCKS)
        .map(|t| redb::ReadableTableMetadata::len(&t).unwrap())
        .unwrap();
    assert_eq!(n, 0);
    drop(db);
    let report = crate::maintenance::verify(&d, false).unwrap();
    assert!(report.ok(), "{report:?}");
    assert_eq!(report.sessions_checked, 1);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn evictions_handed_to_the_demotion_thread_are_never_a_miss() {
    let salt = NamespaceSalt::derive("q");
    let (root, blocks) = chain(&salt);
    let st = Arc::new(known(TierStack::in_memory(StoreOptions::default())));
    st.namespaces()
        .insert(memoria_kv::NamespaceEntry::new(NamespaceId(3), "q", salt));
    let mut sink = st.sink(MODEL, layout());
    let tokens = all_tokens(&blocks);
    for round in 0..50 {
        for (hash, t, data) in &blocks {
            sink.demote(hash, NamespaceId(3), t, data);
        }
        // Served at once, from the hand-off or the cold tier, exact.
        let mut src = st.source(MODEL, layout(), root, &tokens);
        for (hash, _, data) in &blocks {
            let mut out = vec![0u8; data.len()];
            assert!(src.fetch(hash, &mut out), "round {round}: a miss");
            assert_eq!(&out, data);
        }
        st.flush().unwrap();
        assert!(st.pending().is_empty());
        assert!(blocks.iter().all(|(h, _, _)| st.cold_holds(h)));
        // Make room for the next round's hand-offs.
        for (h, _, _) in &blocks {
            st.cold().unwrap().remove(h);
        }
    }
    // Another namespace's request never gets them, in flight or not.
    let other = BlockHash::root(&MODEL, layout().elem, 4, &NamespaceSalt::derive("z"));
    sink.demote(&blocks[0].0, NamespaceId(3), &blocks[0].1, &blocks[0].2);
    let mut foreign = st.source(MODEL, layout(), other, &tokens);
    let mut out = vec![0u8; blocks[0].2.len()];
    assert!(!foreign.fetch(&blocks[0].0, &mut out));
    drop(sink);
    assert!(
        st.pending().is_empty(),
        "dropping the sink drains its queue"
    );
}

#[test]
fn residency_moves_follow_a_block_down_the_tiers() {
    let d = dir("residency");
    let salt = NamespaceSalt::derive("r");
    let (_, blocks) = chain(&salt);
    let st = Arc::new(one_block_cold(&d, salt, &blocks));
    st.namespaces()
        .insert(memoria_kv::NamespaceEntry::new(NamespaceId(4), "r", salt));
    let journal = Arc::new(Residency::new(64));
    st.watch_residency(journal.clone());
    let mut sink = st.sink(MODEL, layout());
    // The pool evicts both blocks: each leaves the hot tier for cold RAM; the second pushes
    // the first out of cold RAM onto disk.
    for (hash, t, data) in &blocks {
        sink.demote(hash, NamespaceId(4), t, data);
    }
    st.flush().unwrap();
    let mut moves = Vec::new();
    assert!(!journal.drain(&mut moves), "nothing dropped");
    let of = |h: &BlockHash| -> Vec<(EventTier, bool)> {
        moves
            .iter()
            .filter(|m| m.hash == *h)
            .map(|m| (m.tier, m.held))
            .collect()
    };
    let (first, second) = (blocks[0].0, blocks[1].0);
    assert_eq!(
        of(&first),
        vec![
            (EventTier::Hot, false),
            (EventTier::Cold, true),
            (EventTier::Cold, false),
            (EventTier::Disk, true)
        ],
        "{moves:?}"
    );
    assert_eq!(
        of(&second),
        vec![(EventTier::Hot, false), (EventTier::Cold, true)]
    );
    // Removed from disk and from cold RAM (e.g. found corrupt): said too.
    assert!(st.disk().unwrap().remove(&first));
    assert!(st.cold().unwrap().remove(&second));
    assert!(!st.cold().unwrap().remove(&second), "only what was held");
    journal.drain(&mut moves);
    assert_eq!(
        moves,
        vec![
            crate::Move {
                hash: first,
                tier: EventTier::Disk,
                held: false
            },
            crate::Move {
                hash: second,
                tier: EventTier::Cold,
                held: false
            }
        ]
    );
    drop(sink);
    let _ = std::fs::remove_dir_all(&d);
}

/// `st` with the test salts' namespaces registered (a host registers its namespaces in the
/// stack's registry, which the namespace check of a stored block reads). The tail tests use
/// it too.
pub(super) fn known(st: TierStack) -> TierStack {
    for (i, name) in ["a", "b", "q", "r", "t", "u", "z"].into_iter().enumerate() {
        st.namespaces().insert(memoria_kv::NamespaceEntry::new(
            memoria_kv::NamespaceId(100 + i as u32),
            name,
            NamespaceSalt::derive(name),
        ));
    }
    st
}

/// The stack on disk at `d` with the test salts registered ([`known`]).
pub(super) fn open_known(d: &std::path::Path, opts: StoreOptions) -> TierStack {
    known(TierStack::open(d, opts).unwrap())
}
