//! Background threads (the arena's prefaulter; the store's demotion, disk writer and remote
//! encoder) run at a lower scheduling priority than the engine: on a machine whose cores the engine's compute
//! threads fill, a waking background thread then preempts them less, so write-behind and
//! demotion cost decode and prefill less. They still run whenever a core is free.

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

#[cfg(test)]
mod tests {
    use super::*;

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
