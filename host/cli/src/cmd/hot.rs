//! Hot prefixes across restarts (`[cache] auto_pin` with `--store`): the chains the pool keeps
//! pinned are saved in the store whenever the pinned set changes (polled off the engine thread,
//! encoded and written by the store's writer) and at the shutdown signal; at start-up, before
//! the server accepts a request, the saved ones are re-warmed through the warm path (blocks
//! from the tiers when present, computed otherwise) and pinned again with their counts.
//! Invariants: a namespace is saved by its configured name, never its salt; a record for
//! another model or K/V layout, or for a namespace that no longer exists, is dropped with a
//! logged reason; a damaged record is refused, logged, and never stops the host.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use memoria_http::AppState;
use memoria_kv::{KvElem, ModelFingerprint};
use memoria_sched::EngineHandle;
use memoria_store::{
    HotEntry, HotRecord, MAX_HOT_ENTRIES, MAX_HOT_NAME, MAX_HOT_TOKENS, StoreSnapshot, TierStack,
};

/// How often the saver looks for a change of the pinned set.
const POLL: Duration = Duration::from_secs(1);

/// What saving and re-warming need.
pub(super) struct HotKeeper {
    pub engine: EngineHandle,
    pub state: Arc<AppState>,
    pub store: Arc<TierStack>,
    pub model: ModelFingerprint,
    pub elem: KvElem,
    pub block_tokens: usize,
}

/// Blocks served by each tier between two snapshots.
fn tier_hits(before: &StoreSnapshot, after: &StoreSnapshot) -> (u64, u64, u64) {
    let remote = |s: &StoreSnapshot| s.remote.map_or(0, |r| r.hits);
    (
        after.cold.hits.saturating_sub(before.cold.hits),
        after.redb.hits.saturating_sub(before.redb.hits),
        remote(after).saturating_sub(remote(before)),
    )
}

impl HotKeeper {
    /// Re-warms the saved hot prefixes and logs what came back, from where.
    pub async fn rewarm(&self) {
        let rec = match self.store.load_hot() {
            Ok(Some(r)) => r,
            Ok(None) => return,
            Err(e) => {
                eprintln!("memoria: the saved hot prefixes were refused ({e}); not re-warmed");
                return;
            }
        };
        if rec.model != self.model || rec.elem != self.elem || rec.block_tokens != self.block_tokens
        {
            eprintln!(
                "memoria: the saved hot prefixes are for another model or K/V layout; not re-warmed"
            );
            return;
        }
        let before = self.store.snapshot();
        let tenants = self.state.tenants();
        let (mut n, mut blocks, mut cached) = (0usize, 0usize, 0usize);
        for e in rec.entries {
            let Some(ns) = tenants.get(&e.namespace) else {
                eprintln!(
                    "memoria: a saved hot prefix of namespace {:?} dropped: no such namespace",
                    e.namespace
                );
                continue;
            };
            let len = e.tokens.len();
            match self.engine.rewarm(ns.id, e.tokens, e.count).await {
                Ok(info) => {
                    n += 1;
                    blocks = blocks.saturating_add(len / self.block_tokens);
                    cached = cached.saturating_add(info.cached_tokens / self.block_tokens);
                }
                Err(err) => eprintln!(
                    "memoria: a saved hot prefix of namespace {} dropped: {err}",
                    ns.name
                ),
            }
        }
        let (cold, disk, remote) = tier_hits(&before, &self.store.snapshot());
        let from_tiers =
            usize::try_from(cold.saturating_add(disk).saturating_add(remote)).unwrap_or(usize::MAX);
        eprintln!(
            "memoria: re-warmed {n} hot prefixes ({blocks} blocks: {disk} from disk, {cold} from \
             cold RAM, {remote} from the remote tier, {} already in RAM, {} computed); {} blocks \
             auto-pinned",
            cached.saturating_sub(from_tiers),
            blocks.saturating_sub(cached.max(from_tiers)),
            self.engine.pool_stats().auto_pinned_blocks.load(Relaxed)
        );
    }

    /// The pinned chains as a record (namespaces by name; unknown ones left out).
    async fn record(&self) -> Option<HotRecord> {
        let chains = self.engine.hot_prefixes(MAX_HOT_TOKENS).await.ok()?;
        let tenants = self.state.tenants();
        let entries = chains
            .into_iter()
            .filter_map(|c| {
                let ns = tenants.iter().find(|n| n.id == c.ns)?;
                (ns.name.len() <= MAX_HOT_NAME).then(|| HotEntry {
                    namespace: ns.name.clone(),
                    tokens: c.tokens,
                    count: c.count,
                })
            })
            .take(MAX_HOT_ENTRIES)
            .collect();
        Some(HotRecord {
            model: self.model,
            elem: self.elem,
            block_tokens: self.block_tokens,
            entries,
        })
    }

    /// Saves the pinned chains now; waits for the commit.
    pub async fn save(&self) {
        let Some(rec) = self.record().await else {
            return;
        };
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.store.save_hot(
            &rec,
            Box::new(move |r| {
                let _ = tx.send(r);
            }),
        );
        if let Ok(Err(e)) = rx.await {
            eprintln!("memoria: the hot prefixes were not saved: {e}");
        }
    }

    /// Saves whenever the pinned set changed since the last look (runs until the runtime
    /// stops).
    pub fn spawn_saver(self: Arc<Self>) {
        let changes = |k: &HotKeeper| k.engine.pool_stats().auto_pin_changes.load(Relaxed);
        let mut seen = changes(&self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(POLL).await;
                let now = changes(&self);
                if now != seen {
                    seen = now;
                    self.save().await;
                }
            }
        });
    }
}
