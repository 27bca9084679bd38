//! Idle connections to one host, kept for the next request: a connection goes back once its
//! response body was read to the end and hyper says it can take another request; one taken out
//! is dropped when it has been idle longer than [`IDLE_FOR`] (well under a host's 30 s
//! keep-alive, so the host rarely closes one first) or is already closed. A request on a reused
//! connection that fails without an answer (the host closed it meanwhile) is sent again on a
//! fresh one: for a host that died mid-request, a repeat of a generation is harmless, and the
//! fresh connect then fails over to the next host.

use std::sync::Mutex;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use super::upstream::Sender;

/// The longest a connection stays idle in the pool.
pub const IDLE_FOR: Duration = Duration::from_secs(10);

/// The most idle connections kept per host.
pub const MAX_IDLE: usize = 32;

/// How long a finished exchange may take to make its connection ready again.
const READY_WITHIN: Duration = Duration::from_secs(1);

/// One host's idle connections and how they were used.
#[derive(Debug, Default)]
pub struct IdlePool {
    idle: Mutex<Vec<(Sender, Instant)>>,
    /// Connections opened to the host.
    pub connects: AtomicU64,
    /// Requests answered on a connection taken from the pool.
    pub reuses: AtomicU64,
    /// Pooled connections the host had closed (the request went again on a fresh one).
    pub stale: AtomicU64,
}

impl IdlePool {
    /// The most recently idled connection that can still take a request.
    pub fn take(&self) -> Option<Sender> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        while let Some((sender, since)) = idle.pop() {
            if since.elapsed() < IDLE_FOR && sender.is_ready() && !sender.is_closed() {
                return Some(sender);
            }
        }
        None
    }

    /// Keeps `sender` when it can take another request and the pool has room.
    fn keep(&self, sender: Sender) {
        if sender.is_closed() || !sender.is_ready() {
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        idle.retain(|(s, since)| since.elapsed() < IDLE_FOR && !s.is_closed());
        if idle.len() < MAX_IDLE {
            idle.push((sender, Instant::now()));
        }
    }

    /// Gives back the connection of an exchange whose response was read to the end, once it
    /// is ready for another request (within a second; otherwise it is dropped).
    pub fn give_back(pool: std::sync::Arc<super::table::Table>, backend: usize, sender: Sender) {
        tokio::spawn(async move {
            let mut sender = sender;
            if let Ok(Ok(())) = tokio::time::timeout(READY_WITHIN, sender.ready()).await
                && let Some(b) = pool.backends.get(backend)
            {
                b.pool.keep(sender);
            }
        });
    }

    /// Idle connections held now.
    pub fn idle(&self) -> usize {
        self.idle.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}
