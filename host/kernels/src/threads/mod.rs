//! A persistent worker pool for the small, frequent parallel loops of decoding (matmul row
//! tasks, attention tasks): workers wait for the next job by spinning briefly on an atomic
//! generation counter and then park, and the calling thread takes part as worker 0, so a
//! dispatch costs about a cache-line round trip instead of a rayon fork/join.
//!
//! Invariant: the pool only decides which thread runs which task index; a task's arithmetic
//! never depends on the pool size, so results are bit-identical for any thread count. A call
//! made while the pool is busy (another caller, or a task calling back into the pool) runs
//! its tasks inline on the calling thread, so nesting never deadlocks. A panicking task is
//! caught on its thread, the job finishes, and the panic is resumed on the caller.

mod chunks;
mod pool;

use std::cell::Cell;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

pub use chunks::{SharedMut, for_each_chunk_mut};
pub use pool::Pool;

/// Threads for the global pool requested by [`set_threads`] (`0`: not set).
static REQUESTED: AtomicUsize = AtomicUsize::new(0);
static GLOBAL: OnceLock<Pool> = OnceLock::new();

thread_local! {
    /// The pool installed on this thread by [`Pool::install`] (null: the global pool).
    static INSTALLED: Cell<*const Pool> = const { Cell::new(std::ptr::null()) };
}

/// Error of [`set_threads`] once the global pool is running with another size.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("the global worker pool already runs {running} threads (asked for {asked})")]
pub struct AlreadyStarted {
    pub running: usize,
    pub asked: usize,
}

/// Sizes the global pool (`threads ≥ 1`, including the calling thread); call it before the
/// first parallel kernel. Without it the pool has one thread per available core.
pub fn set_threads(threads: usize) -> Result<(), AlreadyStarted> {
    let threads = threads.max(1);
    REQUESTED.store(threads, Ordering::Relaxed);
    match GLOBAL.get() {
        Some(p) if p.threads() != threads => Err(AlreadyStarted {
            running: p.threads(),
            asked: threads,
        }),
        _ => Ok(()),
    }
}

/// The global pool, started on first use.
pub fn global() -> &'static Pool {
    GLOBAL.get_or_init(|| {
        let asked = REQUESTED.load(Ordering::Relaxed);
        let threads = if asked > 0 {
            asked
        } else {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        };
        Pool::new(threads)
    })
}

/// Runs `f` with the pool this thread dispatches to: the one installed by [`Pool::install`],
/// else the global pool.
fn with_current<R>(f: impl FnOnce(&Pool) -> R) -> R {
    let p = INSTALLED.with(Cell::get);
    if p.is_null() {
        f(global())
    } else {
        // SAFETY: `install` keeps the pool borrowed while the pointer is set and restores the
        // previous value before returning (also on unwind).
        f(unsafe { &*p })
    }
}

/// Threads of the pool this thread dispatches to (used to size work splits; never affects
/// results).
pub fn current_threads() -> usize {
    with_current(Pool::threads)
}

/// Runs `f(task)` once for every `task` in `0..tasks` on the current pool and returns when all
/// are done; a panic in any task is resumed here after the others finished.
pub fn for_each(tasks: usize, f: impl Fn(usize) + Sync) {
    with_current(|p| p.for_each(tasks, &f))
}

#[cfg(test)]
mod tests;
