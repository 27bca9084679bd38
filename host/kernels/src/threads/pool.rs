//! [`Pool`]: the worker threads, the job hand-off (a job pointer published by bumping a
//! generation counter) and the spin-then-park wait on both sides.
//!
//! Invariant: at most one job is in flight (the `busy` flag). A worker touches the job only
//! after entering it (incrementing `state` while it is open) and before leaving it; the caller,
//! once no task is left to claim, closes the job and waits for the entered workers to leave
//! before its stack frame (which holds the job) goes away. A worker that is late (not yet
//! scheduled) never delays the caller: it finds the job closed and skips it.

use std::any::Any;
use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release, SeqCst};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a waiting thread spins on the CPU before yielding it between checks (on an
/// oversubscribed machine the thread it waits for may need this core).
const SPIN_HOT: Duration = Duration::from_micros(10);
/// How long an idle worker keeps checking (spinning, then yielding) before parking. Decode
/// dispatches come every few microseconds, so workers stay hot within a token.
const SPIN: Duration = Duration::from_micros(200);
/// Spin iterations between clock reads.
const SPIN_CHECK: u32 = 128;
/// Set in `Shared::state` while no job is open to enter.
const CLOSED: usize = 1 << (usize::BITS - 1);

thread_local! {
    /// True while this thread runs pool tasks (workers: always); nested calls run inline.
    static IN_JOB: Cell<bool> = const { Cell::new(false) };
}

/// One parallel loop: tasks `0..tasks` handed out by an atomic counter.
struct Job<'a> {
    f: &'a (dyn Fn(usize) + Sync),
    tasks: usize,
    next: AtomicUsize,
}

impl Job<'_> {
    /// Takes tasks until none are left; on a panic stops handing out tasks and returns it.
    fn run(&self) -> Result<(), Box<dyn Any + Send>> {
        catch_unwind(AssertUnwindSafe(|| {
            loop {
                let t = self.next.fetch_add(1, Relaxed);
                if t >= self.tasks {
                    break;
                }
                (self.f)(t);
            }
        }))
        .inspect_err(|_| self.next.store(self.tasks, Relaxed))
    }
}

struct Shared {
    /// Bumped once per job; workers wait for it to change.
    generation: AtomicUsize,
    /// The current `Job` (valid while `state` is open or has entered workers).
    job: AtomicPtr<()>,
    /// `CLOSED` flag | number of workers inside the current job.
    state: AtomicUsize,
    /// Workers parked (or about to park) on `wake`.
    sleeping: AtomicUsize,
    shutdown: AtomicBool,
    lock: Mutex<()>,
    wake: Condvar,
    /// The first panic payload of a worker during the current job.
    panic: Mutex<Option<Box<dyn Any + Send>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A fixed set of worker threads plus the calling thread (see the module docs).
pub struct Pool {
    shared: Arc<Shared>,
    busy: AtomicBool,
    workers: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("threads", &self.threads())
            .finish()
    }
}

impl Pool {
    /// A pool of `threads` threads in all (`threads - 1` workers plus the caller; at least
    /// one). If the OS refuses a thread, the pool simply has fewer.
    pub fn new(threads: usize) -> Pool {
        let shared = Arc::new(Shared {
            generation: AtomicUsize::new(0),
            job: AtomicPtr::new(std::ptr::null_mut()),
            state: AtomicUsize::new(CLOSED),
            sleeping: AtomicUsize::new(0),
            shutdown: AtomicBool::new(false),
            lock: Mutex::new(()),
            wake: Condvar::new(),
            panic: Mutex::new(None),
        });
        let workers = (1..threads.max(1))
            .map_while(|i| {
                let s = Arc::clone(&shared);
                std::thread::Builder::new()
                    .name(format!("memoria-pool-{i}"))
                    .spawn(move || worker(&s))
                    .ok()
            })
            .collect();
        Pool {
            shared,
            busy: AtomicBool::new(false),
            workers,
        }
    }

    /// Threads in all, the caller included.
    pub fn threads(&self) -> usize {
        self.workers.len() + 1
    }

    /// Runs `f` with this pool as the one [`super::for_each`] uses on this thread.
    pub fn install<R>(&self, f: impl FnOnce() -> R) -> R {
        struct Restore(*const Pool);
        impl Drop for Restore {
            fn drop(&mut self) {
                super::INSTALLED.with(|c| c.set(self.0));
            }
        }
        let _restore = Restore(super::INSTALLED.with(|c| c.replace(self)));
        f()
    }

