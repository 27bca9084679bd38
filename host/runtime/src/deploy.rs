//! Changing a running host's components: deploy (or replace) and delete one slot of a
//! namespace, and reload every namespace from new configuration. Each change validates and
//! compiles first, then writes the components folder, then swaps the namespace map; a refusal
//! at any step leaves everything as it was. Requests already running finish with the component
//! they started with.
//!
//! Invariants: changes are serialised (`Inner::mutate`); a deployment is acknowledged only after
//! it is in the folder (when there is one); a namespace's limits and salt come from its
//! configuration, never from a deployment.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use memoria_tenant::{Namespace, Tenants};

use crate::components::ComponentError;
use crate::engine::EngineSizing;
use crate::namespaces::NsRuntime;
use crate::persist::Stored;
use crate::router::{Inner, NsEntry, NsMap, Runtime, RuntimeError};
use crate::table::{ComponentInfo, Entry, Layer, Origin, Slot, Table};

/// Why a deploy or delete was refused.
#[derive(Debug, thiserror::Error)]
pub enum DeployError {
    #[error("unknown namespace {0:?}")]
    UnknownNamespace(String),
    #[error("{0}")]
    Invalid(#[from] ComponentError),
    #[error(
        "route {0:?} is reserved (the host routes /ns/NAME/{0}/... itself); reserved: {reserved}",
        reserved = RESERVED_ROUTES.join(", ")
    )]
    Reserved(String),
    #[error("storing the component in {path}: {source}")]
    Store {
        path: String,
        source: std::io::Error,
    },
}

/// Route keys a component may not take: the host serves these paths under `/ns/NAME/` itself
/// (`v1`) or at the top level, where a tenant route of that name would confuse clients.
pub const RESERVED_ROUTES: &[&str] = &[
    "v1",
    "admin",
    "health",
    "metrics",
    "stats",
    "ui",
    "ns",
    "tokenize",
    "detokenize",
];

/// Refuses a reserved route key.
pub fn check_route(slot: &Slot) -> Result<(), DeployError> {
    match slot {
        Slot::Route(k) if RESERVED_ROUTES.contains(&k.as_str()) => {
            Err(DeployError::Reserved(k.clone()))
        }
        _ => Ok(()),
    }
}

/// What a deploy did.
#[derive(Clone, Debug)]
pub struct Deployed {
    pub info: ComponentInfo,
    /// The slot had a component before (now replaced).
    pub replaced: bool,
}

impl Inner {
    /// Loads the components a namespace's configuration names.
    fn configured(&self, ns: &Namespace) -> Result<BTreeMap<Slot, Entry>, RuntimeError> {
        let mut slots: Vec<(Slot, &std::path::PathBuf)> = ns
            .spec
            .component
            .iter()
            .map(|p| (Slot::Default, p))
            .collect();
        slots.extend(
            ns.spec
                .components
                .iter()
                .map(|(k, p)| (Slot::Route(k.clone()), p)),
        );
        slots
            .into_iter()
            .map(|(slot, path)| {
                if let Slot::Route(route) = &slot
                    && check_route(&slot).is_err()
                {
                    return Err(RuntimeError::ReservedRoute {
                        ns: ns.name.clone(),
                        route: route.clone(),
                    });
                }
                let compiled =
                    self.compiler
                        .load_file(path)
                        .map_err(|source| RuntimeError::Component {
                            ns: ns.name.clone(),
                            source,
                        })?;
                let origin = Origin::Config(path.clone());
                Ok((slot, Entry { compiled, origin }))
            })
            .collect()
    }

    /// Loads what the components folder holds for a namespace.
    fn stored(&self, ns: &str) -> Result<BTreeMap<Slot, Layer>, RuntimeError> {
        let Some(folder) = &self.folder else {
            return Ok(BTreeMap::new());
        };
        let stored = folder.load(ns).map_err(|source| RuntimeError::Folder {
            path: folder.root().display().to_string(),
            source,
        })?;
        stored
            .into_iter()
            .map(|(slot, s)| {
                let layer = match s {
                    Stored::Removed => Layer::Removed,
                    Stored::Component { bytes, file } => {
                        let label = file.display().to_string();
                        let compiled =
                            self.compiler.load_bytes(&label, &bytes).map_err(|source| {
                                RuntimeError::Deployed {
                                    ns: ns.to_string(),
                                    slot: slot.config_key(),
                                    source,
                                }
                            })?;
                        let origin = Origin::Deployed { persisted: true };
                        Layer::Deployed(Entry { compiled, origin })
                    }
                };
                Ok((slot, layer))
            })
            .collect()
    }

    /// The namespace map for `tenants`: configured components reloaded, deployments kept from
    /// `current` (or read from the folder for namespaces new to it), per-namespace state kept
    /// where the namespace's configuration did not change.
    pub(crate) fn build_map(
        &self,
        tenants: &Tenants,
        current: &NsMap,
    ) -> Result<NsMap, RuntimeError> {
        let mut map = NsMap::default();
        for ns in tenants.iter() {
            let old = current.by_name(&ns.name);
            let overlay = match old {
                Some(e) => e.table.overlay.clone(),
                None => self.stored(&ns.name)?,
            };
            let table = Table {
                config: self.configured(ns)?,
                overlay,
            };
            let rt = match old {
                Some(e)
                    if e.rt.ns.id == ns.id
                        && e.rt.ns.spec.isolation == ns.spec.isolation
                        && e.rt.ns.spec.limits == ns.spec.limits =>
                {
                    e.rt.clone()
                }
                _ => Arc::new(NsRuntime::new(ns.clone(), self.host.clone())),
            };
            map.insert(NsEntry { rt, table });
        }
        Ok(map)
    }

