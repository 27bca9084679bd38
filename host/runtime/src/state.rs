//! [`TenantState`], the data of one request's store: the namespace it runs for, its resource
//! table (sessions and streams the guest holds), WASI and wasi:http contexts with outbound HTTP
//! denied, the memory limiter, the request's token budget and its CPU meter.
//!
//! Invariant: everything reachable from here belongs to `ns`; nothing is shared with another
//! store except through the engine, which checks the namespace on every call.

use std::sync::Arc;
use std::time::Instant;

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpHooks, WasiHttpView};

use crate::fair::meter::SliceMeter;
use crate::limiter::MemoryLimiter;
use crate::namespaces::NsRuntime;

/// Store data of one tenant request.
pub struct TenantState {
    pub(crate) ns: Arc<NsRuntime>,
    pub(crate) table: ResourceTable,
    pub(crate) limiter: MemoryLimiter,
    /// When the request must end (epoch callback and host calls check it).
    pub(crate) deadline: Instant,
    /// Tokens this request may still generate (`max_tokens_per_request`).
    pub(crate) tokens_left: usize,
    /// Measures the request's slices and charges them to `ns` (epoch callback, `serve`).
    pub(crate) meter: Arc<SliceMeter>,
    wasi: WasiCtx,
    http: WasiHttpCtx,
    hooks: DenyOutbound,
}

impl std::fmt::Debug for TenantState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TenantState")
            .field("ns", &self.ns.ns.name)
            .finish_non_exhaustive()
    }
}

impl TenantState {
    pub(crate) fn new(ns: Arc<NsRuntime>, deadline: Instant) -> TenantState {
        let limits = &ns.ns.spec.limits;
        TenantState {
            limiter: MemoryLimiter::new(limits.memory_bytes),
            tokens_left: limits.max_tokens_per_request,
            deadline,
            meter: Arc::new(SliceMeter::new(ns.cpu.clone())),
            ns,
            table: ResourceTable::new(),
            wasi: WasiCtx::builder().build(),
            http: WasiHttpCtx::new(),
            hooks: DenyOutbound,
        }
    }

    /// The namespace's `max_host_call_bytes`.
    pub(crate) fn max_call_bytes(&self) -> usize {
        self.ns.ns.spec.limits.max_host_call_bytes
    }
}

impl WasiView for TenantState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for TenantState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.hooks,
        }
    }
}

/// Outbound HTTP is denied for every tenant.
#[derive(Debug, Clone, Copy)]
struct DenyOutbound;

type SendResult = wasmtime_wasi_http::Result<(
    http::Response<wasmtime_wasi_http::WasiBody>,
    Box<dyn Future<Output = Result<(), wasmtime_wasi_http::Error>> + Send>,
)>;

impl WasiHttpHooks for DenyOutbound {
    fn send_request(
        &mut self,
        _request: http::Request<wasmtime_wasi_http::WasiBody>,
        _options: Option<wasmtime_wasi_http::RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), wasmtime_wasi_http::Error>> + Send>,
    ) -> Box<dyn Future<Output = SendResult> + Send> {
        Box::new(async { Err(wasmtime_wasi_http::Error::HttpRequestDenied) })
    }
}
