//! Demotion off the engine thread: blocks the hot pool evicts are handed, raw, to a thread that
//! encodes them (LZ4, lossy quantization, checksums) into the cold tier and spills what that
//! evicts to disk. Until it has, a fetch serves the block from the hand-off itself (verified by
//! the codec like any tier value), so an eviction never turns into a miss. The queue is bounded;
//! when it is full the engine thread encodes the block itself (slower, nothing lost).

use std::collections::HashMap;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use memoria_kv::BlockHash;

use crate::codec::{self, BlockIdentity, Encoding, Expect};
use crate::stack::TierStack;

/// Blocks waiting at most this deep in the hand-off queue.
pub(crate) const QUEUE_DEPTH: usize = 256;

/// One evicted block, as the pool held it.
pub(crate) struct Handoff {
    pub identity: BlockIdentity,
    pub tokens: Vec<u32>,
    pub data: Vec<u8>,
}

/// Blocks handed off and not yet in the cold tier, by hash.
#[derive(Default)]
pub(crate) struct Pending(Mutex<HashMap<BlockHash, Arc<Handoff>>>);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    crate::sync::lock(m)
}

impl Pending {
    pub fn contains(&self, hash: &BlockHash) -> bool {
        lock(&self.0).contains_key(hash)
    }

    fn insert(&self, h: Handoff) {
        lock(&self.0).insert(h.identity.hash, Arc::new(h));
    }

    fn get(&self, hash: &BlockHash) -> Option<Arc<Handoff>> {
        lock(&self.0).get(hash).cloned()
    }

    fn remove(&self, hash: &BlockHash) {
        lock(&self.0).remove(hash);
    }

    pub fn is_empty(&self) -> bool {
        lock(&self.0).is_empty()
    }

    /// Serves a handed-off block into `out` if it matches `expect` (the codec checks it, as
    /// for any stored value). Exact, never lossy.
    pub fn fetch(&self, expect: &Expect<'_>, out: &mut [u8]) -> bool {
        let Some(h) = self.get(&expect.hash) else {
            return false;
        };
        codec::encode(&h.identity, &h.tokens, &h.data, Encoding::Raw)
            .is_ok_and(|bytes| codec::decode_into(&bytes, expect, out).is_ok())
    }

    /// Waits (bounded) until every handed-off block has reached the cold tier.
    pub fn wait_empty(&self, limit: Duration) {
        let until = Instant::now() + limit;
        while !self.is_empty() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// The engine side of the hand-off: a bounded queue to the demotion thread.
pub(crate) struct DemoteQueue {
    tx: Option<SyncSender<BlockHash>>,
    thread: Option<JoinHandle<()>>,
}

impl DemoteQueue {
    /// Starts the demotion thread for `stack` (it ends when the queue is dropped).
    pub fn start(stack: Arc<TierStack>) -> DemoteQueue {
        let (tx, rx) = sync_channel(QUEUE_DEPTH);
        let worker = stack.clone();
        match std::thread::Builder::new()
            .name("memoria-demote".into())
            .spawn(move || {
                memoria_kv::background::lower_this_thread();
                drain(&worker, &rx)
            }) {
            Ok(thread) => DemoteQueue {
                tx: Some(tx),
                thread: Some(thread),
            },
            // No thread: every demotion runs inline, as before.
            Err(_) => DemoteQueue {
                tx: None,
                thread: None,
            },
        }
    }

    /// Hands `h` to the demotion thread, or demotes it here when the queue is full or gone.
    pub fn send(&self, stack: &TierStack, h: Handoff) {
        let hash = h.identity.hash;
        if stack.pending().contains(&hash) || stack.cold_holds(&hash) {
            return;
        }
        stack.pending().insert(h);
        let queued = match &self.tx {
            Some(tx) => match tx.try_send(hash) {
                Ok(()) => true,
                Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => false,
            },
            None => false,
        };
        if !queued {
            finish(stack, &hash);
        }
    }
}

impl Drop for DemoteQueue {
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn drain(stack: &TierStack, rx: &Receiver<BlockHash>) {
    for hash in rx {
        finish(stack, &hash);
    }
}

/// Demotes a handed-off block, then forgets it (in that order: it is always findable).
fn finish(stack: &TierStack, hash: &BlockHash) {
    if let Some(h) = stack.pending().get(hash) {
        stack.demote(h.identity, &h.tokens, &h.data);
    }
    stack.pending().remove(hash);
}
