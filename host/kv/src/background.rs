//! Background threads (the arena's prefaulter; the store's demotion, disk writer and remote
//! encoder) run at a lower scheduling priority than the engine: on a machine whose cores the engine's compute
//! threads fill, a waking background thread then preempts them less, so write-behind and
//! demotion cost decode and prefill less. They still run whenever a core is free.
//! Work that may wait indefinitely (the prefaulter: a page it has not reached yet is faulted
//! on first use instead) runs at `SCHED_IDLE`, only on a core nothing else wants.

/// The nice value background threads take (the engine's threads keep the process default).
pub const BACKGROUND_NICE: i32 = 10;

/// Lowers the calling thread's priority to [`BACKGROUND_NICE`] (Linux: per thread). A refusal
/// leaves the thread as it was: the priority is a preference, never a requirement.
pub fn lower_this_thread() {
    #[cfg(target_os = "linux")]
    {
        let _ =
            rustix::process::setpriority_process(Some(rustix::thread::gettid()), BACKGROUND_NICE);
    }
}

/// Moves the calling thread to `SCHED_IDLE` (Linux: it runs only when a core has nothing else
/// to run), or to [`BACKGROUND_NICE`] where that is refused or on other systems.
pub fn idle_this_thread() {
    #[cfg(target_os = "linux")]
    {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: `param` is a valid sched_param for the call; pid 0 is the calling thread.
        if unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) } == 0 {
            return;
        }
    }
    lower_this_thread();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_os = "linux")]
    fn an_idle_thread_runs_at_sched_idle_and_its_caller_does_not() {
        // SAFETY: querying the calling thread's policy.
        let policy = || unsafe { libc::sched_getscheduler(0) };
        let own = policy();
        let idle = std::thread::spawn(move || {
            idle_this_thread();
            policy()
        })
        .join()
        .unwrap();
        assert_eq!(idle, libc::SCHED_IDLE);
        assert_eq!(policy(), own);
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_background_thread_is_niced_and_its_caller_is_not() {
        let own = rustix::process::getpriority_process(None).unwrap();
        let niced = std::thread::spawn(|| {
            lower_this_thread();
            rustix::process::getpriority_process(Some(rustix::thread::gettid())).unwrap()
        })
        .join()
        .unwrap();
        assert_eq!(niced, BACKGROUND_NICE.max(own));
        assert_eq!(rustix::process::getpriority_process(None).unwrap(), own);
    }
}
