//! The redb tier on a fault-injecting storage backend: once the "disk" is full, commits fail
//! with ENOSPC; the tier must say so (a full disk, not a stopped engine), drop blocks and refuse
//! saves with that reason, keep serving reads, never panic, and write again once space is back.
//! The backend also counts fsyncs: cache blocks commit without one, saves with one.

use std::fs::OpenOptions;
use std::io;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use memoria_kv::{BlockHash, KvElem, KvLayout, ModelFingerprint, NamespaceSalt};
use redb::backends::FileBackend;
use redb::{BackendError, Database, StorageBackend};

use super::resume::Reopen;
use super::{DiskOptions, RedbFile, RedbTier, init_tables};
use crate::StoreError;
use crate::codec::BlockIdentity;
use crate::session::SessionRecord;
use crate::tier::Tier;

/// A file backend whose writes and growth fail with ENOSPC while `full` is set, and that
/// counts its successful fsyncs.
#[derive(Debug)]
struct FullDisk {
    inner: FileBackend,
    full: Arc<AtomicBool>,
    syncs: Arc<AtomicU64>,
}

/// The switch and the counter shared by every backend opened on one test file.
#[derive(Clone, Default)]
struct Disk {
    full: Arc<AtomicBool>,
    syncs: Arc<AtomicU64>,
}

impl Disk {
    fn open(&self, path: &Path) -> Result<RedbFile, StoreError> {
        let open = |e: &dyn std::fmt::Display| StoreError::Open {
            path: path.display().to_string(),
            msg: e.to_string(),
        };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| open(&e))?;
        let backend = FullDisk {
            inner: FileBackend::new(file).map_err(|e| open(&e))?,
            full: self.full.clone(),
            syncs: self.syncs.clone(),
        };
        let db = Database::builder()
            .create_with_backend(backend)
            .map_err(|e| open(&e))?;
        init_tables(&db)?;
        Ok(RedbFile::unmanaged(db))
    }

    fn set_full(&self, full: bool) {
        self.full.store(full, Ordering::Relaxed);
    }

    fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::Relaxed)
    }
}

/// Reopens the test file on the same switch.
struct ReopenDisk {
    disk: Disk,
    path: PathBuf,
}

impl Reopen for ReopenDisk {
    fn writable(&self) -> bool {
        !self.disk.full.load(Ordering::Relaxed)
    }
    fn reopen(&self) -> Result<RedbFile, StoreError> {
        self.disk.open(&self.path)
    }
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("memoria-store-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A tier on a fault-injecting backend in `dir`.
fn tier_on(dir: &Path, disk: &Disk, opts: DiskOptions) -> RedbTier {
    let path = dir.join("memoria.redb");
    let db = disk.open(&path).expect("open");
    let reopen = ReopenDisk {
        disk: disk.clone(),
        path: path.clone(),
    };
    RedbTier::with_database(path, db, Box::new(reopen), opts, (64 << 20, 16 << 20)).expect("tier")
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < until, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
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
        self.inner.sync_data()?;
        self.syncs.fetch_add(1, Ordering::Relaxed);
        Ok(())
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
    let dir = temp_dir("enospc");
    let disk = Disk::default();
    let tier = tier_on(&dir, &disk, DiskOptions::default());
    let full = disk.full.clone();
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

#[test]
fn a_full_disk_resumes_writing_once_space_is_back() {
    let dir = temp_dir("resume");
    let disk = Disk::default();
    let opts = DiskOptions {
        resume_interval: Duration::from_millis(20),
        ..DiskOptions::default()
    };
    let tier = tier_on(&dir, &disk, opts);
    let (id0, t0, d0) = block(0);
    assert!(tier.put_raw(id0, &t0, &d0, false));
    save(&tier, "before").expect("saved while there is room");

    disk.set_full(true);
    let (id1, t1, d1) = block(1);
    assert!(tier.put_raw(id1, &t1, &d1, false));
    assert!(tier.flush().expect_err("full").is_full());
    assert!(save(&tier, "refused").expect_err("full").is_full());
    // Still full: the writer looks, and stays stopped.
    std::thread::sleep(Duration::from_millis(100));
    assert!(tier.failure().is_some_and(|f| f.is_full()));
    assert_eq!(tier.stats().snapshot().resumes, 0);

    disk.set_full(false);
    wait_for("the writer to resume", || tier.failure().is_none());
    assert_eq!(tier.stats().snapshot().resumes, 1);
    let (id2, t2, d2) = block(2);
    assert!(
        tier.put_raw(id2, &t2, &d2, false),
        "blocks are queued again"
    );
    save(&tier, "after").expect("saves are taken again");
    tier.flush().expect("flushed");
    assert!(tier.on_disk(&id2.hash) && !tier.contains(&id1.hash));
    assert!(tier.get(&id0.hash).is_some() && tier.get(&id2.hash).is_some());
    assert!(tier.load_session(1, "before").expect("read").is_some());
    assert!(tier.load_session(1, "after").expect("read").is_some());
    assert!(tier.load_session(1, "refused").expect("read").is_none());
    drop(tier);

    // Everything acknowledged after the resume is in the file.
    let tier = RedbTier::open(&dir, DiskOptions::default()).expect("reopen for real");
    assert!(tier.on_disk(&id0.hash) && tier.on_disk(&id2.hash) && !tier.on_disk(&id1.hash));
    assert!(tier.load_session(1, "after").expect("read").is_some());
    drop(tier);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn cache_blocks_commit_without_fsync_and_saves_with_one() {
    let dir = temp_dir("fsync");
    let disk = Disk::default();
    let opts = DiskOptions {
        sync_interval: Duration::from_secs(3600),
        ..DiskOptions::default()
    };
    let tier = tier_on(&dir, &disk, opts);
    tier.flush().expect("the first commit");
    let (syncs, durable) = (disk.syncs(), tier.stats().snapshot().durable_commits);
    for i in 0..16 {
        let (id, t, d) = block(i);
        assert!(tier.put_raw(id, &t, &d, false));
        wait_for("the block's commit", || tier.on_disk(&id.hash));
    }
    let s = tier.stats().snapshot();
    assert_eq!(s.durable_commits, durable, "{s:?}");
    assert!(s.commits >= durable + 16, "one commit a block: {s:?}");
    // A durable commit fsyncs at least once; without fsync, the only ones left are redb's
    // own when the file grows (the longer file is made durable before its layout is written).
    let extra = disk.syncs() - syncs;
    assert!(extra <= 4, "{extra} fsyncs for 16 commits of cache blocks");
    save(&tier, "named").expect("saved");
    assert!(disk.syncs() > syncs, "a save is durable");
    assert_eq!(tier.stats().snapshot().durable_commits, durable + 1);
    drop(tier);
    // Closing makes the blocks committed without fsync durable too.
    let tier = RedbTier::open(&dir, DiskOptions::default()).expect("reopen");
    for i in 0..16 {
        assert!(tier.on_disk(&block(i).0.hash), "block {i}");
    }
    drop(tier);
    let _ = std::fs::remove_dir_all(&dir);
}
