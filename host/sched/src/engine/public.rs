//! The engine's side of public prefixes: compiles a namespace's declared token sequences into
//! a [`PublicChain`] under the common salt's root (the registry's) and hands it to the pool (and
//! keeps it for a rebuilt pool). Sessions opened afterwards chain through it; see `memoria_kv::hash`.

use std::sync::Arc;

use memoria_kv::{NamespaceId, PublicChain};

use super::Engine;

impl Engine {
    pub(crate) fn set_public_prefixes(&mut self, ns: NamespaceId, prefixes: &[Vec<u32>]) {
        let Some(root) = self.namespaces.common_root(&self.root_shape()) else {
            eprintln!("memoria: public prefixes of {ns} ignored: no common salt is registered");
            return;
        };
        let b = self.pool.layout().block_tokens;
        let chain = PublicChain::new(root, b, prefixes);
        if chain.is_empty() {
            self.pool.set_public_prefixes(ns, None);
            self.publics.remove(&ns);
            return;
        }
        let chain = Arc::new(chain);
        self.pool.set_public_prefixes(ns, Some(chain.clone()));
        self.publics.insert(ns, chain);
    }
}
