//! The listeners (one per address, served alike): hyper HTTP/1.1 with keep-alive on tokio, TCP_NODELAY on every accepted socket,
//! at most `max_connections` connections (more wait up to a quarter second for one to end, then
//! are answered 503 and closed), each
//! connection's first request head checked before hyper (`preface.rs`) and every later one too
//! (`framing.rs`, which also times out slow bodies), a header-read timeout on every request, and
//! graceful shutdown — stop accepting, let in-flight requests
//! (streams included) finish within the drain timeout, then stop the engine, which finishes its
//! running generations. Invariant: after `run` returns, no connection is served and the engine
//! thread has exited.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;

use crate::error::ApiError;
use crate::framing::{Framed, Limits};
use crate::preface::{MAX_HEAD_BYTES, answer_and_close, first_head, refusal_bytes};
use crate::state::{AppState, ServerParts};

/// A bound server, not yet serving.
pub struct Server {
    /// One or more (`--host a,b`), accepted from alike.
    listeners: Vec<TcpListener>,
    state: Arc<AppState>,
}

/// How shutdown went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShutdownReport {
    /// Every connection finished within the drain timeout.
    pub drained: bool,
}

impl Server {
    /// Binds `addr` (port 0: any free port).
    pub async fn bind(addr: SocketAddr, parts: ServerParts) -> std::io::Result<Server> {
        Server::bind_all(&[addr], parts).await
    }

    /// Binds every address of `addrs` (at least one); with port 0 the first picks a free port
    /// and the others bind that port too.
    pub async fn bind_all(addrs: &[SocketAddr], parts: ServerParts) -> std::io::Result<Server> {
        let mut listeners: Vec<TcpListener> = Vec::with_capacity(addrs.len());
        for &addr in addrs {
            let mut addr = addr;
            if let Some(first) = listeners.first()
                && addr.port() == 0
            {
                addr.set_port(first.local_addr()?.port());
            }
            listeners.push(TcpListener::bind(addr).await?);
        }
        if listeners.is_empty() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "no address to bind",
            ));
        }
        Ok(Server {
            listeners,
            state: Arc::new(AppState::new(parts)),
        })
    }

    /// The (first) address actually bound.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listeners[0].local_addr()
    }

    /// Every address actually bound.
    pub fn local_addrs(&self) -> std::io::Result<Vec<SocketAddr>> {
        self.listeners.iter().map(TcpListener::local_addr).collect()
    }

    /// The shared state (for start-up tasks such as preloading prefixes).
    pub fn state(&self) -> &Arc<AppState> {
        &self.state
    }

    /// Serves until `shutdown` completes, then drains and stops the engine.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> ShutdownReport {
        let Server { listeners, state } = self;
        let graceful = GracefulShutdown::new();
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        tokio::pin!(shutdown);
        let cfg = &state.config;
        let header_timeout = cfg.header_timeout;
        let limits = Limits {
            max_head_bytes: MAX_HEAD_BYTES,
            body_timeout: cfg.body_timeout,
            min_body_rate: cfg.min_body_rate.max(1),
        };
        let slots = Arc::new(tokio::sync::Semaphore::new(cfg.max_connections.max(1)));
        let busy: Arc<[u8]> = refusal_bytes(&over_capacity(cfg.max_connections)).into();
        let waiters = Arc::new(tokio::sync::Semaphore::new(cfg.max_connections.max(1)));
        loop {
            tokio::select! {
                accepted = accept_any(&listeners) => {
                    let stream = match accepted {
                        Ok((stream, _peer)) => stream,
                        Err(_) => {
                            // Out of descriptors or similar: back off instead of spinning.
                            tokio::time::sleep(Duration::from_millis(20)).await;
                            continue;
                        }
                    };
                    let _ = stream.set_nodelay(true);
                    // At the limit, a connection waits a moment for one that is ending (a
                    // client that closed its last connection before opening this one): at most
                    // as many wait as may be served, the rest are refused at once.
                    let slot = slots.clone().try_acquire_owned().ok();
                    let waiting = match slot {
                        Some(_) => None,
                        None => match waiters.clone().try_acquire_owned() {
                            Ok(w) => Some(w),
                            Err(_) => {
                                state.metrics.reject("too_many_connections");
                                let busy = busy.clone();
                                tokio::spawn(async move {
                                    answer_and_close(stream, &busy, Duration::from_millis(200))
                                        .await;
                                });
                                continue;
                            }
                        },
                    };
                    let st = state.clone();
                    let watcher = graceful.watcher();
                    let mut stop = stop_rx.clone();
                    let (slots, busy) = (slots.clone(), busy.clone());
                    tokio::spawn(async move {
                        let slot = match slot {
                            Some(s) => s,
                            None => {
                                let got =
                                    tokio::time::timeout(SLOT_WAIT, slots.acquire_owned()).await;
                                drop(waiting);
                                match got {
                                    Ok(Ok(s)) => s,
                                    _ => {
                                        st.metrics.reject("too_many_connections");
                                        answer_and_close(
                                            stream,
                                            &busy,
                                            Duration::from_millis(200),
                                        )
                                        .await;
                                        return;
                                    }
                                }
                            }
                        };
                        let _slot = slot;
                        let head = tokio::select! {
                            s = first_head(stream, header_timeout) => s,
                            _ = stop.wait_for(|stopping| *stopping) => None,
                        };
                        let Some(stream) = head else { return };
                        let svc = service_fn(move |req| crate::router::handle(st.clone(), req));
                        // Title-Case header names, as llama-server's (clients that read
                        // headers into a plain dict look them up that way).
                        let conn = http1::Builder::new()
                            .keep_alive(true)
                            .title_case_headers(true)
                            .timer(TokioTimer::new())
                            .header_read_timeout(header_timeout)
                            .serve_connection(TokioIo::new(Framed::new(stream, limits)), svc);
                        let _ = watcher.watch(conn).await;
                    });
                }
                () = &mut shutdown => break,
            }
        }
        drop(listeners);
        state.shutting_down.store(true, Relaxed);
        // Tool calls in flight end now rather than hold the drain.
        if let Some(t) = &state.config.tools {
            t.shutdown();
        }
        let _ = stop_tx.send(true);
        let drained = tokio::time::timeout(state.config.shutdown_timeout, graceful.shutdown())
            .await
            .is_ok();
        let engine = state.engine.clone();
        let _ = tokio::task::spawn_blocking(move || engine.shutdown()).await;
        ShutdownReport { drained }
    }
}

/// The next connection on any of `listeners`.
async fn accept_any(
    listeners: &[TcpListener],
) -> std::io::Result<(tokio::net::TcpStream, SocketAddr)> {
    std::future::poll_fn(|cx| {
        for l in listeners {
            if let std::task::Poll::Ready(r) = l.poll_accept(cx) {
                return std::task::Poll::Ready(r);
            }
        }
        std::task::Poll::Pending
    })
    .await
}

/// How long a connection over `server.max_connections` waits for another to end.
const SLOT_WAIT: Duration = Duration::from_millis(250);

/// The answer to a connection over `server.max_connections`.
fn over_capacity(max: usize) -> ApiError {
    ApiError::unavailable(format!(
        "the server is at its connection limit (server.max_connections = {max}); retry shortly"
    ))
    .with_code("too_many_connections")
}

/// Completes on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
