//! One tenant request: take an instance slot of the namespace, build a fresh store with the
//! namespace's limits (memory cap, epoch deadline from `wall_time_ms`, optional fuel),
//! instantiate the pre-linked component and call its wasi:http handler. A trap, timeout or
//! memory-cap failure becomes a 500 for this request only. Every poll of the guest is measured
//! and charged to the namespace (`fair`); at each epoch tick a guest yields to the executor,
//! and sleeps instead when its namespace is over its CPU share.
//!
//! Invariant: the store (and so every session the guest opened) lives in the spawned task and
//! is dropped when the handler returns, fails or runs out of time.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Body;
use tokio::time::Instant;
use wasmtime::component::Resource;
use wasmtime::{Engine, Store, UpdateDeadline};
use wasmtime_wasi_http::WasiHttpView;

use crate::fail_log::FailureLog;
use wasmtime_wasi_http::p2::bindings::ProxyPre;
use wasmtime_wasi_http::p2::bindings::http::types::Scheme;

use crate::errors::describe_failure;
use crate::fair::meter::metered;
use crate::namespaces::NsRuntime;
use crate::{BodyError, HttpBody, TenantState};

/// An error answer in the OpenAI shape the rest of the host uses
/// (`{"error": {"message", "type", "code"}}`), for requests that fail before or inside a
/// component: `code` names the cause; 503s carry `Retry-After`.
pub fn error_response(status: u16, code: &str, message: String) -> hyper::Response<HttpBody> {
    let status =
        hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    let kind = match status.as_u16() {
        404 => "not_found_error",
        400..=499 => "invalid_request_error",
        _ => "server_error",
    };
    let text = serde_json::json!({"error": {
        "message": message.trim_end(),
        "type": kind,
        "code": code,
    }})
    .to_string();
    let body = Full::new(Bytes::from(text))
        .map_err(|n: std::convert::Infallible| match n {})
        .boxed_unsync();
    let mut resp = hyper::Response::new(body);
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    h.insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    if status == hyper::StatusCode::SERVICE_UNAVAILABLE {
        h.insert(
            hyper::header::RETRY_AFTER,
            hyper::header::HeaderValue::from_static("1"),
        );
    }
    resp
}

/// Logs a failed guest request on stderr, at most one line per namespace per second (see
/// [`FailureLog`]).
fn log_failure(ns: &str, why: &str) {
    use std::sync::{LazyLock, Mutex};
    static LOG: LazyLock<Mutex<FailureLog>> = LazyLock::new(Default::default);
    let line =
        LOG.lock()
            .unwrap_or_else(|p| p.into_inner())
            .line(ns, why, std::time::Instant::now());
    if let Some(line) = line {
        eprintln!("{line}");
    }
}

/// `d` from now, saturating: a configured limit too large for the clock (`wall_time_ms` near
/// `u64::MAX`) means "30 years", never a panic.
pub fn deadline_after(d: Duration) -> std::time::Instant {
    let now = std::time::Instant::now();
    now.checked_add(d)
        .or_else(|| now.checked_add(Duration::from_secs(30 * 365 * 86_400)))
        .unwrap_or(now)
}

/// A new store for `ns` with its limits applied.
pub fn new_store(
    engine: &Engine,
    ns: Arc<NsRuntime>,
    fuel: bool,
) -> wasmtime::Result<Store<TenantState>> {
    let limits = &ns.ns.spec.limits;
    let deadline = deadline_after(Duration::from_millis(limits.wall_time_ms));
    let fuel_budget = limits.fuel.unwrap_or(u64::MAX);
    let mut store = Store::new(engine, TenantState::new(ns, deadline));
    store.limiter(|s| &mut s.limiter);
    if fuel {
        store.set_fuel(fuel_budget)?;
        store.fuel_async_yield_interval(Some(100_000))?;
    }
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(|ctx| Ok(on_epoch(ctx.data())));
    Ok(store)
}

