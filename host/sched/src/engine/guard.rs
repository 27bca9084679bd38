//! Panic containment on the engine thread. A panic inside one command fails that command (its
//! caller gets `EngineError::Panicked` naming it, through its reply or event channel), closes
//! the session it acted on and any session it created, and the engine goes on. A panic inside a
//! step fails every session that had work in that step and releases their blocks. Afterwards
//! the pool's invariants are checked; if they no longer hold, the panic is passed on to the
//! supervisor, which restarts the engine on a fresh pool.

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::Ordering::Relaxed;

use super::{Command, Engine, fault};
use crate::EngineError;
use crate::session::{Event, SessionId};

/// The text of a panic payload.
pub(crate) fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a non-text panic".into())
}

impl Engine {
    /// Runs one command; a panic inside it fails only that command.
    pub(crate) fn handle_guarded(&mut self, cmd: Command) {
        let name = cmd.name();
        let session = cmd.session();
        let events = cmd.events().cloned();
        let first_new = self.next_id;
        let Err(p) = catch_unwind(AssertUnwindSafe(|| self.handle(cmd))) else {
            return;
        };
        eprintln!(
            "memoria: the engine's `{name}` command panicked ({}); failing it and carrying on",
            panic_message(p.as_ref())
        );
        self.stats.panics.fetch_add(1, Relaxed);
        if let Some(ev) = events {
            let _ = ev.send(Event::Error(EngineError::Panicked(name).to_string()));
        }
        let mut involved: Vec<SessionId> = session.into_iter().collect();
        involved.extend((first_new..self.next_id).map(SessionId));
        self.contain(name, &involved, p);
    }

    /// Runs one step; a panic inside it fails the sessions that had work.
    pub(crate) fn step_guarded(&mut self) {
        // Reused across steps (taken out while the step borrows the engine).
        let mut involved = std::mem::take(&mut self.buffers.involved);
        involved.clear();
        involved.extend(
            self.sessions
                .iter()
                .filter(|(_, s)| s.job.is_some())
                .map(|(id, _)| *id),
        );
        let first_new = self.next_id;
        let r = catch_unwind(AssertUnwindSafe(|| {
            let _in_step = memoria_kv::step_guard::enter();
            fault::step();
            self.step();
        }));
        self.stats
            .store_work_in_step
            .store(memoria_kv::step_guard::step_work_seen(), Relaxed);
        self.stats
            .chain_hashes
            .store(memoria_kv::hash::chain_hashes_here(), Relaxed);
        let Err(p) = r else {
            self.buffers.involved = involved;
            return;
        };
        eprintln!(
            "memoria: an engine step panicked ({}); failing its {} session(s) and carrying on",
            panic_message(p.as_ref()),
            involved.len()
        );
        self.stats.panics.fetch_add(1, Relaxed);
        involved.extend((first_new..self.next_id).map(SessionId));
        self.contain("step", &involved, p);
    }

    /// Fails and closes `ids` after a panic in `what`, then checks the pool. If that fails or
    /// panics too, `p` goes on to the supervisor.
    fn contain(&mut self, what: &'static str, ids: &[SessionId], p: Box<dyn std::any::Any + Send>) {
        let cleaned = catch_unwind(AssertUnwindSafe(|| {
            for &id in ids {
                self.fail_job(id, EngineError::Panicked(what));
                self.close_session(id);
            }
            self.stats.set_sessions(self.sessions.len());
            self.pool.check_invariants()
        }));
        match cleaned {
            Ok(Ok(())) => {}
            Ok(Err(why)) => {
                eprintln!("memoria: the block pool is inconsistent after the panic ({why})");
                resume_unwind(p);
            }
            Err(_) => resume_unwind(p),
        }
    }
}
