//! [`Runtime`]: the host's component runtime. Built from the namespaces; loads (validates,
//! compiles, links) every configured and deployed component up front, then routes
//! `/ns/{namespace}/{rest}`: `rest`'s first segment selects one of the namespace's routes,
//! otherwise its default component serves every path. Deploys, deletes and reloads
//! (`deploy.rs`) swap the namespace map whole; a running request keeps the component it started
//! with.
//!
//! Invariant: a request runs in the namespace the server resolved, with that namespace's
//! limits and salt; nothing in the request can change either.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};

use bytes::Bytes;
use hyper::body::Body;
use memoria_kv::NamespaceId;
use memoria_model::chat::{CHATML_TEMPLATE, ChatTemplate};
use memoria_sched::EngineHandle;
use memoria_tenant::{Namespace, Tenants};
use wasmtime::component::Linker;
use wasmtime::{Engine, Store};

use crate::components::{Compiler, ComponentError};
use crate::config::RuntimeConfig;
use crate::engine::{EngineSizing, EpochTicker};
use crate::named::NamedSessions;
use crate::namespaces::{HostShared, NsRuntime, RuntimeStats};
use crate::persist::ComponentsDir;
use crate::serve::{error_response, serve};
use crate::table::Table;
use crate::{
    ComponentInfo, ComponentRouter, DeployError, Deployed, HttpBody, ResponseFuture, Slot,
    TenantState,
};

/// Why the runtime could not start, or a reload was refused.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("wasmtime: {0}")]
    Wasmtime(String),
    #[error("namespaces.{ns}: {source}")]
    Component { ns: String, source: ComponentError },
    #[error(
        "namespaces.{ns}: the deployed {slot} ({source}); redeploy it or delete it with the admin API, or remove the file"
    )]
    Deployed {
        ns: String,
        slot: String,
        source: ComponentError,
    },
    #[error("components folder {path}: {source}")]
    Folder {
        path: String,
        source: std::io::Error,
    },
    #[error("{0}; restart the host to apply it")]
    NeedsRestart(String),
    #[error("chat template: {0}")]
    Template(String),
    #[error("runtime config: {0}")]
    Config(String),
    #[error(
        "namespaces.{ns}.components.{route}: the route name is reserved (reserved: {reserved}); rename the route",
        reserved = crate::deploy::RESERVED_ROUTES.join(", ")
    )]
    ReservedRoute { ns: String, route: String },
}

/// One namespace as the runtime serves it.
pub(crate) struct NsEntry {
    pub rt: Arc<NsRuntime>,
    pub table: Table,
}

impl NsEntry {
    /// Whether a request to `/ns/{ns}{path}` reaches one of its components.
    pub fn reaches(&self, path: &str) -> bool {
        self.table.for_path(path).is_some()
    }
}

/// The namespaces served: entries by the host's namespace id (what a request the server
/// resolved carries), and each name's id (what the admin API and the components folder use).
/// Replaced whole by every change (requests hold the old one).
#[derive(Clone, Default)]
pub(crate) struct NsMap {
    by_id: HashMap<NamespaceId, Arc<NsEntry>>,
    ids: HashMap<String, NamespaceId>,
}

impl NsMap {
    /// Adds (or replaces) the entry of `entry.rt.ns`.
    pub fn insert(&mut self, entry: NsEntry) {
        let (id, name) = (entry.rt.ns.id, entry.rt.ns.name.clone());
        self.by_id.insert(id, Arc::new(entry));
        self.ids.insert(name, id);
    }

    /// The entry of the namespace with this id.
    pub fn by_id(&self, id: NamespaceId) -> Option<&Arc<NsEntry>> {
        self.by_id.get(&id)
    }

    /// The entry of the namespace named `name`.
    pub fn by_name(&self, name: &str) -> Option<&Arc<NsEntry>> {
        self.ids.get(name).and_then(|id| self.by_id.get(id))
    }

    /// Every entry.
    pub fn entries(&self) -> impl Iterator<Item = &Arc<NsEntry>> {
        self.by_id.values()
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }
}

