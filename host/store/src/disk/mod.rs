//! The redb tier: encoded blocks and saved sessions in one redb file, written behind the
//! engine by one writer thread. Invariants: the engine thread never waits on disk writes
//! (block puts go through a queue bounded in bytes and are dropped and counted when it is
//! full); reads are snapshot reads that never block the writer; the in-memory index mirrors
//! `block_index` plus the blocks still queued; the file is held to a disk budget (cache blocks
//! evicted least recently used first, named saves refused past their own budget); nothing redb
//! does on a damaged file (an error or a panic) leaves this module as anything but a typed
//! error or a miss. With [`DiskOptions::recover`] (`--store-recover`) a damaged file, found at
//! open by redb's integrity check or later by a write, is moved aside and an empty store
//! started, so the writer always ends up writing.

pub mod budget;
mod file;
mod fresh;
mod index;
mod open;
mod records;
mod resume;
mod shrink;
mod slot;
pub mod tables;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use memoria_kv::BlockHash;
use redb::ReadableDatabase;

pub use file::RedbFile;
pub(crate) use open::{init_tables, open_redb};
use open::{load_index, recover_salvaging, unopenable};
pub use open::{open_database, open_database_checked, open_database_with};
pub use writer::Ack;

use self::index::DiskIndex;
use self::resume::{Reopen, ReopenFile, Resumer};
use self::slot::DbSlot;
use self::tables::{BLOCKS, DB_FILE};
use self::writer::{Failure, Msg, Writer, failure};
use crate::codec::{BlockIdentity, Encoding};
use crate::error::{DbResult, StoreError};
use crate::guard::contain;
use crate::stats::TierStats;
use crate::tier::Tier;

/// How the redb tier is sized and batched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiskOptions {
    /// Bytes the store file may take (cache blocks are evicted least recently used first to
    /// stay within it); 0: a tenth of the filesystem's free space at open, plus the file's
    /// current size.
    pub budget_bytes: u64,
    /// Bytes of named saves the file may hold (part of `budget_bytes`; saves past it are
    /// refused); 0: a quarter of the disk budget.
    pub saves_budget_bytes: u64,
    /// Block bytes that may wait for the writer; puts beyond it are dropped and counted.
    pub queue_bytes: u64,
    /// Messages applied per write transaction, at most.
    pub max_batch: usize,
    /// LZ4-compress blocks on disk.
    pub compress: bool,
    /// redb's page cache, in bytes. Small by default: the tiers above keep the blocks read, so
    /// this cache needs the B-tree's branch pages only; a large one would keep each block read
    /// a second time (its whole leaf page, in fresh memory on every read of a restarted host).
    pub cache_bytes: usize,
    /// The longest cache blocks stay committed without fsync (saves are always durable).
    pub sync_interval: Duration,
    /// After a disk failure, how soon the writer first tries writing again (then doubling).
    pub resume_interval: Duration,
    /// `--store-recover`: run redb's integrity check at open (it reads the whole file) and move
    /// a damaged file aside to start an empty store, at open or when a write meets the damage.
    pub recover: bool,
}

impl Default for DiskOptions {
    fn default() -> Self {
        DiskOptions {
            budget_bytes: 0,
            saves_budget_bytes: 0,
            queue_bytes: 256 << 20,
            max_batch: 256,
            compress: true,
            cache_bytes: 4 << 20,
            sync_interval: Duration::from_secs(1),
            resume_interval: Duration::from_secs(5),
            recover: false,
        }
    }
}

impl DiskOptions {
    /// The budgets for a store in `dir` with the defaults filled in: (disk, saves).
    pub fn resolve_budgets(&self, dir: &Path) -> Result<(u64, u64), StoreError> {
        let disk = if self.budget_bytes > 0 {
            self.budget_bytes
        } else {
            let existing = std::fs::metadata(dir.join(DB_FILE)).map_or(0, |m| m.len());
            budget::default_budget(dir, existing).map_err(|e| StoreError::Open {
                path: dir.display().to_string(),
                msg: format!("reading the filesystem's free space: {e}"),
            })?
        };
        let saves = if self.saves_budget_bytes > 0 {
            self.saves_budget_bytes.min(disk / 2)
        } else {
            disk / budget::DEFAULT_SAVES_FRACTION
        };
        Ok((disk, saves))
    }
}