    /// Runs `f(task)` for every task in `0..tasks`, the caller included as a worker, and returns
    /// when all are done. Inline on the caller when the pool is busy or this is a nested call.
    /// A panic in a task is resumed here once every thread has left the job.
    pub fn for_each(&self, tasks: usize, f: &(dyn Fn(usize) + Sync)) {
        let inline = tasks <= 1
            || self.workers.is_empty()
            || IN_JOB.with(Cell::get)
            || self
                .busy
                .compare_exchange(false, true, Acquire, Relaxed)
                .is_err();
        if inline {
            (0..tasks).for_each(f);
            return;
        }
        let job = Job {
            f,
            tasks,
            next: AtomicUsize::new(0),
        };
        let s = &*self.shared;
        s.job.store((&raw const job).cast_mut().cast(), Relaxed);
        // Opens the job (publishing the pointer to whoever enters), then wakes the workers
        // (SeqCst: pairs with the parking check in `wait`).
        s.state.store(0, Release);
        s.generation.fetch_add(1, SeqCst);
        if s.sleeping.load(SeqCst) > 0 {
            let _g = lock(&s.lock);
            s.wake.notify_all();
        }
        IN_JOB.with(|c| c.set(true));
        let mine = job.run();
        IN_JOB.with(|c| c.set(false));
        // No task is left to claim: close, then wait for the workers still inside.
        s.state.fetch_or(CLOSED, AcqRel);
        let start = Instant::now();
        let mut spins = 0u32;
        let mut hot = true;
        while s.state.load(Acquire) != CLOSED {
            spins = spins.wrapping_add(1);
            if hot && spins.is_multiple_of(SPIN_CHECK) {
                hot = start.elapsed() < SPIN_HOT;
            }
            if hot {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        s.job.store(std::ptr::null_mut(), Relaxed);
        let theirs = lock(&s.panic).take();
        self.busy.store(false, Release);
        if let Err(p) = mine {
            resume_unwind(p);
        }
        if let Some(p) = theirs {
            resume_unwind(p);
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.shared.shutdown.store(true, SeqCst);
        {
            let _g = lock(&self.shared.lock);
            self.shared.wake.notify_all();
        }
        for w in self.workers.drain(..) {
            // A worker never panics (tasks are caught), so joining only waits.
            let _ = w.join();
        }
    }
}

/// A worker's life: wait for a new generation, enter the open job (if still open), run its
/// tasks, leave.
fn worker(s: &Shared) {
    IN_JOB.with(|c| c.set(true));
    let mut seen = 0;
    while let Some(g) = wait(s, seen) {
        seen = g;
        if !enter(s) {
            continue;
        }
        // SAFETY: entered while open: the caller that published this job waits for `state` to
        // drop back to CLOSED, which needs this thread's leave below, before dropping it.
        let job = unsafe { &*s.job.load(Acquire).cast::<Job<'_>>() };
        if let Err(p) = job.run() {
            lock(&s.panic).get_or_insert(p);
        }
        s.state.fetch_sub(1, Release);
    }
}

/// Joins the open job; false if it is closed (finished without this thread).
fn enter(s: &Shared) -> bool {
    let mut cur = s.state.load(Relaxed);
    loop {
        if cur & CLOSED != 0 {
            return false;
        }
        // Acquire: the job pointer stored before the job was opened is visible.
        match s
            .state
            .compare_exchange_weak(cur, cur + 1, Acquire, Relaxed)
        {
            Ok(_) => return true,
            Err(v) => cur = v,
        }
    }
}

/// Spins, then parks, until the generation differs from `seen`; `None` on shutdown.
fn wait(s: &Shared, seen: usize) -> Option<usize> {
    let start = Instant::now();
    let mut spins = 0u32;
    let mut hot = true;
    loop {
        let g = s.generation.load(Acquire);
        if g != seen {
            return Some(g);
        }
        if s.shutdown.load(Relaxed) {
            return None;
        }
        spins = spins.wrapping_add(1);
        if hot && spins.is_multiple_of(SPIN_CHECK) {
            hot = start.elapsed() < SPIN_HOT;
        }
        if hot {
            std::hint::spin_loop();
        } else if start.elapsed() < SPIN {
            std::thread::yield_now();
        } else {
            break;
        }
    }
    let mut guard = lock(&s.lock);
    s.sleeping.fetch_add(1, SeqCst);
    let out = loop {
        let g = s.generation.load(SeqCst);
        if g != seen {
            break Some(g);
        }
        if s.shutdown.load(SeqCst) {
            break None;
        }
        guard = s.wake.wait(guard).unwrap_or_else(|e| e.into_inner());
    };
    s.sleeping.fetch_sub(1, SeqCst);
    out
}