pub(crate) struct Inner {
    pub engine: Engine,
    pub compiler: Compiler,
    pub namespaces: RwLock<Arc<NsMap>>,
    /// Serialises deploys, deletes and reloads.
    pub mutate: Mutex<()>,
    pub folder: Option<ComponentsDir>,
    pub sizing: EngineSizing,
    pub host: Arc<HostShared>,
    _ticker: EpochTicker,
}

/// The component runtime; cheap to clone.
#[derive(Clone)]
pub struct Runtime {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("namespaces", &self.inner.map().len())
            .finish_non_exhaustive()
    }
}

impl Inner {
    /// The current namespaces.
    pub fn map(&self) -> Arc<NsMap> {
        self.namespaces
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The entry of the namespace named `ns` (admin requests name one).
    pub fn entry(&self, ns: &str) -> Option<Arc<NsEntry>> {
        self.map().by_name(ns).cloned()
    }

    /// The entry of the namespace the server resolved (`ns.id`); none when the runtime's
    /// table does not hold that namespace (a reload between the two).
    pub fn entry_of(&self, ns: &Namespace) -> Option<Arc<NsEntry>> {
        self.map().by_id(ns.id).cloned()
    }

    /// Installs `map` and forgets compiled components no namespace uses any more.
    pub fn install(&self, map: NsMap) {
        let in_use: HashSet<[u8; 32]> = map.entries().flat_map(|e| e.table.digests()).collect();
        *self.namespaces.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(map);
        self.compiler.retain(&in_use);
    }
}

impl Runtime {
    /// Builds the engine and loads every namespace's components (configured, then those the
    /// admin API deployed into `cfg.components_dir`); the first invalid one is an error naming
    /// its namespace and file.
    pub fn new(
        tenants: &Tenants,
        engine_handle: EngineHandle,
        cfg: RuntimeConfig,
    ) -> Result<Runtime, RuntimeError> {
        let wt = |e: wasmtime::Error| RuntimeError::Wasmtime(format!("{e:#}"));
        if let Some(share) = &cfg.cpu_share {
            share.validate().map_err(RuntimeError::Config)?;
        }
        let sizing = EngineSizing::from_tenants(tenants).with_headroom(cfg.spare_instances);
        let engine = crate::engine::build(sizing).map_err(wt)?;
        let ticker = EpochTicker::start(&engine, cfg.epoch_tick)
            .map_err(|e| RuntimeError::Wasmtime(e.to_string()))?;
        let mut linker = Linker::new(&engine);
        crate::host::add_to_linker(&mut linker).map_err(wt)?;
        let template = match cfg.chat_template {
            Some(t) => t,
            None => {
                let tok = engine_handle.tokenizer();
                let piece = |t: Option<u32>| {
                    t.map(|t| String::from_utf8_lossy(&tok.token_to_piece(t, true)).into_owned())
                };
                let t = ChatTemplate::new(
                    CHATML_TEMPLATE,
                    &piece(tok.bos()).unwrap_or_default(),
                    &piece(tok.eos()).unwrap_or_default(),
                )
                .map_err(|e| RuntimeError::Template(format!("{e:#}")))?;
                Arc::new(t)
            }
        };
        let host = Arc::new(HostShared {
            engine: engine_handle,
            template,
            model_id: cfg.model_id,
            named: NamedSessions::default(),
            durable: cfg.durable_sessions,
            stats: Arc::new(RuntimeStats::default()),
            cpu_share: cfg.cpu_share,
            epoch_tick: cfg.epoch_tick,
            hit_pad: cfg.hit_pad,
            embed_pad: cfg.embed_pad,
        });
        let folder = cfg
            .components_dir
            .map(|d| {
                ComponentsDir::open(d.clone()).map_err(|source| RuntimeError::Folder {
                    path: d.display().to_string(),
                    source,
                })
            })
            .transpose()?;
        let compiler = Compiler::new(engine.clone(), linker, cfg.cache_dir);
        let inner = Inner {
            engine,
            compiler,
            namespaces: RwLock::default(),
            mutate: Mutex::new(()),
            folder,
            sizing,
            host,
            _ticker: ticker,
        };
        let map = inner.build_map(tenants, &NsMap::default())?;
        inner.install(map);
        Ok(Runtime {
            inner: Arc::new(inner),
        })
    }

