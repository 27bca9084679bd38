//! The allocation probe: [`TrackingAlloc`] forwards to the system allocator and, on threads
//! inside [`largest_allocation`], records the largest single request (alloc, zeroed alloc or
//! realloc). Harnesses assert that bound against the input's size, so a capacity taken from an
//! unchecked length fails the test even when the allocation would have succeeded.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

thread_local! {
    /// `Some(largest so far)` while this thread is inside `largest_allocation`.
    static LARGEST: Cell<Option<usize>> = const { Cell::new(None) };
}

/// The system allocator plus the per-thread probe; install with `#[global_allocator]`.
pub struct TrackingAlloc;

fn note(size: usize) {
    // `try_with`: an allocation during thread teardown is simply not recorded.
    let _ = LARGEST.try_with(|l| {
        if let Some(m) = l.get() {
            l.set(Some(m.max(size)));
        }
    });
}

// SAFETY: every call forwards to `System` with the caller's arguments unchanged; the probe only
// touches a const-initialised thread-local `Cell`, which never allocates.
unsafe impl GlobalAlloc for TrackingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: the caller's contract for `alloc` is passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: the caller's contract for `realloc` is passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract for `dealloc` is passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// Restores the thread's previous probe state, also when the probed call panics.
struct Restore(Option<usize>);

impl Drop for Restore {
    fn drop(&mut self) {
        let inner = LARGEST.get().unwrap_or(0);
        LARGEST.set(self.0.map(|outer| outer.max(inner)));
    }
}

/// Runs `f` and returns its result with the largest single allocation it made on this thread.
///
/// Panics when [`TrackingAlloc`] is not the global allocator (the bound would be vacuous).
pub fn largest_allocation<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let restore = Restore(LARGEST.replace(Some(0)));
    drop(std::hint::black_box(Vec::<u8>::with_capacity(1)));
    assert!(
        LARGEST.get().is_some_and(|m| m > 0),
        "largest_allocation needs `#[global_allocator] static A: TrackingAlloc = TrackingAlloc;`"
    );
    LARGEST.set(Some(0));
    let r = f();
    let largest = LARGEST.get().unwrap_or(0);
    drop(restore);
    (r, largest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[global_allocator]
    static ALLOC: TrackingAlloc = TrackingAlloc;

    #[test]
    fn the_largest_request_is_recorded_and_nesting_keeps_the_outer_maximum() {
        let ((inner, _), outer) = largest_allocation(|| {
            let v = std::hint::black_box(vec![0u8; 1000]);
            largest_allocation(|| std::hint::black_box(vec![0u8; 5000]).len() + v.len())
        });
        assert_eq!(inner, 6000);
        assert!(outer >= 5000, "outer saw {outer}");
        let (_, small) = largest_allocation(|| std::hint::black_box(vec![0u8; 10]).len());
        assert!((10..1000).contains(&small), "{small}");
    }
}
