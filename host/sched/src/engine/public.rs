//! Public prefixes, compiled once: a namespace's declared token sequences become one
//! [`PublicChain`] under the common salt's root (the registry's) when the caller sets them,
//! held in one shared map ([`Publics`]) that the remote-read path hashes prompts with and a
//! rebuilt pool is given again; the engine hands the same chain to the pool. Sessions opened
//! afterwards chain through it; see `memoria_kv::hash`.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use memoria_kv::{NamespaceId, Namespaces, PublicChain, RootShape};

/// Every namespace's compiled public prefixes (absent: none).
#[derive(Debug, Default)]
pub(crate) struct Publics(RwLock<BTreeMap<NamespaceId, Arc<PublicChain>>>);

impl Publics {
    /// Compiles `prefixes` for `ns` under the registry's common root and records the chain
    /// (none when empty); returns what the pool should hold. `Err` when no common salt is
    /// registered (the prefixes are then ignored).
    pub fn compile(
        &self,
        namespaces: &Namespaces,
        shape: &RootShape,
        block_tokens: usize,
        ns: NamespaceId,
        prefixes: &[Vec<u32>],
    ) -> Result<Option<Arc<PublicChain>>, ()> {
        let root = namespaces.common_root(shape).ok_or(())?;
        let chain = PublicChain::new(root, block_tokens, prefixes);
        let chain = (!chain.is_empty()).then(|| Arc::new(chain));
        let mut g = self.0.write().unwrap_or_else(|p| p.into_inner());
        match &chain {
            Some(c) => g.insert(ns, c.clone()),
            None => g.remove(&ns),
        };
        Ok(chain)
    }

    /// `ns`'s chain, if it declares public prefixes.
    pub fn get(&self, ns: NamespaceId) -> Option<Arc<PublicChain>> {
        self.0
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&ns)
            .cloned()
    }

    /// Every namespace's chain (for a rebuilt pool).
    pub fn all(&self) -> Vec<(NamespaceId, Arc<PublicChain>)> {
        self.0
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(&ns, c)| (ns, c.clone()))
            .collect()
    }
}
