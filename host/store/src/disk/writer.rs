//! The redb tier's write-behind thread: takes queued messages in arrival order, applies up to a
//! batch of them in one write transaction, commits (durably), then acknowledges. Invariants:
//! an acknowledgement (session save, flush) is sent only after the commit holding its message
//! and every earlier one returned; the disk budget is enforced inside the same transaction;
//! the queue gauges drop as soon as a message is taken.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use memoria_kv::BlockHash;
use redb::{Database, ReadableTable, WriteTransaction};

use super::index::DiskIndex;
use super::tables::{BLOCK_INDEX, BLOCKS, CLOCK_KEY, META, MODELS, SESSIONS};
use crate::codec::{self, BlockIdentity, Encoding};
use crate::error::{DbResult, StoreError};
use crate::stats::TierStats;

/// Called once with the outcome of the commit that holds the message.
pub type Ack = Box<dyn FnOnce(Result<(), StoreError>) + Send>;

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
    Session {
        ns: u64,
        name: String,
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
            _ => 0,
        }
    }

    fn is_block(&self) -> bool {
        matches!(self, Msg::Encode { .. } | Msg::Put { .. })
    }
}

pub(crate) struct Writer {
    pub db: Arc<Database>,
    pub index: Arc<Mutex<DiskIndex>>,
    pub stats: Arc<TierStats>,
    pub budget: u64,
    pub max_batch: usize,
}

impl Writer {
    fn index(&self) -> MutexGuard<'_, DiskIndex> {
        self.index.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs until every sender is gone and the queue is empty.
    pub fn run(self, rx: Receiver<Msg>) {
        while let Ok(first) = rx.recv() {
            let mut batch = vec![first];
            while batch.len() < self.max_batch {
                match rx.try_recv() {
                    Ok(m) => batch.push(m),
                    Err(_) => break,
                }
            }
            self.process(batch);
        }
    }

    fn process(&self, batch: Vec<Msg>) {
        let started = Instant::now();
        for m in &batch {
            if m.is_block() {
                self.stats.queue_blocks.fetch_sub(1, Relaxed);
                self.stats.queue_bytes.fetch_sub(m.queued_bytes(), Relaxed);
            }
        }
        let mut acks = Vec::new();
        let mut written = (0u64, 0u64);
        let result = self.db.begin_write().db("begin write").and_then(|txn| {
            self.apply(&txn, batch, &mut acks, &mut written)?;
            txn.commit().db("commit")
        });
        let micros = started.elapsed().as_micros() as u64;
        match &result {
            Ok(()) => {
                TierStats::add(&self.stats.commits, 1);
                TierStats::add(&self.stats.puts, written.0);
                TierStats::add(&self.stats.bytes_written, written.1);
                TierStats::add(&self.stats.write_micros, micros);
            }
            Err(_) => TierStats::add(&self.stats.dropped, written.0),
        }
        self.publish();
        for ack in acks {
            ack(match &result {
                Ok(()) => Ok(()),
                Err(e) => Err(StoreError::Db {
                    what: "commit",
                    msg: e.to_string(),
                }),
            });
        }
    }

    fn apply(
        &self,
        txn: &WriteTransaction,
        batch: Vec<Msg>,
        acks: &mut Vec<Ack>,
        written: &mut (u64, u64),
    ) -> Result<(), StoreError> {
        let mut blocks = txn.open_table(BLOCKS).db("open blocks")?;
        let mut bix = txn.open_table(BLOCK_INDEX).db("open block_index")?;
        let mut sessions = txn.open_table(SESSIONS).db("open sessions")?;
        let mut models = txn.open_table(MODELS).db("open models")?;
        let mut meta = txn.open_table(META).db("open meta")?;
        for m in batch {
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
                    blocks.remove(h.0).db("remove block")?;
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
                Msg::Session {
                    ns,
                    name,
                    record,
                    ack,
                } => {
                    sessions
                        .insert((ns, name.as_str()), record.as_slice())
                        .db("write session")?;
                    acks.push(ack);
                    continue;
                }
                Msg::Flush(ack) => {
                    acks.push(ack);
                    continue;
                }
            };
            let len = encoded.len() as u64;
            if len > self.budget {
                self.index().dequeue(&hash);
                TierStats::add(&self.stats.dropped, 1);
                continue;
            }
            blocks
                .insert(hash.0, encoded.as_slice())
                .db("write block")?;
            let stamp = self.index().insert(hash, len, 0);
            bix.insert(hash.0, (len, stamp)).db("write block index")?;
            written.0 += 1;
            written.1 += len;
        }
        loop {
            let victim = {
                let ix = self.index();
                if ix.bytes <= self.budget {
                    break;
                }
                ix.oldest()
            };
            let Some(h) = victim else { break };
            blocks.remove(h.0).db("evict block")?;
            bix.remove(h.0).db("evict block index")?;
            self.index().remove(&h);
            TierStats::add(&self.stats.evictions, 1);
        }
        let clock = self.index().clock;
        meta.insert(CLOCK_KEY, clock).db("write clock")?;
        Ok(())
    }

    fn publish(&self) {
        let ix = self.index();
        self.stats.blocks.store(ix.len() as u64, Relaxed);
        self.stats.bytes.store(ix.bytes, Relaxed);
    }
}
