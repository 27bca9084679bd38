//! The handle's cache side: warming and pinning prefixes, the hot prefixes, named saves and
//! restores (read on the caller's side, never on the engine thread), public prefixes
//! (compiled here once) and the pool's chain of a context.

use std::time::Duration;

use memoria_kv::{NamespaceId, PinLevel};

use super::EngineHandle;
use crate::EngineError;
use crate::engine::Command;
use crate::session::{SessionId, WarmInfo};

impl EngineHandle {
    /// Prefills `tokens` (reusing what is cached) and pins the resulting blocks.
    pub async fn warm(
        &self,
        ns: NamespaceId,
        tokens: Vec<u32>,
        pin: PinLevel,
        ttl: Option<Duration>,
    ) -> Result<WarmInfo, EngineError> {
        let chain = self.remote.prefetch(ns, &tokens).await;
        self.call("warm", |reply| Command::Warm {
            ns,
            tokens,
            pin,
            ttl,
            chain,
            reply,
        })
        .await
    }

    /// Warms a saved hot prefix without pinning it, then counts it as reused `count` times so
    /// `[cache] auto_pin` pins it again (start-up, after a restart).
    pub async fn rewarm(
        &self,
        ns: NamespaceId,
        tokens: Vec<u32>,
        count: f64,
    ) -> Result<WarmInfo, EngineError> {
        let chain = self.remote.prefetch(ns, &tokens).await;
        self.call("rewarm", |reply| Command::Rewarm {
            ns,
            tokens,
            count,
            chain,
            reply,
        })
        .await
    }

    /// The chains `[cache] auto_pin` keeps pinned now, at most `max_tokens` tokens each, with
    /// their namespaces and decayed counts (to save them for a restart).
    pub async fn hot_prefixes(
        &self,
        max_tokens: usize,
    ) -> Result<Vec<memoria_kv::HotChain>, EngineError> {
        self.call("hot_prefixes", |reply| Command::HotPrefixes {
            max_tokens,
            reply,
        })
        .await
    }

    /// Saves `session` under `name` in its namespace, durably and content-addressed (its
    /// tokens and block hashes; its blocks are written through to disk). Resolves once the
    /// record is committed. Needs an engine started with a store.
    pub async fn save(
        &self,
        ns: NamespaceId,
        session: SessionId,
        name: &str,
    ) -> Result<(), EngineError> {
        let name = name.to_string();
        self.call("save", |reply| Command::Save {
            ns,
            session,
            name,
            reply,
        })
        .await
    }

    /// Opens a new session holding the tokens saved under `name` in `ns` (under the salt the
    /// registry holds for `ns`, as when it was saved). Its next compute reuses the blocks the tiers still hold
    /// and recomputes the rest, so its next-token logits are bit-identical to the original's.
    /// The save is read from this host's disk on a blocking thread, and one the disk does not
    /// hold is looked up in the remote tier (any host's save of the namespace), here on the
    /// caller's task, and its blocks prefetched: the engine thread never reads a store.
    pub async fn restore(&self, ns: NamespaceId, name: &str) -> Result<SessionId, EngineError> {
        let restore = |record, chain| {
            let name = name.to_string();
            self.call("restore", move |reply| Command::Restore {
                ns,
                name,
                record,
                chain,
                reply,
            })
        };
        let local = self.remote.load_local(ns, name).await;
        match restore(local.map(|r| r.map(Box::new)), None).await {
            Err(EngineError::NoSavedSession(missing)) => {
                let Some(rec) = self.remote.load_session(ns, name).await? else {
                    return Err(EngineError::NoSavedSession(missing));
                };
                let chain = self.remote.prefetch(ns, &rec.tokens).await;
                restore(Ok(Some(Box::new(rec))), chain).await
            }
            r => r,
        }
    }

    /// Sets a namespace's public prefixes (token sequences from a prompt's start, as
    /// [`crate::public::prefix_tokens`] makes them; empty: none), whose whole blocks are keyed
    /// under the registry's common salt (the shared namespaces'). Applies to sessions opened
    /// afterwards.
    pub fn set_public_prefixes(
        &self,
        ns: NamespaceId,
        prefixes: Vec<Vec<u32>>,
    ) -> Result<(), EngineError> {
        let Ok(chain) = self.remote.set_public(ns, &prefixes) else {
            eprintln!("memoria: public prefixes of {ns} ignored: no common salt is registered");
            return Ok(());
        };
        self.tx
            .send(Command::SetPublicPrefixes { ns, chain })
            .map_err(|_| EngineError::Stopped)
    }
}
