//! The engine's staging thread: a fresh session whose prompt has blocks the hot pool lacks
//! waits while this thread has the store read, verify and decode them (see
//! `memoria_kv::staging`); the other sessions keep decoding meanwhile, and the step then only
//! links blocks already in RAM. Invariant: every request sent gets exactly one answer, an
//! empty set when the store failed, so no session waits forever.

use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, TryRecvError, channel};
use std::thread::JoinHandle;

use memoria_kv::backing::HandOff;
use memoria_kv::staging::{StageRequest, Staged, Stager};

use crate::session::SessionId;

/// Where a fresh session stands with staging.
#[derive(Debug, Default)]
pub(crate) enum Stage {
    /// Not asked yet.
    #[default]
    Idle,
    /// A request is out; the session is not planned until the answer is in.
    Waiting,
    /// The answer: the blocks its first prefix match takes from RAM.
    Ready(Box<Staged>),
}

pub(crate) struct StageThread {
    tx: Option<Sender<(SessionId, StageRequest, u64)>>,
    rx: Receiver<(SessionId, Staged)>,
    thread: Option<JoinHandle<()>>,
    /// Requests sent and not yet answered.
    out: usize,
}

impl StageThread {
    /// Starts the thread; `None` when it cannot be started (reads then happen in the match).
    /// Before each read it waits until `intake` has handled every job sent before the request
    /// (so a block evicted just before is found in the tiers).
    pub fn start(stager: Arc<dyn Stager>, intake: Option<Arc<dyn HandOff>>) -> Option<StageThread> {
        let (tx, jobs) = channel::<(SessionId, StageRequest, u64)>();
        let (done, rx) = channel();
        let thread = std::thread::Builder::new()
            .name("memoria-stage".into())
            .spawn(move || {
                for (id, req, point) in jobs {
                    if let Some(i) = &intake {
                        i.wait_handled(point);
                    }
                    let staged = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        stager.stage(req)
                    }))
                    .unwrap_or_else(|p| {
                        // The session then computes what it would have read.
                        eprintln!(
                            "memoria: staging a session's blocks panicked ({}); it recomputes them",
                            super::guard::panic_message(p.as_ref())
                        );
                        Staged::default()
                    });
                    if done.send((id, staged)).is_err() {
                        break;
                    }
                }
            })
            .ok()?;
        Some(StageThread {
            tx: Some(tx),
            rx,
            thread: Some(thread),
            out: 0,
        })
    }

    /// Sends a request to read after the intake's job `point`; false when the thread is gone
    /// (the session then matches hot blocks only).
    pub fn send(&mut self, id: SessionId, req: StageRequest, point: u64) -> bool {
        let sent = self
            .tx
            .as_ref()
            .is_some_and(|tx| tx.send((id, req, point)).is_ok());
        self.out += usize::from(sent);
        sent
    }

    /// Requests not answered yet.
    pub fn outstanding(&self) -> usize {
        self.out
    }

    /// An answer, if one is in.
    pub fn try_recv(&mut self) -> Option<(SessionId, Staged)> {
        match self.rx.try_recv() {
            Ok(a) => {
                self.out = self.out.saturating_sub(1);
                Some(a)
            }
            Err(TryRecvError::Empty) => None,
            Err(TryRecvError::Disconnected) => {
                // The thread ended: nothing more will come.
                self.out = 0;
                None
            }
        }
    }

    /// Waits up to `limit` for an answer.
    pub fn recv_timeout(&mut self, limit: std::time::Duration) -> Option<(SessionId, Staged)> {
        match self.rx.recv_timeout(limit) {
            Ok(a) => {
                self.out = self.out.saturating_sub(1);
                Some(a)
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => None,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                self.out = 0;
                None
            }
        }
    }
}

impl Drop for StageThread {
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
