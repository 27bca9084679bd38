//! [`Runtime`]: the host's component runtime. Built once from the namespaces; loads (validates,
//! compiles, links) every configured component up front, then routes `/ns/{namespace}/{rest}`:
//! `rest`'s first segment selects one of the namespace's `components`, otherwise its single
//! `component` serves every path.
//!
//! Invariant: a request runs in the namespace the server resolved, with that namespace's
//! limits and salt; nothing in the request can change either.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use bytes::Bytes;
use hyper::body::Body;
use memoria_model::chat::{CHATML_TEMPLATE, ChatTemplate};
use memoria_sched::EngineHandle;
use memoria_tenant::{Namespace, Tenants};
use wasmtime::component::Linker;
use wasmtime::{Engine, Store};
use wasmtime_wasi_http::p2::bindings::ProxyPre;

use crate::components::{Compiler, ComponentError};
use crate::config::RuntimeConfig;
use crate::engine::{EngineSizing, EpochTicker};
use crate::named::NamedSessions;
use crate::namespaces::{HostShared, NsRuntime, RuntimeStats};
use crate::serve::{serve, text_response};
use crate::{ComponentRouter, HttpBody, ResponseFuture, TenantState};

/// Why the runtime could not start.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("wasmtime: {0}")]
    Wasmtime(String),
    #[error("namespaces.{ns}: {source}")]
    Component { ns: String, source: ComponentError },
    #[error("chat template: {0}")]
    Template(String),
}

struct NsEntry {
    rt: Arc<NsRuntime>,
    default: Option<ProxyPre<TenantState>>,
    routes: BTreeMap<String, ProxyPre<TenantState>>,
}

struct Inner {
    engine: Engine,
    compiler: Compiler,
    namespaces: HashMap<String, NsEntry>,
    host: Arc<HostShared>,
    fuel: bool,
    _ticker: EpochTicker,
}

/// The component runtime; cheap to clone.
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("namespaces", &self.inner.namespaces.len())
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// Builds the engine and loads every namespace's components; the first invalid one is an
    /// error naming its namespace and file.
    pub fn new(
        tenants: &Tenants,
        engine_handle: EngineHandle,
        cfg: RuntimeConfig,
    ) -> Result<Runtime, RuntimeError> {
        let wt = |e: wasmtime::Error| RuntimeError::Wasmtime(format!("{e:#}"));
        let sizing = EngineSizing::from_tenants(tenants);
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
        });
        let compiler = Compiler::new(engine.clone(), linker, cfg.cache_dir);
        let mut namespaces = HashMap::new();
        for ns in tenants.iter() {
            let load = |p: &std::path::Path| {
                compiler
                    .load_file(p)
                    .map_err(|source| RuntimeError::Component {
                        ns: ns.name.clone(),
                        source,
                    })
            };
            let default = ns.spec.component.as_deref().map(load).transpose()?;
            let mut routes = BTreeMap::new();
            for (key, path) in &ns.spec.components {
                routes.insert(key.clone(), load(path)?);
            }
            let rt = Arc::new(NsRuntime::new(ns.clone(), host.clone()));
            namespaces.insert(
                ns.name.clone(),
                NsEntry {
                    rt,
                    default,
                    routes,
                },
            );
        }
        Ok(Runtime {
            inner: Arc::new(Inner {
                engine,
                compiler,
                namespaces,
                host,
                fuel: sizing.fuel,
                _ticker: ticker,
            }),
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
        self.inner.namespaces.get(ns).map(|e| e.rt.open_sessions())
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
        let e = self.inner.namespaces.get(ns)?;
        Some(crate::serve::new_store(
            &self.inner.engine,
            e.rt.clone(),
            self.inner.fuel,
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
        let Some(entry) = self.inner.namespaces.get(ns) else {
            return text_response(404, format!("no namespace {ns:?}\n"));
        };
        let first = path
            .trim_start_matches('/')
            .split(['/', '?'])
            .next()
            .unwrap_or("");
        let Some(pre) = entry.routes.get(first).or(entry.default.as_ref()).cloned() else {
            return text_response(
                404,
                format!("namespace {ns:?} has no component for /{first}\n"),
            );
        };
        serve(
            self.inner.engine.clone(),
            entry.rt.clone(),
            pre,
            self.inner.fuel,
            req,
        )
        .await
    }
}

impl ComponentRouter for Runtime {
    fn handle(
        &self,
        ns: Arc<Namespace>,
        path: String,
        req: hyper::Request<hyper::body::Incoming>,
    ) -> ResponseFuture {
        let rt = self.clone();
        Box::pin(async move {
            match rt.inner.namespaces.get(&ns.name) {
                Some(e) if e.rt.ns.id == ns.id => rt.handle_request(&ns.name, &path, req).await,
                _ => text_response(404, format!("namespace {:?} has no components\n", ns.name)),
            }
        })
    }
}
