//! Commits the arena's pages ahead of use: a background thread asks the kernel to fault in
//! (`MADV_POPULATE_WRITE`) the never-used bytes just past the pool's high-water mark, so a
//! burst of new blocks (a long prompt computed, or promoted from another tier) finds its pages
//! resident instead of taking a page fault per 4 KiB on the engine thread; on a virtual machine
//! a first touch can cost ten times a copy. The runway is bounded ([`RUNWAY_BYTES`], at most a
//! quarter of the arena) and the pool's committed figure counts it. Contents never change (the
//! pages stay zero). Where the kernel lacks the call (Linux before 5.14, other systems) the
//! thread stops at its first refusal and pages are committed on first use, as before.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use crate::stats::PoolStats;

/// Most bytes kept faulted in past the high-water mark.
pub(crate) const RUNWAY_BYTES: usize = 64 << 20;
/// Bytes faulted in per call, so a stop is noticed soon.
const STEP_BYTES: usize = 4 << 20;
const PAGE: usize = 4096;

#[derive(Default)]
struct State {
    /// Bytes from the arena's start wanted resident.
    want: usize,
    stop: bool,
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The engine's side of the prefault thread of one arena.
pub(crate) struct Prefaulter {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    runway: usize,
    len: usize,
    /// The last `want` sent.
    asked: usize,
}

/// The mapping's address, sent to the thread (only ever passed to `madvise`).
struct Base(usize);

impl Prefaulter {
    /// Starts the thread for the mapping at `base`, `len` bytes, keeping `runway` bytes past
    /// the high-water mark resident and raising `stats`' committed blocks (`block_bytes` each)
    /// to what it committed. `None` with no runway or no thread.
    ///
    /// # Safety
    /// `base..base + len` must stay mapped (read-write, private, anonymous) until the
    /// returned value is dropped; dropping it joins the thread.
    pub unsafe fn start(
        base: *mut u8,
        len: usize,
        runway: usize,
        block_bytes: usize,
        stats: Arc<PoolStats>,
    ) -> Option<Prefaulter> {
        if runway == 0 || len == 0 || block_bytes == 0 {
            return None;
        }
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
        });
        let (s, at) = (shared.clone(), Base(base as usize));
        let thread = std::thread::Builder::new()
            .name("memoria-prefault".into())
            .spawn(move || run(&s, at, len, block_bytes, &stats))
            .ok()?;
        let mut p = Prefaulter {
            shared,
            thread: Some(thread),
            runway,
            len,
            asked: 0,
        };
        p.note_used(0);
        Some(p)
    }

    /// The pool now uses the arena's first `used` bytes: keeps the runway past them resident
    /// (the thread is woken once a quarter of the runway was used, not per block).
    pub fn note_used(&mut self, used: usize) {
        let want = used.saturating_add(self.runway).min(self.len);
        let step = (self.runway / 4).max(1);
        if want > self.asked && (want >= self.asked.saturating_add(step) || want == self.len) {
            self.asked = want;
            self.shared.lock().want = want;
            self.shared.wake.notify_one();
        }
    }
}

impl Drop for Prefaulter {
    fn drop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.wake.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(shared: &Shared, base: Base, len: usize, block_bytes: usize, stats: &PoolStats) {
    crate::background::idle_this_thread();
    let end_of_map = len.div_ceil(PAGE) * PAGE;
    let mut done = 0usize;
    loop {
        let want = {
            let mut g = shared.lock();
            while !g.stop && g.want <= done {
                g = shared.wake.wait(g).unwrap_or_else(|p| p.into_inner());
            }
            if g.stop {
                return;
            }
            g.want
        };
        let end = want
            .min(done.saturating_add(STEP_BYTES))
            .div_ceil(PAGE)
            .saturating_mul(PAGE)
            .min(end_of_map);
        if !populate(base.0 + done, end - done) {
            return;
        }
        done = end;
        stats
            .blocks_committed
            .fetch_max(done.min(len).div_ceil(block_bytes) as u64, Relaxed);
    }
}

/// Faults in `len` bytes at `addr` (page-aligned, inside the mapping) without changing them.
#[cfg(target_os = "linux")]
fn populate(addr: usize, len: usize) -> bool {
    // SAFETY: the range lies inside the arena's mapping, which outlives this thread
    // (`Prefaulter::start`'s contract); MADV_POPULATE_WRITE only faults pages in, leaving
    // their contents as they are, so no byte the engine reads or writes changes.
    unsafe {
        rustix::mm::madvise(
            addr as *mut std::ffi::c_void,
            len,
            rustix::mm::Advice::LinuxPopulateWrite,
        )
    }
    .is_ok()
}

#[cfg(not(target_os = "linux"))]
fn populate(_: usize, _: usize) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use crate::arena::Arena;
    use crate::stats::PoolStats;

    fn committed_reaches(stats: &PoolStats, blocks: u64) -> bool {
        let until = Instant::now() + Duration::from_secs(30);
        while Instant::now() < until {
            if stats.blocks_committed.load(super::Relaxed) >= blocks {
                return true;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        false
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn the_runway_is_committed_ahead_of_use_bounded_and_left_zero() {
        let block = 1 << 20;
        let n = 1024; // 1 GiB reserved: the runway is 64 MiB of it
        let stats = Arc::new(PoolStats::new(n as u64, block as u64, 16));
        let mut a = Arena::new(n, block).expect("reserve");
        a.start_prefault(stats.clone());
        let runway = (super::RUNWAY_BYTES / block) as u64;
        assert!(committed_reaches(&stats, runway), "runway committed");
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(
            stats.blocks_committed.load(super::Relaxed),
            runway,
            "no further"
        );
        assert!(a.block(runway as u32 - 1).iter().all(|&b| b == 0));
        // Using blocks moves the runway with the high-water mark.
        a.block_mut(100)[7] = 1;
        a.note_used(100);
        assert!(committed_reaches(&stats, 101 + runway));
        assert_eq!(a.block(100)[7], 1);
        assert_eq!(a.committed_blocks(), 101);
        drop(a); // joins the thread before unmapping
    }

    #[test]
    fn a_small_arena_commits_at_most_a_quarter_ahead() {
        let block = 64 << 10;
        let stats = Arc::new(PoolStats::new(64, block as u64, 16));
        let mut a = Arena::new(64, block).expect("reserve");
        a.start_prefault(stats.clone());
        if cfg!(target_os = "linux") {
            assert!(committed_reaches(&stats, 16));
        }
        std::thread::sleep(Duration::from_millis(50));
        assert!(stats.blocks_committed.load(super::Relaxed) <= 16);
        a.note_used(63);
        assert_eq!(a.committed_blocks(), 64);
    }
}
