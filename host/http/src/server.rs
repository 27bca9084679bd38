//! The listener: hyper HTTP/1.1 with keep-alive on tokio, TCP_NODELAY on every accepted socket,
//! each connection's first request head checked before hyper (`preface.rs`), a header-read
//! timeout, and graceful shutdown — stop accepting, let in-flight requests
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

use crate::preface::first_head;
use crate::state::{AppState, ServerParts};

/// How long a client may take to send a request head.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// A bound server, not yet serving.
pub struct Server {
    listener: TcpListener,
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
        let listener = TcpListener::bind(addr).await?;
        Ok(Server {
            listener,
            state: Arc::new(AppState::new(parts)),
        })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The shared state (for start-up tasks such as preloading prefixes).
    pub fn state(&self) -> &Arc<AppState> {
        &self.state
    }

    /// Serves until `shutdown` completes, then drains and stops the engine.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> ShutdownReport {
        let Server { listener, state } = self;
        let graceful = GracefulShutdown::new();
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                accepted = listener.accept() => {
                    let Ok((stream, _peer)) = accepted else { continue };
                    let _ = stream.set_nodelay(true);
                    let st = state.clone();
                    let watcher = graceful.watcher();
                    let mut stop = stop_rx.clone();
                    tokio::spawn(async move {
                        let head = tokio::select! {
                            s = first_head(stream, HEADER_READ_TIMEOUT) => s,
                            _ = stop.wait_for(|stopping| *stopping) => None,
                        };
                        let Some(stream) = head else { return };
                        let svc = service_fn(move |req| crate::router::handle(st.clone(), req));
                        let conn = http1::Builder::new()
                            .keep_alive(true)
                            .timer(TokioTimer::new())
                            .header_read_timeout(HEADER_READ_TIMEOUT)
                            .serve_connection(TokioIo::new(stream), svc);
                        let _ = watcher.watch(conn).await;
                    });
                }
                () = &mut shutdown => break,
            }
        }
        drop(listener);
        state.shutting_down.store(true, Relaxed);
        let _ = stop_tx.send(true);
        let drained = tokio::time::timeout(state.config.shutdown_timeout, graceful.shutdown())
            .await
            .is_ok();
        let engine = state.engine.clone();
        let _ = tokio::task::spawn_blocking(move || engine.shutdown()).await;
        ShutdownReport { drained }
    }
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
