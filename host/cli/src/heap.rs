//! How the process's heap hands memory back to the kernel: glibc's malloc is told to keep
//! freed blocks (below [`MMAP_THRESHOLD`]) in its heap and to trim only past [`TRIM_THRESHOLD`].
//!
//! By default glibc serves each large allocation (a 0.6 MB K/V block fetched from the remote
//! tier, a prefill's activation buffers) with its own `mmap` and unmaps it on free, so the next
//! request faults every page in afresh. On a virtual machine whose freed pages go back to the
//! hypervisor (balloon free-page reporting), a first touch costs far more than the copy it
//! precedes: measured on this project's 2-vCPU VMs, `clear_page` dominated the remote fetch,
//! and a 1000-token prefill spent a fifth of its time faulting. Kept memory is reused at once.
//! A user's own `GLIBC_TUNABLES` malloc settings win (nothing is changed then).

/// Allocations at least this large are still mapped on their own (and unmapped on free).
pub const MMAP_THRESHOLD: usize = 64 << 20;
/// Free memory at the top of a heap past this is returned to the kernel.
pub const TRIM_THRESHOLD: usize = 1 << 30;

/// Applies the thresholds (glibc on Linux; elsewhere nothing); whether they were applied.
/// Call once, first thing in `main`.
pub fn keep_freed_memory() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let tuned = std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("glibc.malloc."));
        if tuned {
            return false;
        }
        // SAFETY: mallopt only changes malloc's parameters; both values fit a c_int.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD as libc::c_int) == 1
                && libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD as libc::c_int) == 1
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    false
}
