//! A namespace's component table: the components its configuration names, the admin API's
//! deployments and deletions laid over them, and the lookup a request path goes through
//! (`/ns/NAME/{key}/...` → the `key` route if there is one, else the default component).
//!
//! Invariant: a deployment or deletion of a slot hides the configured component of that slot;
//! nothing else does.

use std::collections::BTreeMap;
use std::path::PathBuf;

use wasmtime_wasi_http::p2::bindings::ProxyPre;

use crate::TenantState;
use crate::components::Compiled;

/// Which component of a namespace: the default one, or the one for a first path segment.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Slot {
    /// Serves every path no route claims (`component = ...` in the config).
    Default,
    /// Serves `/ns/NAME/{key}/...` (`components.KEY = ...` in the config).
    Route(String),
}

/// Why a route key was refused.
#[derive(Debug, thiserror::Error)]
#[error(
    "route {0:?}: use 1 to 64 characters of lowercase letters, digits, '-' and '_' (it is the first segment of /ns/NAME/ROUTE/...)"
)]
pub struct BadRoute(pub String);

impl Slot {
    /// The slot of route `key`, checked to be a plain path segment.
    pub fn route(key: &str) -> Result<Slot, BadRoute> {
        let ok = (1..=64).contains(&key.len())
            && key
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
        if ok {
            Ok(Slot::Route(key.to_string()))
        } else {
            Err(BadRoute(key.to_string()))
        }
    }

    /// The config key naming this slot (`component` or `components.KEY`).
    pub fn config_key(&self) -> String {
        match self {
            Slot::Default => "component".into(),
            Slot::Route(k) => format!("components.{k}"),
        }
    }
}

/// Where a namespace's component came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// The file the configuration names.
    Config(PathBuf),
    /// The admin API; `persisted` says whether it survives a restart.
    Deployed { persisted: bool },
}

/// One component of a namespace, as the admin API describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ComponentInfo {
    pub slot: Slot,
    /// blake3 of the component's bytes, in hex.
    pub digest: String,
    /// Size of the component's bytes.
    pub bytes: usize,
    pub origin: Origin,
}

/// A loaded component in a table.
#[derive(Clone)]
pub(crate) struct Entry {
    pub compiled: Compiled,
    pub origin: Origin,
}

impl Entry {
    pub fn info(&self, slot: &Slot) -> ComponentInfo {
        ComponentInfo {
            slot: slot.clone(),
            digest: blake3::Hash::from(self.compiled.digest)
                .to_hex()
                .to_string(),
            bytes: self.compiled.bytes,
            origin: self.origin.clone(),
        }
    }
}

/// What the admin API did to a slot.
#[derive(Clone)]
pub(crate) enum Layer {
    Deployed(Entry),
    /// Deleted: the configured component of the slot (if any) is hidden.
    Removed,
}

/// A namespace's components: configured, then overlaid.
#[derive(Clone, Default)]
pub(crate) struct Table {
    pub config: BTreeMap<Slot, Entry>,
    pub overlay: BTreeMap<Slot, Layer>,
}

impl Table {
    /// The component serving `slot`, after the overlay.
    pub fn get(&self, slot: &Slot) -> Option<&Entry> {
        match self.overlay.get(slot) {
            Some(Layer::Deployed(e)) => Some(e),
            Some(Layer::Removed) => None,
            None => self.config.get(slot),
        }
    }

    /// The component for a request path (what follows `/ns/NAME`): its first segment's route,
    /// else the default component.
    pub fn for_path(&self, path: &str) -> Option<&ProxyPre<TenantState>> {
        let first = path
            .trim_start_matches('/')
            .split(['/', '?'])
            .next()
            .unwrap_or("");
        self.get(&Slot::Route(first.to_string()))
            .or_else(|| self.get(&Slot::Default))
            .map(|e| &e.compiled.pre)
    }

    /// Every slot that has a component, default first.
    pub fn list(&self) -> Vec<ComponentInfo> {
        let mut slots: Vec<&Slot> = self.config.keys().chain(self.overlay.keys()).collect();
        slots.sort();
        slots.dedup();
        slots
            .into_iter()
            .filter_map(|s| self.get(s).map(|e| e.info(s)))
            .collect()
    }

    /// Digests of every component this table keeps loaded.
    pub fn digests(&self) -> impl Iterator<Item = [u8; 32]> + '_ {
        let deployed = self.overlay.values().filter_map(|l| match l {
            Layer::Deployed(e) => Some(e.compiled.digest),
            Layer::Removed => None,
        });
        self.config
            .values()
            .map(|e| e.compiled.digest)
            .chain(deployed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_keys_are_plain_segments() {
        assert_eq!(Slot::route("chat").ok(), Some(Slot::Route("chat".into())));
        assert!(Slot::route("a-b_9").is_ok());
        for bad in ["", "Chat", "a/b", "..", "a.b", &"x".repeat(65)] {
            let e = Slot::route(bad).expect_err(bad);
            assert!(e.to_string().contains("lowercase letters"), "{e}");
        }
        assert_eq!(Slot::Default.config_key(), "component");
        assert_eq!(Slot::Route("x".into()).config_key(), "components.x");
        assert!(Slot::Default < Slot::Route(String::new()));
    }
}
