//! The stack as the engine's [`Backing`] and its intake as the engine's [`HandOff`]: the
//! narrow interface `memoria-kv` defines, so the scheduler never names the store's types.
//! Salts are looked up here, in the stack's registry, by namespace id.

use std::sync::Arc;
use std::time::Duration;

use memoria_kv::backing::{
    Backing, BackingError, BackingErrorKind, BlockBytes, BoxFuture, ChainKeys, HandOff,
    PartialBlock, SaveDone, SavedSession,
};
use memoria_kv::{BlockHash, KvLayout, ModelFingerprint, NamespaceId, Namespaces, TierSink};

use crate::error::StoreError;
use crate::intake::Intake;
use crate::session::SessionRecord;
use crate::stack::TierStack;
use crate::stack_remote::RemoteKeys;

impl From<StoreError> for BackingError {
    fn from(e: StoreError) -> BackingError {
        let kind = if e.is_full() {
            BackingErrorKind::Full
        } else if matches!(e, StoreError::RemoteUnavailable) {
            BackingErrorKind::RemoteUnavailable
        } else {
            BackingErrorKind::Other
        };
        BackingError::new(kind, e.to_string())
    }
}

fn saved(r: SessionRecord) -> SavedSession {
    SavedSession {
        model: r.model,
        elem: r.elem,
        block_tokens: r.block_tokens,
        tokens: r.tokens,
    }
}

impl HandOff for Intake {
    fn sent(&self) -> u64 {
        Intake::sent(self)
    }

    fn wait_handled(&self, point: u64) {
        Intake::wait_handled(self, point)
    }

    fn sink(self: Arc<Self>) -> Box<dyn TierSink> {
        Intake::sink(&self)
    }

    fn sealed(&self, ns: NamespaceId, public: bool, force: bool, block: BlockBytes) {
        Intake::sealed(self, ns, public, force, block)
    }

    fn rewrite(&self, ns: NamespaceId, public: bool, block: BlockBytes) {
        Intake::rewrite(self, ns, public, block)
    }

    fn tail(&self, ns: NamespaceId, tail: PartialBlock) {
        Intake::tail(self, ns, tail)
    }

    fn save(
        &self,
        ns: NamespaceId,
        name: String,
        hashes: Vec<BlockHash>,
        tokens: Vec<u32>,
        done: SaveDone,
    ) {
        Intake::save(
            self,
            ns,
            name,
            hashes,
            tokens,
            Box::new(move |r| done(r.map_err(BackingError::from))),
        )
    }
}

impl Backing for TierStack {
    fn namespaces(&self) -> Arc<Namespaces> {
        TierStack::namespaces(self).clone()
    }

    fn has_disk(&self) -> bool {
        self.disk().is_some()
    }

    fn has_remote(&self) -> bool {
        self.remote().is_some()
    }

    fn hand_off(self: Arc<Self>, model: ModelFingerprint, layout: KvLayout) -> Arc<dyn HandOff> {
        self.intake(model, layout)
    }

    fn flush(&self) -> Result<(), BackingError> {
        TierStack::flush(self).map_err(BackingError::from)
    }

    fn load_saved(
        &self,
        ns: NamespaceId,
        name: &str,
    ) -> Result<Option<SavedSession>, BackingError> {
        if self.disk().is_none() {
            return Ok(None);
        }
        let rec = self.load_session(ns, name)?;
        // A save made under another salt (the namespace was re-keyed) is not this one's.
        let salt = TierStack::namespaces(self).salt(ns);
        Ok(rec.filter(|r| Some(r.salt) == salt).map(saved))
    }

    fn load_saved_remote<'a>(
        &'a self,
        ns: NamespaceId,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<SavedSession>, BackingError>> {
        Box::pin(async move {
            let Some(salt) = TierStack::namespaces(self).salt(ns) else {
                return Ok(None);
            };
            Ok(self.load_session_remote(&salt, name).await?.map(saved))
        })
    }

    fn prefetch<'a>(
        &'a self,
        shape: (ModelFingerprint, KvLayout),
        ns: NamespaceId,
        chain: ChainKeys<'a>,
        tokens: &'a [u32],
        per_token: Option<Duration>,
    ) -> BoxFuture<'a, usize> {
        Box::pin(async move {
            let table = TierStack::namespaces(self).snapshot();
            let Some(salt) = table.salt(ns) else { return 0 };
            let keys = RemoteKeys {
                salt,
                chain,
                common_salt: table.common_salt(),
            };
            self.prefetch_remote(shape, keys, tokens, per_token).await
        })
    }
}
