//! The tier stack below the hot pool: cold RAM, then redb. It is the pool's [`TierSink`]
//! (demote: hot -> cold RAM -> redb) and, per request, its [`TierSource`] (promote: cold RAM,
//! then redb). Invariants: a block reaches the caller only after the codec verified its
//! checksum and identity against the request (model, K/V type, layout, namespace root, hash,
//! tokens); a value that fails is removed from its tier and counted, and the read is a miss;
//! blocks that were served lossily are never written to disk as if exact. Once watched
//! ([`TierStack::watch_residency`]), every block the pool evicts and every block the cold and
//! disk tiers store or remove is recorded in a [`Residency`] journal (host events).

use std::collections::HashSet;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use memoria_kv::{
    BlockHash, KvLayout, LostTier, ModelFingerprint, NamespaceId, Namespaces, SourceMiss, TierSink,
    TierSource,
};

use crate::codec::{self, BlockIdentity, Encoding, Expect};
use crate::cold::ColdTier;
use crate::demote_queue::Pending;
use crate::disk::{Ack, RedbTier};
use crate::error::StoreError;
use crate::intake::Intake;
use crate::options::StoreOptions;
use crate::residency::Residency;
use crate::session::SessionRecord;
use crate::stack_remote::RemoteLink;
use crate::stats::{StoreSnapshot, TierStats};
use crate::tier::Tier;

/// Where a fetched block came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fetched {
    /// The tier that served it: cold RAM, disk or remote.
    pub tier: LostTier,
    /// The block was stored lossily: its values are close to, not equal to, the original.
    pub lossy: bool,
}

/// Cold RAM and redb tiers, shared by the engine thread and the store's writer.
pub struct TierStack {
    cold: Option<ColdTier>,
    disk: Option<RedbTier>,
    cold_encoding: Encoding,
    /// The host's namespace registry (the engine registers it; demoted blocks carry the salt
    /// looked up here by namespace id).
    namespaces: Arc<Namespaces>,
    lossy_served: Mutex<HashSet<BlockHash>>,
    /// Evicted blocks on their way to the cold tier (see `demote_queue`).
    pending: Pending,
    pub(crate) remote: Option<RemoteLink>,
    /// Told where blocks are held (host events), once watched.
    residency: OnceLock<Arc<Residency>>,
    /// The engines' hand-offs (see `intake`), drained by [`TierStack::flush`].
    intakes: Mutex<Vec<std::sync::Weak<Intake>>>,
}

impl std::fmt::Debug for TierStack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TierStack")
            .field("cold", &self.cold)
            .field("disk", &self.disk)
            .finish_non_exhaustive()
    }
}

/// Two handles are equal when they are the same stack.
impl PartialEq for TierStack {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    crate::sync::lock(m)
}

/// What one tier said about a block (see [`TierStack::trace`]).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Look {
    Absent,
    /// Verified and decoded into the caller's buffer, in this encoding.
    Hit(Encoding),
    /// A stored value failed verification: corrupt, or another model's or namespace's.
    Bad {
        corrupt: bool,
    },
}

/// A fetch's reads, tier by tier (`None`: not looked at).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Trace {
    cold: Option<Look>,
    pending: bool,
    disk: Option<Look>,
}

/// Reads and verifies `expect`'s block from `tier` into `out`; no effects.
fn look(tier: &dyn Tier, expect: &Expect<'_>, out: &mut [u8]) -> Look {
    let mut decoded = None;
    tier.get_with(&expect.hash, &mut |bytes| {
        decoded = Some(codec::decode_into(bytes, expect, out));
    });
    match decoded {
        None => Look::Absent,
        Some(Ok(enc)) => Look::Hit(enc),
        Some(Err(e)) => Look::Bad {
            corrupt: e.is_corrupt(),
        },
    }
}

/// The miss to report of two: a removed corrupt value outranks absence (the disk's outranks
/// the cold tier's, as it is looked at later).
fn worse(a: SourceMiss, b: SourceMiss) -> SourceMiss {
    match b {
        SourceMiss::Corrupt(_) => b,
        SourceMiss::Absent => a,
    }
}

