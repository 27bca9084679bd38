//! The redb tier: encoded blocks and saved sessions in one redb file, written behind the
//! engine by one writer thread. Invariants: the engine thread never waits on disk writes
//! (block puts go through a queue bounded in bytes and are dropped and counted when it is
//! full); reads are snapshot reads that never block the writer; the in-memory index mirrors
//! `block_index` plus the blocks still queued.

mod index;
pub mod tables;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use memoria_kv::BlockHash;
use redb::{Database, ReadableDatabase, ReadableTable};

pub use writer::Ack;

use self::index::DiskIndex;
use self::tables::{
    BLOCK_INDEX, BLOCKS, CLOCK_KEY, DB_FILE, FORMAT_KEY, META, MODELS, SESSIONS, STORE_FORMAT,
};
use self::writer::{Msg, Writer};
use crate::codec::{BlockIdentity, Encoding};
use crate::error::{DbResult, StoreError};
use crate::session::SessionRecord;
use crate::stats::TierStats;
use crate::tier::Tier;

/// How the redb tier is sized and batched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiskOptions {
    /// Encoded bytes the file may hold before least-recently-used blocks are evicted.
    pub budget_bytes: u64,
    /// Block bytes that may wait for the writer; puts beyond it are dropped and counted.
    pub queue_bytes: u64,
    /// Messages applied per write transaction, at most.
    pub max_batch: usize,
    /// LZ4-compress blocks on disk.
    pub compress: bool,
}

impl Default for DiskOptions {
    fn default() -> Self {
        DiskOptions {
            budget_bytes: 16 << 30,
            queue_bytes: 256 << 20,
            max_batch: 256,
            compress: true,
        }
    }
}

/// Blocks and sessions in a redb file, with a write-behind thread.
pub struct RedbTier {
    path: PathBuf,
    db: Arc<Database>,
    index: Arc<Mutex<DiskIndex>>,
    stats: Arc<TierStats>,
    opts: DiskOptions,
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

/// Opens (creating if needed) the store database in `dir`, checks its table format and creates
/// missing tables.
pub fn open_database(dir: &Path) -> Result<Database, StoreError> {
    std::fs::create_dir_all(dir).map_err(|e| StoreError::Open {
        path: dir.display().to_string(),
        msg: e.to_string(),
    })?;
    let path = dir.join(DB_FILE);
    let db = Database::create(&path).map_err(|e| StoreError::Open {
        path: path.display().to_string(),
        msg: e.to_string(),
    })?;
    let txn = db.begin_write().db("begin write")?;
    {
        let mut meta = txn.open_table(META).db("open meta")?;
        let found = meta.get(FORMAT_KEY).db("read format")?.map(|v| v.value());
        match found {
            Some(v) if v != STORE_FORMAT => {
                return Err(StoreError::Format {
                    found: v,
                    supported: STORE_FORMAT,
                });
            }
            Some(_) => {}
            None => {
                meta.insert(FORMAT_KEY, STORE_FORMAT).db("write format")?;
            }
        }
        txn.open_table(BLOCKS).db("open blocks")?;
        txn.open_table(BLOCK_INDEX).db("open block_index")?;
        txn.open_table(SESSIONS).db("open sessions")?;
        txn.open_table(MODELS).db("open models")?;
    }
    txn.commit().db("commit")?;
    Ok(db)
}

impl RedbTier {
    /// Opens the store in `dir` and starts its writer thread.
    pub fn open(dir: &Path, opts: DiskOptions) -> Result<RedbTier, StoreError> {
        let db = Arc::new(open_database(dir)?);
        let mut ix = DiskIndex::default();
        {
            let txn = db.begin_read().db("begin read")?;
            let bix = txn.open_table(BLOCK_INDEX).db("open block_index")?;
            for e in bix.iter().db("scan block_index")? {
                let (k, v) = e.db("read block_index")?;
                let (len, stamp) = v.value();
                ix.insert(BlockHash(k.value()), len, stamp.max(1));
            }
            let meta = txn.open_table(META).db("open meta")?;
            let clock = meta
                .get(CLOCK_KEY)
                .db("read clock")?
                .map_or(0, |v| v.value());
            ix.clock = ix.clock.max(clock);
        }
        let stats = Arc::new(TierStats::default());
        stats.blocks.store(ix.len() as u64, Relaxed);
        stats.bytes.store(ix.bytes, Relaxed);
        let index = Arc::new(Mutex::new(ix));
        let writer = Writer {
            db: db.clone(),
            index: index.clone(),
            stats: stats.clone(),
            budget: opts.budget_bytes,
            max_batch: opts.max_batch.max(1),
        };
        let (tx, rx) = channel();
        let thread = std::thread::Builder::new()
            .name("memoria-store-writer".into())
            .spawn(move || writer.run(rx))?;
        Ok(RedbTier {
            path: dir.join(DB_FILE),
            db,
            index,
            stats,
            opts,
            tx: Mutex::new(Some(tx)),
            thread: Mutex::new(Some(thread)),
        })
    }

