//! memoria-runtime: runs each namespace's WebAssembly component for the `/ns/{namespace}/...`
//! routes. The HTTP server only sees [`ComponentRouter`]; [`Runtime`] implements it with one
//! wasmtime engine (pooling allocator, epoch interruption), components compiled once, and a
//! fresh sandboxed store per request whose host functions (`memoria:llm`) only ever reach the
//! caller's namespace.
//!
//! Invariants: the namespace (and so the K/V salt) comes from the server's routing, never from
//! the guest; every guest-visible handle lives in the store's resource table; a trap ends only
//! its own request.

mod bindings;
mod bounded;
mod components;
mod config;
mod deploy;
mod engine;
mod errors;
mod fail_log;
mod fair;
mod host;
mod limiter;
mod named;
mod namespaces;
mod persist;
mod router;
mod serve;
mod state;
mod table;

use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use memoria_tenant::Namespace;

pub use components::{ComponentError, validate_component};
pub use config::RuntimeConfig;
pub use deploy::{DeployError, Deployed};
pub use fair::CpuShare;
pub use namespaces::{NsCounters, NsCountersSnapshot, RuntimeStats};
pub use router::{Runtime, RuntimeError};
pub use state::TenantState;
pub use table::{BadRoute, ComponentInfo, Origin, Slot};

/// Error type of streamed response bodies.
pub type BodyError = Box<dyn std::error::Error + Send + Sync>;

/// A response body the server can stream to the client.
pub type HttpBody = UnsyncBoxBody<Bytes, BodyError>;

/// A boxed future of a response.
pub type ResponseFuture = Pin<Box<dyn Future<Output = hyper::Response<HttpBody>> + Send>>;

/// Serves a namespace's tenant routes and manages its components. The server has already
/// authenticated the caller and resolved the namespace from its routing table.
pub trait ComponentRouter: Send + Sync + 'static {
    /// The namespace's component for `path` (what follows `/ns/{namespace}`), resolved once:
    /// the future that serves `req` with it, or `req` back when no component of the namespace
    /// takes the path.
    #[allow(
        clippy::result_large_err,
        reason = "the request goes back to the caller as it came, not boxed"
    )]
    fn route(
        &self,
        ns: &Namespace,
        path: &str,
        req: hyper::Request<hyper::body::Incoming>,
    ) -> Result<ResponseFuture, hyper::Request<hyper::body::Incoming>>;

    /// Whether `/ns/{ns}{path}` reaches a component of the namespace the server resolved.
    fn has_component(&self, ns: &Namespace, path: &str) -> bool;

    /// The namespace's components (None: unknown namespace).
    fn components(&self, ns: &str) -> Option<Vec<ComponentInfo>>;

    /// Deploys or replaces one component (validated, compiled, persisted). Blocking.
    fn deploy(&self, ns: &str, slot: Slot, bytes: &[u8]) -> Result<Deployed, DeployError>;

    /// Deletes one component; `Ok(false)` when the slot had none. Blocking.
    fn remove(&self, ns: &str, slot: &Slot) -> Result<bool, DeployError>;

    /// Takes reloaded namespaces, reloading their configured components. Blocking.
    fn reload(&self, tenants: &memoria_tenant::Tenants) -> Result<(), RuntimeError>;

    /// Counters of component requests and deploys.
    fn stats(&self) -> &RuntimeStats;
}

/// A request body built in memory, for callers that are not a hyper connection (tests, benches,
/// internal requests): `Runtime::handle_request(ns, path, request_with(full_body(bytes)))`.
pub type LocalBody = UnsyncBoxBody<Bytes, wasmtime_wasi_http::Error>;

/// `bytes` as a [`LocalBody`].
pub fn full_body(bytes: impl Into<Bytes>) -> LocalBody {
    use http_body_util::BodyExt;
    http_body_util::Full::new(bytes.into())
        .map_err(|n: std::convert::Infallible| match n {})
        .boxed_unsync()
}