    /// The map with namespace `ns`'s table changed by `edit`.
    fn with_table(&self, ns: &str, edit: impl FnOnce(&mut Table)) -> Option<NsMap> {
        let mut map = (*self.map()).clone();
        let entry = map.by_name(ns)?.clone();
        let mut table = entry.table.clone();
        edit(&mut table);
        map.insert(NsEntry {
            rt: entry.rt.clone(),
            table,
        });
        Some(map)
    }
}

impl crate::persist::ComponentsDir {
    /// Maps a write error to the deploy error naming this folder.
    fn store_error(&self) -> impl FnOnce(std::io::Error) -> DeployError + '_ {
        |source| DeployError::Store {
            path: self.root().display().to_string(),
            source,
        }
    }
}

impl Runtime {
    /// Validates, compiles and links `bytes`, stores them in the components folder, and makes
    /// them namespace `ns`'s component for `slot` (replacing what served it). Blocking:
    /// compiling takes a while, so call it from a blocking thread.
    pub fn deploy(&self, ns: &str, slot: Slot, bytes: &[u8]) -> Result<Deployed, DeployError> {
        check_route(&slot)?;
        let inner = &self.inner;
        let _serial = inner.mutate.lock().unwrap_or_else(|e| e.into_inner());
        let entry = inner
            .entry(ns)
            .ok_or_else(|| DeployError::UnknownNamespace(ns.to_string()))?;
        let label = format!("namespaces.{ns}.{} (deployed)", slot.config_key());
        let compiled = inner.compiler.load_bytes(&label, bytes).inspect_err(|_| {
            inner.host.stats.deploys_refused.fetch_add(1, Relaxed);
        })?;
        if let Some(folder) = &inner.folder {
            folder
                .write(ns, &slot, bytes)
                .map_err(folder.store_error())?;
        }
        let replaced = entry.table.get(&slot).is_some();
        let deployed = Entry {
            compiled,
            origin: Origin::Deployed {
                persisted: inner.folder.is_some(),
            },
        };
        let info = deployed.info(&slot);
        let map = inner
            .with_table(ns, |t| {
                t.overlay.insert(slot, Layer::Deployed(deployed));
            })
            .ok_or_else(|| DeployError::UnknownNamespace(ns.to_string()))?;
        inner.install(map);
        inner.host.stats.deploys.fetch_add(1, Relaxed);
        Ok(Deployed { info, replaced })
    }

    /// Deletes namespace `ns`'s component for `slot` (a configured one stays deleted across
    /// restarts when there is a components folder). `Ok(false)`: there was none.
    pub fn remove(&self, ns: &str, slot: &Slot) -> Result<bool, DeployError> {
        let inner = &self.inner;
        let _serial = inner.mutate.lock().unwrap_or_else(|e| e.into_inner());
        let entry = inner
            .entry(ns)
            .ok_or_else(|| DeployError::UnknownNamespace(ns.to_string()))?;
        if entry.table.get(slot).is_none() {
            return Ok(false);
        }
        let configured = entry.table.config.contains_key(slot);
        if let Some(folder) = &inner.folder {
            let r = if configured {
                folder.mark_removed(ns, slot)
            } else {
                folder.clear(ns, slot)
            };
            r.map_err(folder.store_error())?;
        }
        let map = inner
            .with_table(ns, |t| {
                if configured {
                    t.overlay.insert(slot.clone(), Layer::Removed);
                } else {
                    t.overlay.remove(slot);
                }
            })
            .ok_or_else(|| DeployError::UnknownNamespace(ns.to_string()))?;
        inner.install(map);
        Ok(true)
    }

    /// Namespace `ns`'s components (None: no such namespace).
    pub fn components(&self, ns: &str) -> Option<Vec<ComponentInfo>> {
        self.inner.entry(ns).map(|e| e.table.list())
    }

    /// Whether a request to `/ns/{ns}{path}` reaches a component.
    pub fn has_component(&self, ns: &str, path: &str) -> bool {
        self.inner.entry(ns).is_some_and(|e| e.reaches(path))
    }

    /// Takes new namespaces (a config reload): every configured component is loaded again,
    /// deployments are kept, new namespaces get their stored deployments. Refused as a whole
    /// (nothing changes) when a component is invalid or the namespaces need a bigger engine
    /// than the one running. Blocking, like [`Runtime::deploy`].
    pub fn reload(&self, tenants: &Tenants) -> Result<(), RuntimeError> {
        let inner = &self.inner;
        if let Some(why) = inner.sizing.shortfall(&EngineSizing::from_tenants(tenants)) {
            return Err(RuntimeError::NeedsRestart(why));
        }
        let _serial = inner.mutate.lock().unwrap_or_else(|e| e.into_inner());
        let map = inner.build_map(tenants, &inner.map())?;
        inner.install(map);
        Ok(())
    }
}
