//! Named sessions saved by guests (`session.save` / `session.restore`) when the engine has no
//! persistent store (with one, the engine's durable save/restore is used instead), keyed by
//! namespace and name. A saved session is its token context; restoring opens a new engine session and
//! appends those tokens, whose K/V come back from the shared block cache (same salt) instead of
//! being recomputed while they are cached.
//!
//! Invariants: look-ups always include the caller's namespace id, so one namespace can neither
//! read nor overwrite another's names; each namespace holds at most `cap` names.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use memoria_kv::NamespaceId;

/// Longest accepted name, bytes.
pub const MAX_NAME_BYTES: usize = 128;

/// Saved token contexts by (namespace, name).
type SavedMap = HashMap<(NamespaceId, String), Arc<Vec<u32>>>;

/// Saved contexts of every namespace.
#[derive(Debug, Default)]
pub struct NamedSessions {
    map: Mutex<SavedMap>,
}

/// Why a name could not be saved or found.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum NamedError {
    #[error("session name must be 1-{MAX_NAME_BYTES} bytes of visible ASCII, got {0} bytes")]
    BadName(usize),
    #[error("no saved session named {0:?} in this namespace")]
    NotFound(String),
    #[error("this namespace already holds {0} saved sessions (max_sessions)")]
    Full(usize),
}

/// Checks a guest-supplied name.
pub fn check_name(name: &str) -> Result<(), NamedError> {
    let ok =
        (1..=MAX_NAME_BYTES).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_graphic());
    if ok {
        Ok(())
    } else {
        Err(NamedError::BadName(name.len()))
    }
}

impl NamedSessions {
    /// Saves (or replaces) `name` in `ns`.
    pub fn save(
        &self,
        ns: NamespaceId,
        name: &str,
        tokens: Vec<u32>,
        cap: usize,
    ) -> Result<(), NamedError> {
        check_name(name)?;
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        let key = (ns, name.to_string());
        if !map.contains_key(&key) && map.keys().filter(|(n, _)| *n == ns).count() >= cap {
            return Err(NamedError::Full(cap));
        }
        map.insert(key, Arc::new(tokens));
        Ok(())
    }

    /// The tokens saved as `name` in `ns`.
    pub fn get(&self, ns: NamespaceId, name: &str) -> Result<Arc<Vec<u32>>, NamedError> {
        check_name(name)?;
        let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        map.get(&(ns, name.to_string()))
            .cloned()
            .ok_or_else(|| NamedError::NotFound(name.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_scoped_by_namespace_and_capped() {
        let n = NamedSessions::default();
        n.save(NamespaceId(1), "conv", vec![1, 2], 2).expect("save");
        assert_eq!(
            n.get(NamespaceId(1), "conv").expect("get").as_slice(),
            &[1, 2]
        );
        assert_eq!(
            n.get(NamespaceId(2), "conv"),
            Err(NamedError::NotFound("conv".into()))
        );
        n.save(NamespaceId(1), "b", vec![], 2).expect("second");
        assert_eq!(
            n.save(NamespaceId(1), "c", vec![], 2),
            Err(NamedError::Full(2))
        );
        n.save(NamespaceId(1), "conv", vec![3], 2).expect("replace");
        assert!(matches!(
            n.save(NamespaceId(1), "", vec![], 2),
            Err(NamedError::BadName(0))
        ));
        assert!(matches!(
            n.save(NamespaceId(1), "a b", vec![], 2),
            Err(NamedError::BadName(3))
        ));
    }
}