/// Blocks and sessions in a redb file, with a write-behind thread.
pub struct RedbTier {
    path: PathBuf,
    /// Shared with the writer, which swaps in a reopened database after a disk failure.
    db: Arc<DbSlot>,
    index: Arc<Mutex<DiskIndex>>,
    stats: Arc<TierStats>,
    opts: DiskOptions,
    saves_budget: u64,
    failed: Failure,
    tx: Mutex<Option<Sender<Msg>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for RedbTier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedbTier")
            .field("path", &self.path)
            .field("opts", &self.opts)
            .finish_non_exhaustive()
    }
}

impl RedbTier {
    /// Opens the store in `dir` and starts its writer thread.
    /// A file that cannot be opened because it is damaged is [`StoreError::Unopenable`].
    /// With `opts.recover`, redb's integrity check runs first (it reads the whole file), and a
    /// damaged file (found by the check, or reading the index) is salvaged: what still reads
    /// and verifies goes on in a fresh file, the damaged one is moved aside, saying so on
    /// stderr.
    pub fn open(dir: &Path, opts: DiskOptions) -> Result<RedbTier, StoreError> {
        let budgets = opts.resolve_budgets(dir)?;
        if opts.recover && dir.join(DB_FILE).is_file() {
            match crate::maintenance::check(dir) {
                Err(e) if e.is_damaged() => recover_salvaging(dir, &e)?,
                Err(e) => return Err(unopenable(&dir.join(DB_FILE), e)),
                Ok(_) => {}
            }
        }
        match crate::maintenance::keeping_header(dir, || Self::open_file(dir, opts, budgets)) {
            Err(e) if e.is_damaged() && opts.recover => {
                recover_salvaging(dir, &e)?;
                Self::open_file(dir, opts, budgets)
            }
            r => r,
        }
    }

    fn open_file(
        dir: &Path,
        opts: DiskOptions,
        budgets: (u64, u64),
    ) -> Result<RedbTier, StoreError> {
        let db = open_database_with(dir, opts.cache_bytes)?;
        let reopen = ReopenFile {
            dir: dir.to_path_buf(),
            cache_bytes: opts.cache_bytes,
            budget: budgets.0,
        };
        Self::with_database(dir.join(DB_FILE), db, Box::new(reopen), opts, budgets)
    }

    /// The tier over an opened database whose file is `path` (tests open one on a
    /// fault-injecting backend), reopened by `reopen` after a disk failure, with the
    /// (disk, saves) budgets in force.
    pub(crate) fn with_database(
        path: PathBuf,
        db: RedbFile,
        reopen: Box<dyn Reopen>,
        opts: DiskOptions,
        (budget, saves_budget): (u64, u64),
    ) -> Result<RedbTier, StoreError> {
        let db = Arc::new(db);
        let ix = match contain("read the index", || load_index(&db)) {
            Ok(ix) => ix,
            Err(e) => {
                drop(db); // closes under `contain` and lets go of the file (`RedbFile`)
                return Err(unopenable(&path, e));
            }
        };
        let stats = Arc::new(TierStats::default());
        stats.budget_bytes.store(budget, Relaxed);
        stats.saves_budget_bytes.store(saves_budget, Relaxed);
        stats.blocks.store(ix.len() as u64, Relaxed);
        stats.bytes.store(ix.bytes, Relaxed);
        stats.charged_bytes.store(ix.charged, Relaxed);
        stats.saves_bytes.store(ix.saves_charged, Relaxed);
        if let Ok(m) = std::fs::metadata(&path) {
            stats.file_bytes.store(m.len(), Relaxed);
        }
        let index = Arc::new(Mutex::new(ix));
        let failed = Failure::default();
        let db = Arc::new(DbSlot::new(db));
        let writer = Writer {
            db: db.clone(),
            path: path.clone(),
            index: index.clone(),
            stats: stats.clone(),
            failed: failed.clone(),
            budget,
            max_batch: opts.max_batch.max(1),
            sync_interval: opts.sync_interval,
            last_durable: Instant::now().into(),
            undurable: Vec::new().into(),
            churn: 0.into(),
            trim: 0.into(),
            settled: 0.into(),
            recover: opts.recover,
        };
        let resumer = Resumer::new(reopen, opts.resume_interval);
        let (tx, rx) = channel();
        let thread = std::thread::Builder::new()
            .name("memoria-store-writer".into())
            .spawn(move || {
                memoria_kv::background::lower_this_thread();
                writer.run(rx, resumer)
            })?;
        let tier = RedbTier {
            path,
            db,
            index,
            stats,
            opts,
            saves_budget,
            failed,
            tx: Mutex::new(Some(tx)),
            thread: Mutex::new(Some(thread)),
        };
        // The first commit evicts down to the budget (it may have been lowered since).
        let _ = tier.send(Msg::Flush(Box::new(|_| {})));
        Ok(tier)
    }

