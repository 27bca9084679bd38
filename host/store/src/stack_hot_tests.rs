//! Saved hot prefixes through the stack: durable across a reopen, replaced by the next save,
//! and a damaged record is a typed refusal (never a panic, never a record).

use memoria_kv::{KvElem, ModelFingerprint};

use super::*;
use crate::disk::tables::{HOT, HOT_KEY};
use crate::{HotEntry, HotError, HotRecord};

fn record(count: f64) -> HotRecord {
    HotRecord {
        model: ModelFingerprint([5; 32]),
        elem: KvElem::F16,
        block_tokens: 4,
        entries: vec![HotEntry {
            namespace: "default".into(),
            tokens: (0..8).collect(),
            count,
        }],
    }
}

fn save(st: &TierStack, r: &HotRecord) -> Result<(), StoreError> {
    let (tx, rx) = std::sync::mpsc::channel();
    st.save_hot(r, Box::new(move |r| tx.send(r).unwrap()));
    rx.recv().unwrap()
}

#[test]
fn hot_prefixes_survive_a_reopen_and_damage_is_refused() {
    let d = std::env::temp_dir().join(format!("memoria-store-hot-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    {
        let st = TierStack::open(&d, StoreOptions::default()).unwrap();
        assert_eq!(st.load_hot().unwrap(), None, "none saved yet");
        save(&st, &record(2.0)).unwrap();
        save(&st, &record(9.5)).unwrap();
        let mut bad = record(1.0);
        bad.entries[0].tokens.pop();
        assert!(matches!(
            save(&st, &bad),
            Err(StoreError::Hot(HotError::Field("token count")))
        ));
    }
    let st = TierStack::open(&d, StoreOptions::default()).unwrap();
    assert_eq!(st.load_hot().unwrap(), Some(record(9.5)), "the last save");
    drop(st);
    let r = crate::maintenance::verify(&d, false).unwrap();
    assert!(r.ok() && r.hot_checked, "a sound record verifies: {r:?}");

    let db = crate::disk::open_database(&d).unwrap();
    let txn = db.begin_write().unwrap();
    {
        let mut t = txn.open_table(HOT).unwrap();
        let mut b = record(3.0).encode().unwrap();
        b[20] ^= 1;
        t.insert(HOT_KEY, b.as_slice()).unwrap();
    }
    txn.commit().unwrap();
    drop(db);
    let st = TierStack::open(&d, StoreOptions::default()).unwrap();
    assert!(matches!(
        st.load_hot(),
        Err(StoreError::Hot(HotError::Checksum))
    ));
    assert_eq!(
        st.snapshot().redb.read_errors,
        0,
        "a refusal, not a read error"
    );
    drop(st);
    // `store verify` names the damaged record, and `--repair` removes it.
    let r = crate::maintenance::verify(&d, false).unwrap();
    assert!(r.hot_checked && !r.ok(), "{r:?}");
    assert_eq!(r.bad.len(), 1, "{r:?}");
    assert_eq!((r.bad[0].table, r.bad[0].key.as_str()), ("hot", HOT_KEY));
    assert!(r.bad[0].reason.contains("checksum"), "{r:?}");
    let r = crate::maintenance::verify(&d, true).unwrap();
    assert_eq!(r.removed, 1, "{r:?}");
    let r = crate::maintenance::verify(&d, false).unwrap();
    assert!(r.ok() && !r.hot_checked, "{r:?}");
    let _ = std::fs::remove_dir_all(&d);

    let mem = TierStack::in_memory(StoreOptions::default());
    assert_eq!(mem.load_hot().unwrap(), None);
    assert!(matches!(save(&mem, &record(1.0)), Err(StoreError::NoDisk)));
}

fn routes() -> crate::RoutesRecord {
    crate::RoutesRecord {
        model: ModelFingerprint([5; 32]),
        elem: KvElem::F16,
        block_tokens: 4,
        entries: vec![crate::RouteEntry {
            block: BlockHash([1; 32]),
            routes: vec![BlockHash([2; 32]), BlockHash([3; 32])],
        }],
    }
}

fn save_routes(st: &TierStack, r: &crate::RoutesRecord) -> Result<(), StoreError> {
    let (tx, rx) = std::sync::mpsc::channel();
    st.save_routes(r, Box::new(move |r| tx.send(r).unwrap()));
    rx.recv().unwrap()
}

#[test]
fn routing_keys_survive_a_reopen_beside_the_hot_prefixes_and_damage_is_refused() {
    use crate::disk::tables::ROUTES_KEY;
    let d = std::env::temp_dir().join(format!("memoria-store-routes-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    {
        let st = TierStack::open(&d, StoreOptions::default()).unwrap();
        assert_eq!(st.load_routes().unwrap(), None, "none saved yet");
        save(&st, &record(2.0)).unwrap();
        save_routes(&st, &routes()).unwrap();
        let mut bad = routes();
        bad.entries[0].routes.clear();
        assert!(matches!(
            save_routes(&st, &bad),
            Err(StoreError::Routes(HotError::Field("route count")))
        ));
    }
    let st = TierStack::open(&d, StoreOptions::default()).unwrap();
    assert_eq!(st.load_routes().unwrap(), Some(routes()));
    assert_eq!(st.load_hot().unwrap(), Some(record(2.0)), "kept beside it");
    drop(st);
    let r = crate::maintenance::verify(&d, false).unwrap();
    assert!(r.ok() && r.hot_checked && r.routes_checked, "{r:?}");

    let db = crate::disk::open_database(&d).unwrap();
    let txn = db.begin_write().unwrap();
    {
        let mut t = txn.open_table(HOT).unwrap();
        let mut b = routes().encode().unwrap();
        b[60] ^= 1;
        t.insert(ROUTES_KEY, b.as_slice()).unwrap();
    }
    txn.commit().unwrap();
    drop(db);
    let st = TierStack::open(&d, StoreOptions::default()).unwrap();
    assert!(matches!(
        st.load_routes(),
        Err(StoreError::Routes(HotError::Checksum))
    ));
    assert_eq!(st.load_hot().unwrap(), Some(record(2.0)), "untouched");
    assert_eq!(st.snapshot().redb.read_errors, 0, "a refusal");
    drop(st);
    let r = crate::maintenance::verify(&d, false).unwrap();
    assert_eq!(r.bad.len(), 1, "{r:?}");
    assert_eq!((r.bad[0].table, r.bad[0].key.as_str()), ("hot", ROUTES_KEY));
    let r = crate::maintenance::verify(&d, true).unwrap();
    assert_eq!(r.removed, 1, "{r:?}");
    let r = crate::maintenance::verify(&d, false).unwrap();
    assert!(r.ok() && r.hot_checked && !r.routes_checked, "{r:?}");
    // A full clear drops the routing keys with the blocks they name.
    let st = TierStack::open(&d, StoreOptions::default()).unwrap();
    save_routes(&st, &routes()).unwrap();
    drop(st);
    crate::maintenance::clear(&d, None).unwrap();
    let st = TierStack::open(&d, StoreOptions::default()).unwrap();
    assert_eq!(st.load_routes().unwrap(), None);
    drop(st);
    let _ = std::fs::remove_dir_all(&d);

    let mem = TierStack::in_memory(StoreOptions::default());
    assert_eq!(mem.load_routes().unwrap(), None);
    assert!(!mem.on_disk(&BlockHash([1; 32])));
    assert!(matches!(
        save_routes(&mem, &routes()),
        Err(StoreError::NoDisk)
    ));
}