impl TierStack {
    /// A stack with a cold RAM tier (per `opts`) over the redb store in `dir` (created if
    /// missing).
    pub fn open(dir: &Path, opts: StoreOptions) -> Result<TierStack, StoreError> {
        let disk = RedbTier::open(dir, opts.disk)?;
        Ok(Self::build(opts, Some(disk)))
    }

    /// A stack with the cold RAM tier only (nothing persists).
    pub fn in_memory(opts: StoreOptions) -> TierStack {
        Self::build(opts, None)
    }

    fn build(opts: StoreOptions, disk: Option<RedbTier>) -> TierStack {
        let cold = (opts.cold_budget_bytes > 0).then(|| ColdTier::new(opts.cold_budget_bytes));
        TierStack {
            cold,
            disk,
            cold_encoding: opts.cold_lossy.map_or(Encoding::Lz4, |l| l.encoding()),
            namespaces: Arc::default(),
            lossy_served: Mutex::new(HashSet::new()),
            pending: Pending::default(),
            remote: None,
            residency: OnceLock::new(),
            intakes: Mutex::new(Vec::new()),
        }
    }

    /// Reports from now on every block the hot pool evicts and every block the cold and disk
    /// tiers store or remove to `r` (the first watcher stays).
    pub fn watch_residency(&self, r: Arc<Residency>) {
        if self.residency.set(r.clone()).is_err() {
            return;
        }
        if let Some(c) = &self.cold {
            c.watch(r.clone());
        }
        if let Some(d) = &self.disk {
            d.watch(r);
        }
    }

    /// The journal blocks' moves are told to, once watched.
    pub(crate) fn residency(&self) -> Option<&Arc<Residency>> {
        self.residency.get()
    }

    /// The hand-off an engine running `model` with `layout` gives its blocks and saves to
    /// (and its pool's sink): everything the store does for it happens off its thread.
    pub fn intake(self: &Arc<Self>, model: ModelFingerprint, layout: KvLayout) -> Arc<Intake> {
        let i = Intake::start(self, model, layout);
        if let Some(r) = self.remote() {
            r.feed_from(&i);
        }
        let mut g = lock(&self.intakes);
        g.retain(|w| w.strong_count() > 0);
        g.push(Arc::downgrade(&i));
        i
    }

    /// The tier evicted blocks end up in, for miss reasons.
    pub fn keeps(&self) -> Option<LostTier> {
        if self.cold.is_some() {
            Some(LostTier::Cold)
        } else if self.disk.is_some() {
            Some(LostTier::Disk)
        } else {
            self.remote.as_ref().map(|_| LostTier::Remote)
        }
    }

    /// The cold RAM tier, if enabled.
    pub fn cold(&self) -> Option<&ColdTier> {
        self.cold.as_ref()
    }

    /// The redb tier, if the stack was opened on a directory.
    pub fn disk(&self) -> Option<&RedbTier> {
        self.disk.as_ref()
    }

    /// Figures of every tier.
    pub fn snapshot(&self) -> StoreSnapshot {
        StoreSnapshot {
            cold: self
                .cold
                .as_ref()
                .map(|c| c.stats().snapshot())
                .unwrap_or_default(),
            redb: self
                .disk
                .as_ref()
                .map(|d| d.stats().snapshot())
                .unwrap_or_default(),
            cold_lossy: self.cold_encoding.is_lossy(),
            remote: self.remote().map(|r| r.snapshot()),
        }
    }

    /// The namespace registry this stack reads salts and labels from (the engine started on
    /// the stack registers its namespaces here).
    pub fn namespaces(&self) -> &Arc<Namespaces> {
        &self.namespaces
    }

    /// Records a model in the store's `models` table.
    pub fn register_model(&self, model: &ModelFingerprint, layout: &KvLayout) {
        if let Some(d) = &self.disk {
            let desc = format!(
                "n_layer={} kv_dim={} elem={} block={}",
                layout.n_layer,
                layout.kv_dim,
                layout.elem.name(),
                layout.block_tokens
            );
            d.register_model(model.0, desc);
        }
    }

    pub(crate) fn pending(&self) -> &Pending {
        &self.pending
    }

    pub(crate) fn cold_holds(&self, hash: &BlockHash) -> bool {
        self.cold.as_ref().is_some_and(|c| c.contains(hash))
    }

