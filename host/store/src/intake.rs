//! The engine's hand-off to the store: every block the engine writes through, evicts or writes
//! again for the remote tier, every partial tail it retains, and every session it saves, reaches this thread as raw bytes and
//! a namespace id. The salt, the block's identity, the tiers' locks and queues are all dealt
//! with here, never on the engine thread. Jobs are handled in the order sent, and a reader can
//! wait until every job sent before a point is handled ([`Intake::sent`],
//! [`Intake::wait_handled`]): a block evicted before a staging request is always findable by
//! it. The queue is bounded; when it is full the engine thread does the job itself (slower,
//! nothing lost).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use memoria_kv::backing::{BlockBytes, PartialBlock};
use memoria_kv::{BlockHash, KvLayout, LostTier, ModelFingerprint, NamespaceId, TierSink};

use crate::codec::BlockIdentity;
use crate::demote_queue::{DemoteQueue, Handoff};
use crate::disk::Ack;
use crate::remote::events::Tier as EventTier;
use crate::session::SessionRecord;
use crate::stack::TierStack;

/// Jobs waiting at most this deep.
const DEPTH: usize = 1024;

/// Longest a reader waits for the jobs before its point (then it reads what is there).
const WAIT_LIMIT: Duration = Duration::from_secs(2);

/// What the engine hands over.
enum Job {
    /// A block the pool evicted, attributed to `ns`.
    Evicted { ns: NamespaceId, block: BlockBytes },
    /// A freshly sealed block to write through (`public`: keyed under the common salt;
    /// `force`: past the disk queue's bound).
    Sealed {
        ns: NamespaceId,
        public: bool,
        force: bool,
        block: BlockBytes,
    },
    /// A block the remote server lost, to write there again.
    Rewrite {
        ns: NamespaceId,
        public: bool,
        block: BlockBytes,
    },
    /// A retained partial tail of `ns`, for the disk tier.
    Tail { ns: NamespaceId, tail: PartialBlock },
    /// A session to save under `name`: its tokens and its whole blocks' chain hashes (the
    /// record, with the namespace's salt, is made here).
    Save {
        ns: NamespaceId,
        name: String,
        hashes: Vec<BlockHash>,
        tokens: Vec<u32>,
        ack: Ack,
    },
}

/// What a job needs besides itself: the stack, the engine's model and layout, and the cold
/// tier's demotion queue.
pub(crate) struct Ctx {
    pub stack: Arc<TierStack>,
    model: ModelFingerprint,
    layout: KvLayout,
    demote: Option<DemoteQueue>,
}

impl Ctx {
    pub fn new(stack: &Arc<TierStack>, model: ModelFingerprint, layout: KvLayout) -> Ctx {
        stack.register_model(&model, &layout);
        // Only the cold tier encodes on demotion; disk and remote already queue raw blocks.
        let demote = stack
            .cold()
            .is_some()
            .then(|| DemoteQueue::start(stack.clone()));
        Ctx {
            stack: stack.clone(),
            model,
            layout,
            demote,
        }
    }

    /// A block the pool evicted: recorded as leaving the hot tier, then demoted (through the
    /// cold tier's demotion queue when there is one).
    pub fn evicted(&self, ns: NamespaceId, hash: BlockHash, tokens: Vec<u32>, data: Vec<u8>) {
        handle(
            self,
            Job::Evicted {
                ns,
                block: BlockBytes { hash, tokens, data },
            },
        );
    }
}

/// The engine's end of the hand-off (one per engine build).
pub struct Intake {
    tx: Option<SyncSender<Job>>,
    thread: Option<JoinHandle<()>>,
    /// Jobs sent (by the engine thread) and handled (by the intake thread or inline).
    sent: AtomicU64,
    handled: Arc<AtomicU64>,
    /// For jobs done inline when the queue is full or the thread is gone.
    ctx: Arc<Ctx>,
}

