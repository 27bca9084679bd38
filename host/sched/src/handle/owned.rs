//! [`OwnedSession`]: an engine session held by a caller (an HTTP request, a guest's session
//! resource), opened with its prompt in one round trip and closed exactly once: explicitly, or
//! when dropped, unless handed over to a generation that closes it itself.

use std::sync::Arc;

use memoria_kv::{BlockHash, NamespaceId};

use super::EngineHandle;
use crate::EngineError;
use crate::session::SessionId;

/// An open engine session that closes when dropped.
pub struct OwnedSession {
    engine: EngineHandle,
    ns: NamespaceId,
    id: SessionId,
    /// The pool's salted hashes of the prompt's whole blocks, where kept (see
    /// [`OwnedSession::open_keeping_chain`]).
    chain: Option<Arc<[BlockHash]>>,
    /// Closed, or handed over: nothing to do on drop.
    done: bool,
}

impl std::fmt::Debug for OwnedSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnedSession")
            .field("ns", &self.ns)
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl OwnedSession {
    /// Opens a session of `ns` holding `tokens` (computed by its first job), in one engine
    /// round trip.
    pub async fn open(
        engine: &EngineHandle,
        ns: NamespaceId,
        tokens: Vec<u32>,
    ) -> Result<OwnedSession, EngineError> {
        let id = engine.open_with(ns, tokens).await?;
        Ok(OwnedSession::adopt(engine, ns, id))
    }

    /// [`OwnedSession::open`], keeping the pool's salted hashes of the prompt's whole blocks
    /// that the open hashed (with a remote tier; see [`OwnedSession::pool_chain`]), so the
    /// host's residency bookkeeping never hashes the prompt again.
    pub async fn open_keeping_chain(
        engine: &EngineHandle,
        ns: NamespaceId,
        tokens: Vec<u32>,
    ) -> Result<OwnedSession, EngineError> {
        let (id, chain) = engine.open_keeping(ns, tokens, true).await?;
        let mut s = OwnedSession::adopt(engine, ns, id);
        s.chain = chain;
        Ok(s)
    }

    /// Takes charge of a session already open (a fork, a restore).
    pub fn adopt(engine: &EngineHandle, ns: NamespaceId, id: SessionId) -> OwnedSession {
        OwnedSession {
            engine: engine.clone(),
            ns,
            id,
            chain: None,
            done: false,
        }
    }

    pub fn id(&self) -> SessionId {
        self.id
    }

    pub fn ns(&self) -> NamespaceId {
        self.ns
    }

    /// The pool's salted hashes of the prompt's whole blocks, where the open kept them
    /// ([`OwnedSession::open_keeping_chain`] with a remote tier). Host-internal keys: they
    /// never leave the host.
    pub fn pool_chain(&self) -> Option<&Arc<[BlockHash]>> {
        self.chain.as_ref()
    }

    pub fn engine(&self) -> &EngineHandle {
        &self.engine
    }

    /// Closes the session now.
    pub async fn close(mut self) {
        self.done = true;
        let _ = self.engine.close(self.ns, self.id).await;
    }

    /// Lets go of the session without closing it (a generation started with
    /// `close_when_done` owns it now); returns its id.
    pub fn hand_over(mut self) -> SessionId {
        self.done = true;
        self.id
    }
}

impl Drop for OwnedSession {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let (engine, ns, id) = (self.engine.clone(), self.ns, self.id);
            rt.spawn(async move {
                let _ = engine.close(ns, id).await;
            });
        }
    }
}