    fn was_lossy(&self, hash: &BlockHash) -> bool {
        lock(&self.lossy_served).contains(hash)
    }

    /// Writes a freshly sealed block through to disk and offers it to the remote tier, behind
    /// the caller (one copy of `data` on the caller's thread per tier). `force` ignores the
    /// disk write queue's byte bound (explicit saves). Returns whether disk queued it.
    pub fn persist(
        &self,
        identity: BlockIdentity,
        tokens: &[u32],
        data: &[u8],
        force: bool,
    ) -> bool {
        self.remote_offer(identity, tokens, data);
        self.persist_disk(identity, tokens, data, force)
    }

    fn persist_disk(
        &self,
        identity: BlockIdentity,
        tokens: &[u32],
        data: &[u8],
        force: bool,
    ) -> bool {
        match &self.disk {
            Some(d) if !self.was_lossy(&identity.hash) => d.put_raw(identity, tokens, data, force),
            _ => false,
        }
    }

    /// Takes a block evicted from the hot pool: into the cold tier (whose own evictions spill
    /// to disk when not there yet), or straight to disk without a cold tier. A block no local
    /// tier keeps has left this host: the remote tier stops taking it to be held here.
    pub fn demote(&self, identity: BlockIdentity, tokens: &[u32], data: &[u8]) {
        let hash = identity.hash;
        self.remote_offer(identity, tokens, data);
        let Some(cold) = &self.cold else {
            self.persist_disk(identity, tokens, data, false);
            // Held or queued on disk keeps it here; otherwise it is gone from this host.
            if !self.disk.as_ref().is_some_and(|d| d.contains(&hash)) {
                self.remote_left(&hash);
            }
            return;
        };
        if cold.contains(&hash) {
            return;
        }
        let encoded = match codec::encode(&identity, tokens, data, self.cold_encoding) {
            Ok(e) => e,
            Err(_) => {
                TierStats::add(&cold.stats().dropped, 1);
                return;
            }
        };
        if self.cold_encoding.is_lossy() {
            self.persist_disk(identity, tokens, data, false);
        }
        for (h, enc) in cold.put_evicting(&hash, encoded) {
            let lossy = codec::parse_header(&enc).is_ok_and(|hd| hd.encoding.is_lossy());
            match &self.disk {
                Some(d) if d.contains(&h) => {}
                Some(d) if !lossy && !self.was_lossy(&h) => d.put(&h, enc),
                _ => self.remote_left(&h),
            }
        }
    }

    /// Looks for a block in the cold tier, then on disk, then among the blocks a remote
    /// prefetch staged (no network here); verifies it against `expect` and decodes it into
    /// `out`. A value that fails verification is removed and counted.
    pub fn fetch(&self, expect: &Expect<'_>, out: &mut [u8]) -> Option<Fetched> {
        self.fetch_checked(expect, out).ok()
    }

    /// [`TierStack::fetch`], telling a miss for a value that failed verification (removed)
    /// apart from absence.
    pub fn fetch_checked(
        &self,
        expect: &Expect<'_>,
        out: &mut [u8],
    ) -> Result<Fetched, SourceMiss> {
        let trace = self.trace(expect, out);
        self.settle(&trace, expect, out)
    }

    /// The reads of a fetch, without their effects (no counter, no removal, nothing taken):
    /// what the demotion hand-off, the cold tier and the disk each said, in that order,
    /// stopping at the first that served the block into `out`. Safe to run for many blocks
    /// at once; [`TierStack::settle`] then applies each in order.
    pub(crate) fn trace(&self, expect: &Expect<'_>, out: &mut [u8]) -> Trace {
        let mut t = Trace::default();
        // The hand-off before the cold tier: the demotion thread puts a block in the cold tier
        // before it leaves the hand-off, so looking in this order never misses one in between.
        if self.pending.fetch(expect, out) {
            t.pending = true;
            return t;
        }
        if let Some(c) = &self.cold {
            let l = look(c, expect, out);
            let hit = matches!(l, Look::Hit(_));
            t.cold = Some(l);
            if hit {
                return t;
            }
        }
        if let Some(d) = &self.disk {
            t.disk = Some(look(d, expect, out));
        }
        t
    }

