//! Remote-tier reads on the callers' side of the engine: before a fresh session's first
//! tokens (or a warm) reach the engine thread, the caller's task awaits one batched lookup of
//! the prompt's chain in the remote tier (`Backing::prefetch`), which stages verified blocks
//! that the engine's prefix match then copies in. So the engine thread never waits on the
//! network, and other sessions keep decoding meanwhile. A namespace with public prefixes
//! (compiled here once, `set_public`, and shared with the engine's pool) has its chain hashed
//! as the pool hashes it, so the leading public blocks are found under the common salt; the
//! store looks salts up by namespace id, none is handled here. A prefetch waits no longer than
//! the engine's recent cost of computing the blocks it looks up. Invariant: only tokens that start
//! a context are prefetched (a session opened with them, or an append the engine answered with
//! a context of exactly those tokens), so their chain starts at the root; with no remote tier
//! every method is a no-op.

use std::sync::{Arc, Weak};

use memoria_kv::backing::{Backing, BackingError, ChainKeys, SavedSession};
use memoria_kv::{KvLayout, ModelFingerprint, NamespaceId, Namespaces, PublicChain, RootShape};

use crate::EngineError;
use crate::engine::{HandedChain, Publics};
use crate::stats::EngineStats;

pub(crate) struct RemoteReads {
    stack: Option<Arc<dyn Backing>>,
    /// The store, when it keeps saves on disk (read here, never on the engine thread). Weak:
    /// a stopped engine lets go of its store (its file lock) whoever still holds the handle.
    saves: Option<Weak<dyn Backing>>,
    model: ModelFingerprint,
    layout: KvLayout,
    namespaces: Arc<Namespaces>,
    /// The engine's figures: the recent cost of a prompt token bounds a prefetch's wait.
    stats: Arc<EngineStats>,
    /// Each namespace's public prefixes, compiled once (shared with the engine's builds).
    publics: Arc<Publics>,
}

impl RemoteReads {
    pub fn new(
        stack: Option<Arc<dyn Backing>>,
        model: ModelFingerprint,
        layout: KvLayout,
        namespaces: Arc<Namespaces>,
        stats: Arc<EngineStats>,
        publics: Arc<Publics>,
    ) -> Self {
        RemoteReads {
            saves: stack.as_ref().filter(|s| s.has_disk()).map(Arc::downgrade),
            stack: stack.filter(|s| s.has_remote()),
            namespaces,
            stats,
            model,
            layout,
            publics,
        }
    }

    /// Whether a remote tier is attached (prefetches do something).
    pub fn has_remote(&self) -> bool {
        self.stack.is_some()
    }

    /// Compiles `ns`'s public prefixes (empty: none) under the registry's common root, once,
    /// into the shared map; returns the chain for the engine's pool (`Err`: no common salt is
    /// registered, the prefixes are ignored).
    pub fn set_public(
        &self,
        ns: NamespaceId,
        prefixes: &[Vec<u32>],
    ) -> Result<Option<Arc<PublicChain>>, ()> {
        let shape = RootShape::new(self.model, &self.layout);
        self.publics.compile(
            &self.namespaces,
            &shape,
            self.layout.block_tokens,
            ns,
            prefixes,
        )
    }

    /// The session saved as `name` by namespace `ns` on this host's disk, read on a blocking
    /// thread; `Ok(None)` without a disk or for a name no save can have.
    pub async fn load_local(
        &self,
        ns: NamespaceId,
        name: &str,
    ) -> Result<Option<SavedSession>, BackingError> {
        let Some(stack) = self.saves.as_ref().and_then(Weak::upgrade) else {
            return Ok(None);
        };
        if name.is_empty() || name.len() > crate::engine::MAX_SAVE_NAME {
            return Ok(None);
        }
        let name = name.to_string();
        tokio::task::spawn_blocking(move || stack.load_saved(ns, &name))
            .await
            .unwrap_or(Ok(None))
    }

    /// The session saved as `name` in the remote tier by namespace `ns` (see
    /// `TierStack::load_session_remote`); `Ok(None)` without a remote tier.
    pub async fn load_session(
        &self,
        ns: NamespaceId,
        name: &str,
    ) -> Result<Option<SavedSession>, EngineError> {
        match &self.stack {
            Some(s) => s
                .load_saved_remote(ns, name)
                .await
                .map_err(EngineError::Store),
            None => Ok(None),
        }
    }

    /// `ns`'s public prefixes, if it declares any.
    fn public_of(&self, ns: NamespaceId) -> Option<Arc<PublicChain>> {
        self.publics.get(ns)
    }

    /// Prefetches a context of namespace `ns` that starts at the chain's root: its chain is
    /// hashed here, from the registry's root, as the pool will key it, and returned for the
    /// engine to take rather than hash again (`None` without a remote tier).
    pub async fn prefetch(&self, ns: NamespaceId, tokens: &[u32]) -> Option<HandedChain> {
        let s = self.stack.as_ref()?;
        let c = self.hashed(ns, tokens)?;
        let chain = ChainKeys {
            root: c.root,
            hashes: &c.hashes,
            n_public: c.n_public,
            public: c.public.as_deref(),
        };
        let cost = self.stats.prompt_token_cost();
        s.prefetch((self.model, self.layout), ns, chain, tokens, cost)
            .await;
        Some(c)
    }

    /// The chain of a context of `tokens` in namespace `ns`, hashed as the pool will key it
    /// (`None` without a remote tier or for an unknown namespace).
    fn hashed(&self, ns: NamespaceId, tokens: &[u32]) -> Option<HandedChain> {
        self.stack.as_ref()?;
        let shape = RootShape::new(self.model, &self.layout);
        let root = self.namespaces.root(ns, &shape)?;
        let public = self.public_of(ns);
        let b = self.layout.block_tokens;
        let (hashes, n_public) = memoria_kv::context_chain(&root, public.as_deref(), tokens, b);
        Some(HandedChain {
            root,
            hashes,
            n_public,
            public,
        })
    }
}
