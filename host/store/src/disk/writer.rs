//! The redb tier's write-behind thread: takes queued messages in arrival order, applies up to a
//! batch of them (bounded in messages and bytes) in one write transaction, commits, then
//! acknowledges. A batch of cache blocks only commits without fsync (`Durability::None`: a
//! crash may lose them, never corrupt the file, and the index is reread from the file at open);
//! a batch holding a save, the hot record or a flush commits durably, which also makes every
//! earlier commit durable, and so does the first batch after `sync_interval`. Invariants: an
//! acknowledgement (session save, flush) is sent only after the durable commit holding its
//! message and every earlier one returned, and every acknowledgement is sent exactly once,
//! whatever happens (an error, a panic inside redb); the disk budget is enforced inside the
//! same transaction; the queue gauges drop as soon as a message is taken. After a disk failure
//! (full, I/O error) the writer stops writing: it drops blocks (counted) and answers saves and
//! flushes with that failure while reads go on, and it resumes once the disk takes writes again
//! (see `resume.rs`); a damaged file stops it for good, unless the tier was opened with
//! `recover`: then the file is moved aside and the writer goes on with an empty one
//! (`fresh.rs`). Cache blocks written or evicted since the last durable commit are bounded by
//! one batch's bytes (past it the commit is made durable: redb can reuse the pages a commit
//! without fsync frees only after a durable one), and after every batch the file's real size is
//! checked against the budget (`shrink.rs`).

use std::cell::{Cell, RefCell};
use std::path::PathBuf;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use memoria_kv::BlockHash;
use redb::{Durability, ReadableTable, WriteTransaction};

use super::budget::{
    MIN_BUDGET, batch_bytes, block_target, charge, file_limit, next_growth, room_in_file,
};
use super::index::DiskIndex;
use super::resume::Resumer;
use super::slot::DbSlot;
use super::tables::{BLOCK_INDEX, BLOCKS, CLOCK_KEY, HOT, META, MODELS, SESSIONS};
use crate::codec::{self, BlockIdentity, Encoding};
use crate::error::{DbResult, StoreError};
use crate::guard::{LeakOnUnwind, contain};
use crate::stats::TierStats;

/// Called once with the outcome of the commit that holds the message.
pub type Ack = Box<dyn FnOnce(Result<(), StoreError>) + Send>;

/// The failure that stopped the writer, shared with the tier.
pub(crate) type Failure = Arc<Mutex<Option<StoreError>>>;

pub(crate) fn failure(f: &Failure) -> Option<StoreError> {
    f.lock()
        .unwrap_or_else(|p| p.into_inner())
        .as_ref()
        .map(StoreError::duplicate)
}

pub(crate) enum Msg {
    /// A raw block to encode and store.
    Encode {
        identity: BlockIdentity,
        tokens: Vec<u32>,
        data: Vec<u8>,
        encoding: Encoding,
    },
    /// An encoded block to store.
    Put {
        hash: BlockHash,
        encoded: Vec<u8>,
    },
    Touch(BlockHash),
    Remove(BlockHash),
    Model {
        fingerprint: [u8; 32],
        desc: String,
    },
    /// A session record; its charge is already reserved in the index (`prev`: the charge of the
    /// record it replaces, restored if the commit fails).
    Session {
        ns: u64,
        name: String,
        record: Vec<u8>,
        prev: Option<u64>,
        ack: Ack,
    },
    /// A host record (replaces the one saved under `key` of the hot table).
    Hot {
        key: &'static str,
        record: Vec<u8>,
        ack: Ack,
    },
    Flush(Ack),
}

impl Msg {
    /// Bytes this message holds in the queue (block data only).
    pub fn queued_bytes(&self) -> u64 {
        match self {
            Msg::Encode { data, .. } => data.len() as u64,
            Msg::Put { encoded, .. } => encoded.len() as u64,
            Msg::Session { record, .. } | Msg::Hot { record, .. } => record.len() as u64,
            _ => 0,
        }
    }

    fn is_block(&self) -> bool {
        matches!(self, Msg::Encode { .. } | Msg::Put { .. })
    }
}

