//! The router's listener: hyper HTTP/1.1 with keep-alive, TCP_NODELAY, at most
//! `max_connections` connections at once (more wait in the kernel's backlog), a header-read
//! timeout on every request, and graceful shutdown: stop accepting, let open exchanges
//! (streams included) finish within the drain timeout.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;

use super::proxy::{self, Route};

/// Listener settings.
#[derive(Clone, Copy, Debug)]
pub struct ListenConfig {
    pub max_connections: usize,
    pub header_timeout: Duration,
    pub drain_timeout: Duration,
}

/// Serves `listener` until `shutdown` completes; whether every exchange finished in time.
pub async fn run(
    listener: TcpListener,
    route: Arc<Route>,
    cfg: ListenConfig,
    shutdown: impl Future<Output = ()>,
) -> bool {
    let graceful = GracefulShutdown::new();
    let slots = Arc::new(tokio::sync::Semaphore::new(cfg.max_connections.max(1)));
    tokio::pin!(shutdown);
    loop {
        let slot = tokio::select! {
            s = slots.clone().acquire_owned() => s,
            () = &mut shutdown => break,
        };
        let Ok(slot) = slot else { break };
        let stream = tokio::select! {
            a = listener.accept() => match a {
                Ok((s, _)) => s,
                Err(_) => {
                    // Out of descriptors or similar: back off instead of spinning.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let route = route.clone();
        let svc = service_fn(move |req| proxy::handle(route.clone(), req));
        let conn = http1::Builder::new()
            .keep_alive(true)
            .timer(TokioTimer::new())
            .header_read_timeout(cfg.header_timeout)
            .serve_connection(TokioIo::new(stream), svc);
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            let _slot = slot;
            let _ = conn.await;
        });
    }
    drop(listener);
    tokio::time::timeout(cfg.drain_timeout, graceful.shutdown())
        .await
        .is_ok()
}