    /// Validates, compiles and links a component without deploying it (what deploy checks).
    pub fn check_component(&self, label: &str, bytes: &[u8]) -> Result<(), ComponentError> {
        self.inner.compiler.load_bytes(label, bytes).map(|_| ())
    }

    /// Host-wide counters.
    pub fn stats(&self) -> &RuntimeStats {
        &self.inner.host.stats
    }

    /// Sessions currently held by guests of namespace `ns`.
    pub fn open_sessions(&self, ns: &str) -> Option<usize> {
        self.inner.entry(ns).map(|e| e.rt.open_sessions())
    }

    /// The wasmtime engine (benchmarks compile their own probes with it).
    pub fn wasmtime_engine(&self) -> &Engine {
        &self.inner.engine
    }

    /// The linker with every host import (benchmarks instantiate probes with it).
    pub fn linker(&self) -> &Linker<TenantState> {
        self.inner.compiler.linker()
    }

    /// A fresh store for namespace `ns` with its limits, as a request gets.
    pub fn new_store(&self, ns: &str) -> Option<wasmtime::Result<Store<TenantState>>> {
        let e = self.inner.entry(ns)?;
        Some(crate::serve::new_store(
            &self.inner.engine,
            e.rt.clone(),
            self.inner.sizing.fuel,
        ))
    }

    /// Serves one request of namespace `ns` (by name); `path` is what follows `/ns/{ns}`.
    pub async fn handle_request<B>(
        &self,
        ns: &str,
        path: &str,
        req: hyper::Request<B>,
    ) -> hyper::Response<HttpBody>
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<wasmtime_wasi_http::Error>,
    {
        let Some(entry) = self.inner.entry(ns) else {
            return error_response(404, "not_found", format!("no namespace {ns:?}"));
        };
        self.serve_entry(&entry, path, req).await
    }

    /// Serves one request with a namespace's entry (its component table and limits).
    async fn serve_entry<B>(
        &self,
        entry: &NsEntry,
        path: &str,
        req: hyper::Request<B>,
    ) -> hyper::Response<HttpBody>
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<wasmtime_wasi_http::Error>,
    {
        let Some(pre) = entry.table.for_path(path).cloned() else {
            let ns = &entry.rt.ns.name;
            return error_response(
                404,
                "not_found",
                format!("namespace {ns:?} has no component for {path}"),
            );
        };
        serve(
            self.inner.engine.clone(),
            entry.rt.clone(),
            pre,
            self.inner.sizing.fuel,
            req,
        )
        .await
    }
}

impl ComponentRouter for Runtime {
    fn route(
        &self,
        ns: &Namespace,
        path: &str,
        req: hyper::Request<hyper::body::Incoming>,
    ) -> Result<ResponseFuture, hyper::Request<hyper::body::Incoming>> {
        let Some((entry, pre)) = self
            .inner
            .entry_of(ns)
            .and_then(|e| e.table.for_path(path).cloned().map(|pre| (e, pre)))
        else {
            return Err(req);
        };
        Ok(Box::pin(serve(
            self.inner.engine.clone(),
            entry.rt.clone(),
            pre,
            self.inner.sizing.fuel,
            req,
        )))
    }

    fn has_component(&self, ns: &Namespace, path: &str) -> bool {
        self.inner.entry_of(ns).is_some_and(|e| e.reaches(path))
    }

    fn components(&self, ns: &str) -> Option<Vec<ComponentInfo>> {
        Runtime::components(self, ns)
    }

    fn deploy(&self, ns: &str, slot: Slot, bytes: &[u8]) -> Result<Deployed, DeployError> {
        Runtime::deploy(self, ns, slot, bytes)
    }

    fn remove(&self, ns: &str, slot: &Slot) -> Result<bool, DeployError> {
        Runtime::remove(self, ns, slot)
    }

    fn reload(&self, tenants: &Tenants) -> Result<(), RuntimeError> {
        Runtime::reload(self, tenants)
    }

    fn stats(&self) -> &RuntimeStats {
        Runtime::stats(self)
    }
}