/// A message with its acknowledgement taken out (acks are kept outside the transaction).
enum Op {
    Block(Msg),
    Save {
        ns: u64,
        name: String,
        record: Vec<u8>,
    },
    Hot(&'static str, Vec<u8>),
}

/// Blocks a transaction wrote (forgotten again if it fails).
#[derive(Default)]
struct Written {
    hashes: Vec<BlockHash>,
    bytes: u64,
}

pub(crate) struct Writer {
    pub db: Arc<DbSlot>,
    pub path: PathBuf,
    pub index: Arc<Mutex<DiskIndex>>,
    pub stats: Arc<TierStats>,
    pub failed: Failure,
    pub budget: u64,
    pub max_batch: usize,
    /// The longest cache blocks stay committed without fsync.
    pub sync_interval: Duration,
    /// When the last durable commit returned.
    pub last_durable: Cell<Instant>,
    /// Blocks committed without fsync since then (forgotten too if a later commit fails:
    /// the file may have lost them).
    pub undurable: RefCell<Vec<BlockHash>>,
    /// Charged bytes of cache blocks written, evicted or removed since the last durable commit.
    pub churn: Cell<u64>,
    /// Bytes the cache blocks' target is lowered by, learned when the file passed its limit.
    pub trim: Cell<u64>,
    /// The file's size after the last attempt to bring it back within its limit that fell
    /// short (0: none): the next attempt waits until the file grows past it.
    pub settled: Cell<u64>,
    /// Move a damaged file aside and go on with an empty one (`--store-recover`).
    pub recover: bool,
}

impl Writer {
    fn index(&self) -> MutexGuard<'_, DiskIndex> {
        self.index.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs until every sender is gone and the queue is empty; while stopped by a disk
    /// failure, wakes up on `resume`'s schedule to try writing again.
    pub fn run(self, rx: Receiver<Msg>, mut resume: Resumer) {
        let max_bytes = batch_bytes(self.budget);
        self.publish();
        loop {
            let first = if failure(&self.failed).is_some() {
                let got = rx.recv_timeout(resume.wait());
                self.try_resume(&mut resume);
                match got {
                    Ok(m) => m,
                    Err(RecvTimeoutError::Timeout) => continue,
                    Err(RecvTimeoutError::Disconnected) => break,
                }
            } else {
                match rx.recv() {
                    Ok(m) => m,
                    Err(_) => break,
                }
            };
            let mut bytes = first.queued_bytes();
            let mut batch = vec![first];
            while batch.len() < self.max_batch && bytes < max_bytes {
                match rx.try_recv() {
                    Ok(m) => {
                        bytes += m.queued_bytes();
                        batch.push(m);
                    }
                    Err(_) => break,
                }
            }
            self.process(batch);
            self.hold_file();
            self.start_fresh_if_damaged(&resume);
        }
        // Whatever was committed without fsync is made durable before the file closes.
        self.process(vec![Msg::Flush(Box::new(|_| {}))]);
    }