    /// The failure that stopped the writer (a full disk, an I/O error, a damaged file), if any.
    pub fn failure(&self) -> Option<StoreError> {
        failure(&self.failed)
    }

    /// The disk budget and the saves' budget in force, in bytes.
    pub fn budgets(&self) -> (u64, u64) {
        (self.stats.budget_bytes.load(Relaxed), self.saves_budget)
    }

    /// The RAM this tier may hold: (redb's page cache, the write-behind queue), in bytes.
    pub fn memory_budgets(&self) -> (u64, u64) {
        let cache = u64::try_from(self.opts.cache_bytes).unwrap_or(u64::MAX);
        (cache, self.opts.queue_bytes)
    }

    /// This tier's figures.
    pub fn stats(&self) -> &Arc<TierStats> {
        &self.stats
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The database for one read; an error while the writer is reopening it.
    fn database(&self) -> Result<Arc<RedbFile>, StoreError> {
        memoria_kv::step_guard::note_step_work();
        self.db.get().ok_or(StoreError::Reopening)
    }

    fn index(&self) -> MutexGuard<'_, DiskIndex> {
        crate::sync::lock(&self.index)
    }

    fn send(&self, m: Msg) -> Result<(), StoreError> {
        let g = crate::sync::lock(&self.tx);
        let tx = g.as_ref().ok_or(StoreError::WriterGone)?;
        tx.send(m).map_err(|_| StoreError::WriterGone)
    }

    /// Queues a block message unless the queue is over its byte bound (`force` ignores the
    /// bound) or the block is stored or queued already. Returns whether it was queued.
    fn enqueue_block(&self, hash: BlockHash, m: Msg, force: bool) -> bool {
        self.enqueue_msg(hash, m, force, true)
    }

    /// [`Self::enqueue_block`]; `once: false` queues it even when `hash` is stored or queued
    /// (the write replaces the value), without marking it queued.
    fn enqueue_msg(&self, hash: BlockHash, m: Msg, force: bool, once: bool) -> bool {
        let bytes = m.queued_bytes();
        if self.failure().is_some() {
            TierStats::add(&self.stats.dropped, 1);
            return false;
        }
        if !force && self.stats.queue_bytes.load(Relaxed) + bytes > self.opts.queue_bytes {
            TierStats::add(&self.stats.dropped, 1);
            return false;
        }
        if once && !self.index().enqueue(hash) {
            return false;
        }
        self.stats.queue_blocks.fetch_add(1, Relaxed);
        self.stats.queue_bytes.fetch_add(bytes, Relaxed);
        if self.send(m).is_err() {
            self.stats.queue_blocks.fetch_sub(1, Relaxed);
            self.stats.queue_bytes.fetch_sub(bytes, Relaxed);
            if once {
                self.index().dequeue(&hash);
            }
            TierStats::add(&self.stats.dropped, 1);
            return false;
        }
        true
    }

    /// Queues a raw block to be encoded and written by the writer thread (the engine thread
    /// pays one copy). Returns false when it is already stored or queued, or was dropped.
    pub fn put_raw(
        &self,
        identity: BlockIdentity,
        tokens: &[u32],
        data: &[u8],
        force: bool,
    ) -> bool {
        if self.index().contains(&identity.hash) {
            return false;
        }
        let m = self.encode_msg(identity, tokens.to_vec(), data.to_vec());
        self.enqueue_block(identity.hash, m, force)
    }

    /// Queues a partial tail, padded to a block (see `crate::stack`'s tails), to be encoded
    /// and written under its tail key `identity.hash`, replacing the value kept there.
    /// Returns whether it was queued.
    pub fn put_tail(&self, identity: BlockIdentity, tokens: Vec<u32>, data: Vec<u8>) -> bool {
        let m = self.encode_msg(identity, tokens, data);
        self.enqueue_msg(identity.hash, m, false, false)
    }

    /// The writer's job to encode a raw block (LZ4 when the tier compresses) and write it.
    fn encode_msg(&self, identity: BlockIdentity, tokens: Vec<u32>, data: Vec<u8>) -> Msg {
        let encoding = if self.opts.compress {
            Encoding::Lz4
        } else {
            Encoding::Raw
        };
        Msg::Encode {
            identity,
            tokens,
            data,
            encoding,
        }
    }