/// What a guest does at an epoch tick: stop at the deadline, sleep while its namespace is over
/// its CPU share (never past the deadline; only inside a tokio runtime, which has the timer),
/// otherwise yield so the worker serves other tasks.
fn on_epoch(st: &TenantState) -> UpdateDeadline {
    let now = std::time::Instant::now();
    if now >= st.deadline {
        return UpdateDeadline::Interrupt;
    }
    st.meter.charge_now();
    if tokio::runtime::Handle::try_current().is_err() {
        return UpdateDeadline::Yield(1);
    }
    match st.ns.cpu.pause(now, st.deadline) {
        Some(d) => UpdateDeadline::YieldCustom(1, Box::pin(tokio::time::sleep(d))),
        None => UpdateDeadline::Yield(1),
    }
}

/// Runs `req` through the component `pre` in namespace `ns`.
pub async fn serve<B>(
    engine: Engine,
    ns: Arc<NsRuntime>,
    pre: ProxyPre<TenantState>,
    fuel: bool,
    req: hyper::Request<B>,
) -> hyper::Response<HttpBody>
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<wasmtime_wasi_http::Error>,
{
    let stats = ns.host.stats.clone();
    let counters = ns.counters.clone();
    stats.requests.fetch_add(1, Relaxed);
    counters.requests.fetch_add(1, Relaxed);
    let wall = Duration::from_millis(ns.ns.spec.limits.wall_time_ms);
    let deadline = Instant::from_std(deadline_after(wall));
    let permit = match tokio::time::timeout_at(deadline, ns.instances.clone().acquire_owned()).await
    {
        Ok(Ok(p)) => p,
        _ => {
            let max = ns.ns.spec.limits.max_instances;
            counters.busy.fetch_add(1, Relaxed);
            return error_response(
                503,
                "namespace_busy",
                format!("namespace busy: all {max} instances in use (max_instances)"),
            );
        }
    };
    let name = ns.ns.name.clone();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let mut store = match new_store(&engine, ns, fuel) {
        Ok(s) => s,
        Err(e) => {
            return error_response(
                500,
                "sandbox_failed",
                format!("creating the sandbox: {e:#}"),
            );
        }
    };
    let prepared = (|| -> wasmtime::Result<_> {
        let mut http = store.data_mut().http();
        let req = http.new_incoming_request(Scheme::Http, req)?;
        let out = http.new_response_outparam(tx)?;
        Ok((req, out))
    })();
    let (req, out): (Resource<_>, Resource<_>) = match prepared {
        Ok(p) => p,
        Err(e) => {
            return error_response(
                400,
                "request_not_accepted",
                format!("request not accepted: {e:#}"),
            );
        }
    };
    let meter = store.data().meter.clone();
    let task = tokio::spawn(async move {
        let _permit = permit;
        let run = async {
            let proxy = pre.instantiate_async(&mut store).await?;
            proxy
                .wasi_http_incoming_handler()
                .call_handle(&mut store, req, out)
                .await
        };
        let r = tokio::time::timeout_at(deadline, metered(meter, run)).await;
        let failure = match r {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(describe_failure(&e, store.data().limiter.hit, false)),
            Err(_) => Some(describe_failure(
                &wasmtime::format_err!("timeout"),
                None,
                true,
            )),
        };
        drop(store);
        failure
    });
    let outcome = rx.await;
    match outcome {
        Ok(Ok(resp)) => resp.map(|body| {
            body.map_err(|e| -> BodyError { format!("{e:?}").into() })
                .boxed_unsync()
        }),
        Ok(Err(code)) => {
            error_response(500, "component_error", format!("component error: {code:?}"))
        }
        Err(_) => {
            let why = match task.await {
                Ok(Some(why)) => why,
                Ok(None) => "the component returned without sending a response".into(),
                Err(e) => format!("the request task failed: {e}"),
            };
            stats.failed.fetch_add(1, Relaxed);
            counters.failed.fetch_add(1, Relaxed);
            log_failure(&name, &why);
            error_response(500, "component_failed", why)
        }
    }
}