    pub(crate) fn process(&self, batch: Vec<Msg>) {
        let started = Instant::now();
        let mut acks = Vec::new();
        let mut ops = Vec::with_capacity(batch.len());
        let mut saved = Vec::new();
        for m in batch {
            if m.is_block() {
                self.stats.queue_blocks.fetch_sub(1, Relaxed);
                self.stats.queue_bytes.fetch_sub(m.queued_bytes(), Relaxed);
            }
            match m {
                Msg::Flush(ack) => acks.push(ack),
                Msg::Session {
                    ns,
                    name,
                    record,
                    prev,
                    ack,
                } => {
                    acks.push(ack);
                    saved.push(((ns, name.clone()), prev));
                    ops.push(Op::Save { ns, name, record });
                }
                Msg::Hot { key, record, ack } => {
                    acks.push(ack);
                    ops.push(Op::Hot(key, record));
                }
                m => ops.push(Op::Block(m)),
            }
        }
        let mut written = Written::default();
        let asked = !acks.is_empty() || self.last_durable.get().elapsed() >= self.sync_interval;
        let db = self.db.get();
        // Whether the commit was durable.
        let result: Result<bool, StoreError> = match (failure(&self.failed), db) {
            (Some(f), _) => {
                self.drop_ops(&ops);
                Err(f)
            }
            (None, None) => {
                self.drop_ops(&ops);
                Err(StoreError::Reopening)
            }
            (None, Some(db)) => contain("write", || {
                let mut txn = LeakOnUnwind::new(db.begin_write().db("begin write")?);
                self.apply(&txn, ops, &mut written)?;
                // Past a batch of churn, the pages it freed are made reusable.
                let durable = asked || self.churn.get() >= batch_bytes(self.budget);
                if !durable {
                    txn.set_durability(Durability::None).db("set durability")?;
                }
                txn.into_inner().commit().db("commit")?;
                Ok(durable)
            }),
        };
        let micros = started.elapsed().as_micros() as u64;
        match &result {
            Ok(durable) => {
                TierStats::add(&self.stats.commits, 1);
                if *durable {
                    TierStats::add(&self.stats.durable_commits, 1);
                    self.last_durable.set(Instant::now());
                    self.undurable.borrow_mut().clear();
                    self.churn.set(0);
                } else {
                    self.undurable.borrow_mut().extend(&written.hashes);
                }
                TierStats::add(&self.stats.puts, written.hashes.len() as u64);
                TierStats::add(&self.stats.bytes_written, written.bytes);
                TierStats::add(&self.stats.write_micros, micros);
            }
            Err(e) => {
                // After a disk failure the file goes back to its last durable commit.
                let lost = if e.is_disk_failure() || e.is_damaged() {
                    self.undurable.take()
                } else {
                    Vec::new()
                };
                let dropped = written.hashes.len().saturating_add(lost.len());
                TierStats::add(&self.stats.dropped, dropped as u64);
                self.fail(e);
                let mut ix = self.index();
                for h in written.hashes.iter().chain(lost.iter()) {
                    ix.remove(h);
                }
                for (key, prev) in saved {
                    ix.set_save(key, prev);
                }
            }
        }
        self.publish();
        for ack in acks {
            ack(match &result {
                Ok(_) => Ok(()),
                Err(e) => Err(e.duplicate()),
            });
        }
    }

    /// Records the failure that stops the writer (the first one), and says so once.
    pub(crate) fn fail(&self, e: &StoreError) {
        if !(e.is_disk_failure() || e.is_damaged()) {
            TierStats::add(&self.stats.write_errors, 1);
            return;
        }
        TierStats::add(&self.stats.write_errors, 1);
        let mut f = self.failed.lock().unwrap_or_else(|p| p.into_inner());
        if f.is_none() {
            let recover = if !e.is_damaged() {
                ""
            } else if self.recover {
                " (--store-recover: moving it aside)"
            } else {
                "; or restart `memoria serve` with --store-recover to move it aside and write to \
                 an empty store"
            };
            eprintln!(
                "memoria: the store {} stopped writing: {e}{recover}",
                self.path.display()
            );
            *f = Some(e.duplicate());
        }
    }

    /// Forgets the blocks of a batch that will not be written (after a failure).
    fn drop_ops(&self, ops: &[Op]) {
        let mut ix = self.index();
        for op in ops {
            let hash = match op {
                Op::Block(Msg::Encode { identity, .. }) => identity.hash,
                Op::Block(Msg::Put { hash, .. }) => *hash,
                _ => continue,
            };
            ix.dequeue(&hash);
            TierStats::add(&self.stats.dropped, 1);
        }
    }