    /// Applies a [`Trace`]'s effects (counters, removal of a bad value, the disk's recency)
    /// and, when no local tier served the block, takes it from a remote prefetch's staged
    /// blocks into `out`.
    pub(crate) fn settle(
        &self,
        t: &Trace,
        expect: &Expect<'_>,
        out: &mut [u8],
    ) -> Result<Fetched, SourceMiss> {
        let mut miss = SourceMiss::Absent;
        if let (Some(c), Some(l)) = (&self.cold, &t.cold) {
            match self.account(c, c.stats(), LostTier::Cold, expect, l) {
                Ok(f) => return Ok(f),
                Err(m) => miss = worse(miss, m),
            }
        }
        if t.pending {
            if let Some(c) = &self.cold {
                TierStats::add(&c.stats().hits, 1);
            }
            return Ok(Fetched {
                tier: LostTier::Cold,
                lossy: false,
            });
        }
        if let (Some(d), Some(l)) = (&self.disk, &t.disk) {
            match self.account(d, d.stats(), LostTier::Disk, expect, l) {
                Ok(f) => {
                    d.touch(&expect.hash);
                    return Ok(f);
                }
                Err(m) => miss = worse(miss, m),
            }
        }
        if self.remote_take(expect, out) {
            return Ok(Fetched {
                tier: LostTier::Remote,
                lossy: false,
            });
        }
        Err(miss)
    }

    /// Whether a fetch of `hash` may find it (index look-ups only, no read): the cold tier,
    /// the demotion hand-off, a committed disk value, a remote prefetch's staged blocks.
    pub(crate) fn may_fetch(&self, hash: &BlockHash) -> bool {
        self.cold_holds(hash)
            || self.pending.contains(hash)
            || self.disk.as_ref().is_some_and(|d| d.on_disk(hash))
            || self.remote_staged(hash)
    }

    /// One tier's part of [`TierStack::settle`].
    fn account(
        &self,
        tier: &dyn Tier,
        stats: &TierStats,
        which: LostTier,
        expect: &Expect<'_>,
        l: &Look,
    ) -> Result<Fetched, SourceMiss> {
        match *l {
            Look::Absent => {
                TierStats::add(&stats.misses, 1);
                Err(SourceMiss::Absent)
            }
            Look::Hit(enc) => {
                TierStats::add(&stats.hits, 1);
                if enc.is_lossy() {
                    TierStats::add(&stats.lossy_hits, 1);
                    lock(&self.lossy_served).insert(expect.hash);
                }
                Ok(Fetched {
                    tier: which,
                    lossy: enc.is_lossy(),
                })
            }
            Look::Bad { corrupt } => {
                tier.remove(&expect.hash);
                let counter = if corrupt {
                    &stats.corrupt_removed
                } else {
                    &stats.foreign_removed
                };
                TierStats::add(counter, 1);
                TierStats::add(&stats.misses, 1);
                Err(if corrupt {
                    SourceMiss::Corrupt(which)
                } else {
                    SourceMiss::Absent
                })
            }
        }
    }

    /// Whether the disk tier holds `hash` now (its index, no read).
    pub fn on_disk(&self, hash: &BlockHash) -> bool {
        self.disk.as_ref().is_some_and(|d| d.on_disk(hash))
    }

    /// Waits until every evicted block has been demoted and every queued write is committed.
    pub fn flush(&self) -> Result<(), StoreError> {
        let intakes: Vec<Arc<Intake>> = lock(&self.intakes)
            .iter()
            .filter_map(std::sync::Weak::upgrade)
            .collect();
        for i in intakes {
            i.wait_handled(i.sent());
        }
        self.pending.wait_empty(std::time::Duration::from_secs(30));
        match &self.disk {
            Some(d) => d.flush(),
            None => Ok(()),
        }
    }
}

#[path = "stack_pool.rs"]
mod pool;
#[path = "stack_records.rs"]
mod records;
#[path = "stack_stage.rs"]
mod stage;
#[path = "stack_tail.rs"]
mod tail;
pub use pool::StoreSource;

#[cfg(test)]
#[path = "stack_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "stack_hot_tests.rs"]
mod hot_tests;
