//! The routing keys of what this host holds on disk, across restarts: the events task saves
//! them in the store (`memoria_store::routes`, host-internal) every [`SAVE_EVERY`] while they
//! change and at the shutdown signal; at start-up, behind the new epoch's `cleared`, the blocks
//! of the saved record the disk still holds are announced `stored` on disk again, so a router
//! sends their prefixes here before any request touched them. A record of another model or
//! K/V layout is ignored (a routing key does not name the model); a damaged one is logged and
//! ignored. Loading, encoding and writing run on the blocking pool, never on a runtime worker.

use std::sync::Arc;
use std::time::Duration;

use memoria_kv::{KvElem, ModelFingerprint};
use memoria_store::{RoutesRecord, StoreError, TierStack};
use tokio::sync::oneshot;

use super::held::{Announce, Held};

/// How often the routing keys are saved while they change.
pub const SAVE_EVERY: Duration = Duration::from_secs(30);

/// The engine the routing keys are for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeysFor {
    pub model: ModelFingerprint,
    pub elem: KvElem,
    pub block_tokens: usize,
}

impl KeysFor {
    fn matches(&self, r: &RoutesRecord) -> bool {
        r.model == self.model && r.elem == self.elem && r.block_tokens == self.block_tokens
    }
}

/// Announces the saved blocks the disk still holds (on `held`, into `out`); returns how many.
pub async fn restore(
    store: &Arc<TierStack>,
    keys_for: KeysFor,
    held: &mut Held,
    out: &mut Announce,
) -> usize {
    let s = store.clone();
    let loaded = tokio::task::spawn_blocking(move || {
        let record = s.load_routes()?;
        Ok::<_, StoreError>(record.filter(|r| keys_for.matches(r)).map(|r| {
            r.entries
                .into_iter()
                .filter(|e| s.on_disk(&e.block))
                .collect::<Vec<_>>()
        }))
    })
    .await;
    let entries = match loaded {
        Ok(Ok(Some(entries))) => entries,
        Ok(Ok(None)) | Err(_) => return 0,
        Ok(Err(e)) => {
            eprintln!("memoria: the saved routing keys were refused ({e}); not announced");
            return 0;
        }
    };
    for e in &entries {
        held.restore(e.block, &e.routes, out);
    }
    entries.len()
}

/// Saves what `held` holds on disk; the receiver gets the commit's outcome.
pub fn save(
    store: &Arc<TierStack>,
    keys_for: KeysFor,
    held: &Held,
) -> oneshot::Receiver<Result<(), StoreError>> {
    let record = RoutesRecord {
        model: keys_for.model,
        elem: keys_for.elem,
        block_tokens: keys_for.block_tokens,
        entries: held.on_disk(),
    };
    let (tx, rx) = oneshot::channel();
    let s = store.clone();
    tokio::task::spawn_blocking(move || {
        s.save_routes(
            &record,
            Box::new(move |r| {
                let _ = tx.send(r);
            }),
        )
    });
    rx
}