impl std::fmt::Debug for Intake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Intake")
            .field("sent", &self.sent.load(Ordering::Relaxed))
            .field("handled", &self.handled.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Intake {
    /// Starts the hand-off thread for an engine running `model` with `layout` on `stack`.
    pub(crate) fn start(
        stack: &Arc<TierStack>,
        model: ModelFingerprint,
        layout: KvLayout,
    ) -> Arc<Intake> {
        stack.register_model(&model, &layout);
        // Only the cold tier encodes on demotion; disk and remote already queue raw blocks.
        let demote = stack
            .cold()
            .is_some()
            .then(|| DemoteQueue::start(stack.clone()));
        let ctx = Arc::new(Ctx {
            stack: stack.clone(),
            model,
            layout,
            demote,
        });
        let (tx, rx) = sync_channel(DEPTH);
        let handled = Arc::new(AtomicU64::new(0));
        let (c, h) = (ctx.clone(), handled.clone());
        let thread = std::thread::Builder::new()
            .name("memoria-intake".into())
            .spawn(move || drain(&c, &rx, &h))
            .ok();
        Arc::new(Intake {
            tx: thread.as_ref().map(|_| tx),
            thread,
            sent: AtomicU64::new(0),
            handled,
            ctx,
        })
    }

    /// Jobs sent so far: a point to wait for with [`Intake::wait_handled`].
    pub fn sent(&self) -> u64 {
        self.sent.load(Ordering::Acquire)
    }

    /// Waits (bounded) until every job sent before `point` is handled.
    pub fn wait_handled(&self, point: u64) {
        let until = Instant::now() + WAIT_LIMIT;
        while self.handled.load(Ordering::Acquire) < point && Instant::now() < until {
            std::thread::sleep(Duration::from_micros(20));
        }
    }

    fn send(&self, job: Job) {
        self.sent.fetch_add(1, Ordering::AcqRel);
        let job = match &self.tx {
            Some(tx) => match tx.try_send(job) {
                Ok(()) => return,
                Err(TrySendError::Full(j) | TrySendError::Disconnected(j)) => j,
            },
            None => job,
        };
        handle(&self.ctx, job);
        self.handled.fetch_add(1, Ordering::AcqRel);
    }

    /// Hands over a freshly sealed block of `ns` to write through.
    pub fn sealed(&self, ns: NamespaceId, public: bool, force: bool, block: BlockBytes) {
        self.send(Job::Sealed {
            ns,
            public,
            force,
            block,
        });
    }

    /// Hands over a block the remote server lost, to write there again.
    pub fn rewrite(&self, ns: NamespaceId, public: bool, block: BlockBytes) {
        self.send(Job::Rewrite { ns, public, block });
    }

    /// Hands over a retained partial tail of `ns`, kept on disk under its parent's tail key.
    pub fn tail(&self, ns: NamespaceId, tail: PartialBlock) {
        self.send(Job::Tail { ns, tail });
    }

    /// Saves a session of `ns` as `name` (its tokens and whole blocks' chain hashes; the
    /// record gets the namespace's salt here), after every block handed over before it; `ack`
    /// runs when it is durable, or with the error.
    pub fn save(
        &self,
        ns: NamespaceId,
        name: String,
        hashes: Vec<BlockHash>,
        tokens: Vec<u32>,
        ack: Ack,
    ) {
        self.send(Job::Save {
            ns,
            name,
            hashes,
            tokens,
            ack,
        });
    }

    /// The pool's sink: evicted blocks are handed over like the rest.
    pub fn sink(self: &Arc<Self>) -> Box<dyn TierSink> {
        Box::new(IntakeSink(self.clone()))
    }
}

/// Lets every job sent be handled, then stops the thread.
impl Drop for Intake {
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn drain(ctx: &Ctx, rx: &Receiver<Job>, handled: &AtomicU64) {
    memoria_kv::background::lower_this_thread();
    for job in rx {
        handle(ctx, job);
        handled.fetch_add(1, Ordering::AcqRel);
    }
}

/// Does one job: looks the salt up, identifies the block, hands it to the tiers.
fn handle(ctx: &Ctx, job: Job) {
    let stack = &ctx.stack;
    let table = stack.namespaces().snapshot();
    let salt_of = |ns: NamespaceId, public: bool| {
        if public {
            table.common_salt().or_else(|| table.salt(ns))
        } else {
            table.salt(ns)
        }
    };
    let identity = |salt, hash| BlockIdentity {
        model: ctx.model,
        layout: ctx.layout,
        salt,
        hash,
    };
    match job {
        Job::Evicted { ns, block } => {
            if let Some(r) = stack.residency() {
                r.record(block.hash, EventTier::Hot, false);
            }
            let Some(salt) = table.salt(ns) else { return };
            let h = Handoff {
                identity: identity(salt, block.hash),
                tokens: block.tokens,
                data: block.data,
            };
            match &ctx.demote {
                Some(q) => q.send(stack, h),
                None => stack.demote(h.identity, &h.tokens, &h.data),
            }
        }
        Job::Sealed {
            ns,
            public,
            force,
            block,
        } => {
            if let Some(salt) = salt_of(ns, public) {
                stack.persist(
                    identity(salt, block.hash),
                    &block.tokens,
                    &block.data,
                    force,
                );
            }
        }
        Job::Rewrite { ns, public, block } => {
            if let Some(salt) = salt_of(ns, public) {
                stack.remote_rewrite(identity(salt, block.hash), &block.tokens, &block.data);
            }
        }
        Job::Tail { ns, tail } => {
            if let Some(salt) = table.salt(ns) {
                stack.persist_tail(ctx.model, ctx.layout, salt, tail);
            }
        }
        Job::Save {
            ns,
            name,
            hashes,
            tokens,
            ack,
        } => match table.salt(ns) {
            Some(salt) => {
                let record = SessionRecord {
                    model: ctx.model,
                    elem: ctx.layout.elem,
                    block_tokens: ctx.layout.block_tokens,
                    salt,
                    hashes,
                    tokens,
                };
                stack.save_session(ns, &name, &record, ack);
            }
            None => ack(Err(crate::StoreError::UnknownNamespace(ns.0))),
        },
    }
}

/// [`TierSink`] over the hand-off.
struct IntakeSink(Arc<Intake>);

impl TierSink for IntakeSink {
    fn demote(&mut self, hash: &BlockHash, ns: NamespaceId, tokens: &[u32], data: &[u8]) {
        self.0.send(Job::Evicted {
            ns,
            block: BlockBytes {
                hash: *hash,
                tokens: tokens.to_vec(),
                data: data.to_vec(),
            },
        });
    }

    fn keeps(&self) -> Option<LostTier> {
        self.0.ctx.stack.keeps()
    }
}