    /// Whether the block is committed (not merely queued).
    pub fn on_disk(&self, hash: &BlockHash) -> bool {
        self.index().on_disk(hash)
    }

    /// Records a model's description in the `models` table (once per fingerprint).
    pub fn register_model(&self, fingerprint: [u8; 32], desc: String) {
        let _ = self.send(Msg::Model { fingerprint, desc });
    }

    /// Reports every block written to or removed from the file from now on to `r` (blocks the
    /// file held at open are not reported).
    pub fn watch(&self, r: std::sync::Arc<crate::Residency>) {
        self.index().watch = Some(r);
    }

    /// Tells `remote` every block removed from the file from now on (see
    /// [`crate::remote::RemoteTier::forget`]).
    pub(crate) fn forget_removed_in(&self, remote: Arc<crate::remote::RemoteTier>) {
        self.index().remote = Some(remote);
    }

    /// Moves a block to most recently used (persisted with the next commit).
    pub fn touch(&self, hash: &BlockHash) {
        let _ = self.send(Msg::Touch(*hash));
    }

    /// Waits until everything queued before this call is committed.
    pub fn flush(&self) -> Result<(), StoreError> {
        let (tx, rx) = channel();
        let ack: Ack = Box::new(move |r| {
            let _ = tx.send(r);
        });
        if let Err(m) = self.send_or_return(Msg::Flush(ack))
            && let Msg::Flush(ack) = *m
        {
            ack(Err(StoreError::WriterGone));
        }
        rx.recv().map_err(|_| StoreError::WriterGone)?
    }

    /// Stops the writer after it has committed everything queued.
    pub fn close(&self) {
        self.tx.lock().unwrap_or_else(|p| p.into_inner()).take();
        let t = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(t) = t {
            let _ = t.join();
        }
    }

    fn read(&self, hash: &BlockHash) -> Result<Option<Vec<u8>>, StoreError> {
        let mut out = None;
        self.read_with(hash, &mut |v| out = Some(v.to_vec()))?;
        Ok(out)
    }

    /// Calls `f` with the stored value under `hash`, borrowed from redb; returns whether
    /// there was one.
    fn read_with(&self, hash: &BlockHash, f: &mut dyn FnMut(&[u8])) -> Result<bool, StoreError> {
        contain("read block", || {
            let txn = self.database()?.begin_read().db("begin read")?;
            let t = txn.open_table(BLOCKS).db("open blocks")?;
            Ok(match t.get(hash.0).db("read block")? {
                Some(v) => {
                    f(v.value());
                    true
                }
                None => false,
            })
        })
    }
}

impl Drop for RedbTier {
    fn drop(&mut self) {
        self.close();
        if let Some(db) = self.db.take() {
            drop(db); // closes under `contain` and lets go of the file (`RedbFile`)
        }
    }
}

impl Tier for RedbTier {
    fn name(&self) -> &'static str {
        "redb"
    }

    fn get(&self, hash: &BlockHash) -> Option<Vec<u8>> {
        if !self.index().on_disk(hash) {
            return None;
        }
        match self.read(hash) {
            Ok(v) => v,
            Err(_) => {
                TierStats::add(&self.stats.read_errors, 1);
                None
            }
        }
    }

    fn get_with(&self, hash: &BlockHash, f: &mut dyn FnMut(&[u8])) -> bool {
        if !self.index().on_disk(hash) {
            return false;
        }
        self.read_with(hash, f).unwrap_or_else(|_| {
            TierStats::add(&self.stats.read_errors, 1);
            false
        })
    }

    fn put(&self, hash: &BlockHash, encoded: Vec<u8>) {
        let m = Msg::Put {
            hash: *hash,
            encoded,
        };
        self.enqueue_block(*hash, m, false);
    }

    fn contains(&self, hash: &BlockHash) -> bool {
        self.index().contains(hash)
    }

    fn remove(&self, hash: &BlockHash) -> bool {
        let had = self.index().remove(hash);
        let _ = self.send(Msg::Remove(*hash));
        had
    }
}

#[cfg(test)]
#[path = "fault_tests.rs"]
mod fault_tests;

#[cfg(test)]
#[path = "file_budget_tests.rs"]
mod file_budget_tests;

#[cfg(test)]
#[path = "damage_tests.rs"]
mod damage_tests;
