//! The clock a guest's CPU time is read from: the calling thread's CPU time
//! (`CLOCK_THREAD_CPUTIME_ID`) where the platform has it.
//!
//! Why thread CPU time, read per slice: a guest runs inside one tokio task; during one poll of
//! that task (a slice) it stays on one OS thread, but after a yield or an awaited host call it
//! may resume on another worker, and two threads' CPU clocks cannot be subtracted. So the
//! clock is read when a poll starts, at every epoch callback (which runs inside the poll, on the
//! same thread) and when the poll ends, and only differences taken on one thread within one
//! poll are counted ([`super::meter`]). Where no thread CPU clock exists, wall time between the
//! same two points is used instead: an upper bound of the CPU time.
//!
//! This clock is what `cpu_nanos` reports. The share is charged with the slice's wall time
//! instead (how long the guest held its worker, [`super::meter`]): on a busy machine the OS
//! preempts a worker mid-slice, its thread CPU clock stops but the guest still holds the
//! worker, and the worker is what the neighbours wait for.

/// The calling thread's CPU time, nanoseconds (saturating; 0 if the clock reads negative).
#[cfg(any(target_os = "linux", target_os = "macos"))]
pub(crate) fn thread_cpu_nanos() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    let secs = u64::try_from(t.tv_sec).unwrap_or(0);
    let nanos = u64::try_from(t.tv_nsec).unwrap_or(0);
    secs.saturating_mul(1_000_000_000).saturating_add(nanos)
}

/// Wall time since the first reading, nanoseconds: the upper-bound fallback.
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
pub(crate) fn thread_cpu_nanos() -> u64 {
    static ORIGIN: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    let elapsed = ORIGIN.get_or_init(std::time::Instant::now).elapsed();
    u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_moves_forward_while_the_thread_works() {
        let before = thread_cpu_nanos();
        let until = std::time::Instant::now() + std::time::Duration::from_secs(2);
        let mut x = 0u64;
        while thread_cpu_nanos() == before && std::time::Instant::now() < until {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        assert!(
            thread_cpu_nanos() > before,
            "still {before} after {x} steps"
        );
    }
}
