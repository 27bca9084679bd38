//! Fault injection for the hardening tests, compiled into debug builds only: in a release build
//! every hook here is an empty inline function, so no request or setting can reach it.
//!
//! `MEMORIA_FAULT` (read once) is a comma-separated list of:
//! - `command=NAME`: every engine command called NAME (`warm`, `open`, ...) panics inside the
//!   engine's per-command guard;
//! - `step=N`: the N-th engine step (1-based) panics inside the step guard;
//! - `die=NAME`: the first command called NAME panics outside every guard, killing the engine
//!   loop (the supervisor then restarts it);
//! - `backoff_ms=N`: the supervisor's first back-off before a restart (1 s otherwise), so a
//!   test can observe the restarting state on a loaded machine.

#[cfg(debug_assertions)]
mod imp {
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

    #[derive(Default)]
    struct Spec {
        command: Option<String>,
        step: Option<u64>,
        die: Option<String>,
        backoff_ms: Option<u64>,
    }

    fn spec() -> &'static Spec {
        static SPEC: OnceLock<Spec> = OnceLock::new();
        SPEC.get_or_init(|| {
            let mut s = Spec::default();
            let raw = std::env::var("MEMORIA_FAULT").unwrap_or_default();
            for item in raw.split(',').filter(|i| !i.is_empty()) {
                match item.split_once('=') {
                    Some(("command", v)) => s.command = Some(v.to_string()),
                    Some(("step", v)) => s.step = v.parse().ok(),
                    Some(("die", v)) => s.die = Some(v.to_string()),
                    Some(("backoff_ms", v)) => s.backoff_ms = v.parse().ok(),
                    _ => eprintln!("memoria: MEMORIA_FAULT item {item:?} not understood, ignored"),
                }
            }
            s
        })
    }

    static STEPS: AtomicU64 = AtomicU64::new(0);
    static DIED: AtomicBool = AtomicBool::new(false);

    pub fn command(name: &str) {
        if spec().command.as_deref() == Some(name) {
            panic!("MEMORIA_FAULT: injected panic in the `{name}` command");
        }
    }

    pub fn step() {
        let n = STEPS.fetch_add(1, Relaxed).saturating_add(1);
        if spec().step == Some(n) {
            panic!("MEMORIA_FAULT: injected panic in engine step {n}");
        }
    }

    pub fn die(name: &str) {
        if spec().die.as_deref() == Some(name) && !DIED.swap(true, Relaxed) {
            panic!("MEMORIA_FAULT: injected death of the engine loop at `{name}`");
        }
    }

    pub fn first_backoff(default: std::time::Duration) -> std::time::Duration {
        spec().backoff_ms.map_or(default, |ms| {
            std::time::Duration::from_millis(ms.min(60_000))
        })
    }
}

#[cfg(not(debug_assertions))]
mod imp {
    #[inline(always)]
    pub fn command(_: &str) {}
    #[inline(always)]
    pub fn step() {}
    #[inline(always)]
    pub fn die(_: &str) {}
    #[inline(always)]
    pub fn first_backoff(default: std::time::Duration) -> std::time::Duration {
        default
    }
}

pub(crate) use imp::{command, die, first_backoff, step};