    /// This tier's figures.
    pub fn stats(&self) -> &Arc<TierStats> {
        &self.stats
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn index(&self) -> MutexGuard<'_, DiskIndex> {
        self.index.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn send(&self, m: Msg) -> Result<(), StoreError> {
        let g = self.tx.lock().unwrap_or_else(|p| p.into_inner());
        let tx = g.as_ref().ok_or(StoreError::WriterGone)?;
        tx.send(m).map_err(|_| StoreError::WriterGone)
    }

    /// Queues a block message unless the queue is over its byte bound (`force` ignores the
    /// bound). Returns whether it was queued.
    fn enqueue_block(&self, hash: BlockHash, m: Msg, force: bool) -> bool {
        let bytes = m.queued_bytes();
        if !force && self.stats.queue_bytes.load(Relaxed) + bytes > self.opts.queue_bytes {
            TierStats::add(&self.stats.dropped, 1);
            return false;
        }
        if !self.index().enqueue(hash) {
            return false;
        }
        self.stats.queue_blocks.fetch_add(1, Relaxed);
        self.stats.queue_bytes.fetch_add(bytes, Relaxed);
        if self.send(m).is_err() {
            self.stats.queue_blocks.fetch_sub(1, Relaxed);
            self.stats.queue_bytes.fetch_sub(bytes, Relaxed);
            self.index().dequeue(&hash);
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
        let encoding = if self.opts.compress {
            Encoding::Lz4
        } else {
            Encoding::Raw
        };
        let m = Msg::Encode {
            identity,
            tokens: tokens.to_vec(),
            data: data.to_vec(),
            encoding,
        };
        self.enqueue_block(identity.hash, m, force)
    }

    /// Whether the block is committed (not merely queued).
    pub fn on_disk(&self, hash: &BlockHash) -> bool {
        self.index().on_disk(hash)
    }

    /// Records a model's description in the `models` table (once per fingerprint).
    pub fn register_model(&self, fingerprint: [u8; 32], desc: String) {
        let _ = self.send(Msg::Model { fingerprint, desc });
    }

    /// Moves a block to most recently used (persisted with the next commit).
    pub fn touch(&self, hash: &BlockHash) {
        let _ = self.send(Msg::Touch(*hash));
    }

    /// Saves a session record; `ack` runs after the commit that holds it.
    pub fn save_session(&self, ns: u64, name: &str, record: &SessionRecord, ack: Ack) {
        let m = Msg::Session {
            ns,
            name: name.to_string(),
            record: record.encode(),
            ack,
        };
        if let Err(m) = self.send_or_return(m)
            && let Msg::Session { ack, .. } = *m
        {
            ack(Err(StoreError::WriterGone));
        }
    }

    fn send_or_return(&self, m: Msg) -> Result<(), Box<Msg>> {
        let g = self.tx.lock().unwrap_or_else(|p| p.into_inner());
        match g.as_ref() {
            Some(tx) => tx.send(m).map_err(|e| Box::new(e.0)),
            None => Err(Box::new(m)),
        }
    }

    /// Reads a saved session (verified); `None` when there is none by that name.
    pub fn load_session(&self, ns: u64, name: &str) -> Result<Option<SessionRecord>, StoreError> {
        let txn = self.db.begin_read().db("begin read")?;
        let t = txn.open_table(SESSIONS).db("open sessions")?;
        let Some(v) = t.get((ns, name)).db("read session")? else {
            return Ok(None);
        };
        Ok(Some(SessionRecord::decode(v.value())?))
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
        let txn = self.db.begin_read().db("begin read")?;
        let t = txn.open_table(BLOCKS).db("open blocks")?;
        Ok(t.get(hash.0).db("read block")?.map(|v| v.value().to_vec()))
    }
}

impl Drop for RedbTier {
    fn drop(&mut self) {
        self.close();
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
        self.read(hash).ok().flatten()
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
