//! Remote-tier reads on the callers' side of the engine: before a fresh session's first
//! tokens (or a warm) reach the engine thread, the caller's task awaits one batched lookup of
//! the prompt's chain in the remote tier (`TierStack::prefetch_remote`), which stages verified
//! blocks that the engine's prefix match then copies in. So the engine thread never waits on
//! the network, and other sessions keep decoding meanwhile. Invariant: only sessions opened
//! through this handle and not yet given tokens are prefetched (their context starts at the
//! chain's root); with no remote tier every method is a no-op.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use memoria_kv::{KvLayout, ModelFingerprint, NamespaceSalt};
use memoria_store::TierStack;

use crate::session::SessionId;

/// Most fresh sessions remembered (a session opened and never given tokens is forgotten
/// oldest-first past this; it then computes without a prefetch).
const MAX_FRESH: usize = 4096;

pub(crate) struct RemoteReads {
    stack: Option<Arc<TierStack>>,
    model: ModelFingerprint,
    layout: KvLayout,
    fresh: Mutex<HashMap<SessionId, NamespaceSalt>>,
}

impl RemoteReads {
    pub fn new(stack: Option<Arc<TierStack>>, model: ModelFingerprint, layout: KvLayout) -> Self {
        RemoteReads {
            stack: stack.filter(|s| s.remote().is_some()),
            model,
            layout,
            fresh: Mutex::new(HashMap::new()),
        }
    }

    fn fresh(&self) -> MutexGuard<'_, HashMap<SessionId, NamespaceSalt>> {
        self.fresh.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn opened(&self, id: SessionId, salt: NamespaceSalt) {
        if self.stack.is_some() {
            let mut g = self.fresh();
            if g.len() >= MAX_FRESH
                && let Some(old) = g.keys().min().copied()
            {
                g.remove(&old);
            }
            g.insert(id, salt);
        }
    }

    pub fn closed(&self, id: SessionId) {
        if self.stack.is_some() {
            self.fresh().remove(&id);
        }
    }

    /// Prefetches `tokens` if `id` is a fresh session (once).
    pub async fn before_append(&self, id: SessionId, tokens: &[u32]) {
        let salt = self.fresh().remove(&id);
        if let Some(salt) = salt {
            self.prefetch(salt, tokens).await;
        }
    }

    /// Prefetches a context that starts at the chain's root.
    pub async fn prefetch(&self, salt: NamespaceSalt, tokens: &[u32]) {
        if let Some(s) = &self.stack {
            s.prefetch_remote(self.model, self.layout, salt, tokens)
                .await;
        }
    }
}
