//! The redb tier on a fault-injecting storage backend: once the "disk" is full, commits fail
//! with ENOSPC; the tier must say so (a full disk, not a stopped engine), drop blocks and refuse
//! saves with that reason, keep serving reads, and never panic.

use std::fs::OpenOptions;
use std::io;
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use memoria_kv::{BlockHash, KvElem, KvLayout, ModelFingerprint, NamespaceSalt};
use redb::backends::FileBackend;
use redb::{BackendError, Database, StorageBackend};

use super::{DiskOptions, RedbTier, init_tables};
use crate::codec::BlockIdentity;
use crate::session::SessionRecord;
use crate::tier::Tier;

/// A file backend whose writes and growth fail with ENOSPC while `full` is set.
#[derive(Debug)]
struct FullDisk {
    inner: FileBackend,
    full: Arc<AtomicBool>,
}

impl FullDisk {
    fn check(&self) -> Result<(), io::Error> {
        if self.full.load(Ordering::Relaxed) {
            Err(io::Error::from_raw_os_error(28))
        } else {
            Ok(())
        }
    }
}

impl StorageBackend for FullDisk {
    fn len(&self) -> Result<u64, io::Error> {
        self.inner.len()
    }
    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), io::Error> {
        self.inner.read(offset, out)
    }
    fn set_len(&self, len: u64) -> Result<(), io::Error> {
        self.check()?;
        self.inner.set_len(len)
    }
    fn sync_data(&self) -> Result<(), io::Error> {
        self.check()?;
        self.inner.sync_data()
    }
    fn write(&self, offset: u64, data: &[u8]) -> Result<(), io::Error> {
        self.check()?;
        self.inner.write(offset, data)
    }
    fn close(&self) -> Result<(), io::Error> {
        self.inner.close()
    }
    fn try_lock_range(&self, a: Bound<u64>, b: Bound<u64>) -> Result<bool, BackendError> {
        self.inner.try_lock_range(a, b)
    }
    fn try_lock_shared_range(&self, a: Bound<u64>, b: Bound<u64>) -> Result<bool, BackendError> {
        self.inner.try_lock_shared_range(a, b)
    }
    fn lock_range(&self, a: Bound<u64>, b: Bound<u64>) -> Result<(), BackendError> {
        self.inner.lock_range(a, b)
    }
    fn lock_shared_range(&self, a: Bound<u64>, b: Bound<u64>) -> Result<(), BackendError> {
        self.inner.lock_shared_range(a, b)
    }
    fn unlock_range(&self, a: Bound<u64>, b: Bound<u64>) -> Result<(), BackendError> {
        self.inner.unlock_range(a, b)
    }
    fn query_lock_range(&self, a: Bound<u64>, b: Bound<u64>) -> Result<bool, BackendError> {
        self.inner.query_lock_range(a, b)
    }
}

fn block(i: u32) -> (BlockIdentity, Vec<u32>, Vec<u8>) {
    let layout = KvLayout::new(2, 32, KvElem::F16).with_block_tokens(4);
    let tokens: Vec<u32> = (0..4).map(|t| t + 10 * i).collect();
    let identity = BlockIdentity {
        model: ModelFingerprint([7; 32]),
        layout,
        salt: NamespaceSalt::derive("full"),
        hash: BlockHash([i as u8 + 1; 32]),
    };
    let data = (0..layout.block_bytes().unwrap())
        .map(|j| (j as u32 * 7 + i) as u8)
        .collect();
    (identity, tokens, data)
}

fn record() -> SessionRecord {
    let (model, salt) = (ModelFingerprint([7; 32]), NamespaceSalt::derive("full"));
    let tokens: Vec<u32> = (0..9).collect();
    let root = BlockHash::root(&model, KvElem::F16, 4, &salt);
    SessionRecord {
        model,
        elem: KvElem::F16,
        block_tokens: 4,
        salt,
        hashes: SessionRecord::chain(&root, &tokens, 4),
        tokens,
    }
}

fn save(tier: &RedbTier, name: &str) -> Result<(), crate::StoreError> {
    let (tx, rx) = std::sync::mpsc::channel();
    tier.save_session(
        1,
        name,
        &record(),
        Box::new(move |r| {
            let _ = tx.send(r);
        }),
    );
    rx.recv().expect("every save is answered")
}

#[test]
fn a_full_disk_is_reported_as_such_and_reads_go_on() {
    let dir = std::env::temp_dir().join(format!("memoria-store-enospc-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("memoria.redb");
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .unwrap();
    let full = Arc::new(AtomicBool::new(false));
    let backend = FullDisk {
        inner: FileBackend::new(file).unwrap(),
        full: full.clone(),
    };
    let db = Database::builder().create_with_backend(backend).unwrap();
    init_tables(&db).unwrap();
    let tier = RedbTier::with_database(path, db, DiskOptions::default(), (64 << 20, 16 << 20))
        .expect("tier");
    let (id0, t0, d0) = block(0);
    assert!(tier.put_raw(id0, &t0, &d0, false));
    save(&tier, "before").expect("saved while there is room");
    tier.flush().expect("flushed");
    assert!(tier.on_disk(&id0.hash));

    full.store(true, Ordering::Relaxed);
    let (id1, t1, d1) = block(1);
    assert!(tier.put_raw(id1, &t1, &d1, false));
    let e = tier.flush().expect_err("the commit cannot be written");
    assert!(e.is_full(), "{e}");
    let msg = e.to_string();
    assert!(msg.contains("disk is full"), "{msg}");
    assert!(!msg.contains("shutting down"), "{msg}");
    assert!(tier.failure().is_some_and(|f| f.is_full()));
    let e = save(&tier, "after").expect_err("no save on a full disk");
    assert!(e.is_full(), "{e}");
    let (id2, t2, d2) = block(2);
    assert!(!tier.put_raw(id2, &t2, &d2, false), "dropped, not queued");
    assert!(!tier.on_disk(&id1.hash) && !tier.contains(&id1.hash));
    // What was committed before is still served.
    assert!(tier.get(&id0.hash).is_some());
    assert!(tier.load_session(1, "before").expect("read").is_some());
    let s = tier.stats().snapshot();
    assert!(s.write_errors >= 1 && s.dropped >= 2, "{s:?}");
    drop(tier);
    let _ = std::fs::remove_dir_all(&dir);
}
