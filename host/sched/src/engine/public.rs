//! The engine's side of public prefixes: compiles a namespace's declared token sequences into
//! a [`PublicChain`] under the common salt's root and hands it to the pool (and keeps it for a
//! rebuilt pool). Sessions opened afterwards chain through it; see `memoria_kv::hash`.

use std::sync::Arc;

use memoria_kv::{NamespaceId, NamespaceSalt, PublicChain};

use super::Engine;

impl Engine {
    pub(crate) fn set_public_prefixes(
        &mut self,
        ns: NamespaceId,
        common: NamespaceSalt,
        prefixes: &[Vec<u32>],
    ) {
        let root = self.pool.root_hash(&self.fingerprint, &common);
        let b = self.pool.layout().block_tokens;
        let chain = PublicChain::new(root, b, prefixes);
        if chain.is_empty() {
            self.pool.set_public_prefixes(ns, None);
            self.publics.remove(&ns);
            return;
        }
        let chain = Arc::new(chain);
        self.pool.set_public_prefixes(ns, Some(chain.clone()));
        self.persist.register_public(common);
        self.publics.insert(ns, (common, chain));
    }
}