    fn apply(
        &self,
        txn: &WriteTransaction,
        ops: Vec<Op>,
        written: &mut Written,
    ) -> Result<(), StoreError> {
        let mut blocks = LeakOnUnwind::new(txn.open_table(BLOCKS).db("open blocks")?);
        let mut bix = LeakOnUnwind::new(txn.open_table(BLOCK_INDEX).db("open block_index")?);
        let mut sessions = LeakOnUnwind::new(txn.open_table(SESSIONS).db("open sessions")?);
        let mut models = LeakOnUnwind::new(txn.open_table(MODELS).db("open models")?);
        let mut meta = LeakOnUnwind::new(txn.open_table(META).db("open meta")?);
        let mut hot = LeakOnUnwind::new(txn.open_table(HOT).db("open hot")?);
        for op in ops {
            let m = match op {
                Op::Hot(key, record) => {
                    hot.insert(key, record.as_slice()).db("write host record")?;
                    continue;
                }
                Op::Save { ns, name, record } => {
                    sessions
                        .insert((ns, name.as_str()), record.as_slice())
                        .db("write session")?;
                    continue;
                }
                Op::Block(m) => m,
            };
            let (hash, encoded) = match m {
                Msg::Encode {
                    identity,
                    tokens,
                    data,
                    encoding,
                } => match codec::encode(&identity, &tokens, &data, encoding) {
                    Ok(e) => (identity.hash, e),
                    Err(_) => {
                        self.index().dequeue(&identity.hash);
                        TierStats::add(&self.stats.dropped, 1);
                        continue;
                    }
                },
                Msg::Put { hash, encoded } => (hash, encoded),
                Msg::Touch(h) => {
                    let touched = self.index().touch(&h);
                    if let Some((stamp, len)) = touched {
                        bix.insert(h.0, (len, stamp)).db("touch block")?;
                    }
                    continue;
                }
                Msg::Remove(h) => {
                    if let Some(v) = blocks.remove(h.0).db("remove block")? {
                        self.add_churn(v.value().len() as u64);
                    }
                    bix.remove(h.0).db("remove block index")?;
                    self.index().remove(&h);
                    continue;
                }
                Msg::Model { fingerprint, desc } => {
                    if models.get(fingerprint).db("read models")?.is_none() {
                        models
                            .insert(fingerprint, desc.as_str())
                            .db("write models")?;
                    }
                    continue;
                }
                Msg::Session { .. } | Msg::Hot { .. } | Msg::Flush(_) => continue,
            };
            let len = encoded.len() as u64;
            let target = self.block_target(self.index().saves_charged);
            if charge(len) > target {
                self.index().dequeue(&hash);
                TierStats::add(&self.stats.dropped, 1);
                continue;
            }
            blocks
                .insert(hash.0, encoded.as_slice())
                .db("write block")?;
            let stamp = self.index().insert(hash, len, 0);
            bix.insert(hash.0, (len, stamp)).db("write block index")?;
            written.hashes.push(hash);
            written.bytes += len;
            self.add_churn(len);
        }
        loop {
            let victim = {
                let ix = self.index();
                if ix.charged <= self.block_target(ix.saves_charged) {
                    break;
                }
                ix.oldest()
            };
            let Some(h) = victim else { break };
            if let Some(v) = blocks.remove(h.0).db("evict block")? {
                self.add_churn(v.value().len() as u64);
            }
            bix.remove(h.0).db("evict block index")?;
            self.index().remove(&h);
            TierStats::add(&self.stats.evictions, 1);
        }
        let clock = self.index().clock;
        meta.insert(CLOCK_KEY, clock).db("write clock")?;
        Ok(())
    }

    /// Charged bytes cache blocks may hold with `saves` bytes of saves: the budget's share, at
    /// most what fits in the file when its next growth would pass the limit (redb doubles a
    /// file it grows), lowered by what the file taught (`trim`).
    pub(crate) fn block_target(&self, saves: u64) -> u64 {
        let mut t = block_target(self.budget, saves);
        let file = self.stats.file_bytes.load(Relaxed);
        if self.budget >= MIN_BUDGET && next_growth(file) > file_limit(self.budget) {
            t = t.min(room_in_file(file, self.budget, saves));
        }
        t.saturating_sub(self.trim.get())
    }

    fn add_churn(&self, len: u64) {
        self.churn.set(self.churn.get().saturating_add(charge(len)));
    }

    pub(crate) fn publish(&self) {
        {
            let ix = self.index();
            self.stats.blocks.store(ix.len() as u64, Relaxed);
            self.stats.bytes.store(ix.bytes, Relaxed);
            self.stats.charged_bytes.store(ix.charged, Relaxed);
            self.stats.saves_bytes.store(ix.saves_charged, Relaxed);
        }
        if let Ok(m) = std::fs::metadata(&self.path) {
            self.stats.file_bytes.store(m.len(), Relaxed);
        }
    }
}
