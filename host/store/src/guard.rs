//! Panic containment around redb: a damaged file can make redb panic (an `unreachable!` on a
//! page type it does not know, an index out of range), and no panic inside the store may reach
//! the engine or the CLI. [`contain`] runs a closure under `catch_unwind` and turns a panic into
//! [`StoreError::Damaged`] carrying redb's message and location. While a contained closure runs
//! on a thread, the panic hook records the message instead of printing it (the hook chains to
//! the previous one for every other panic, on every other thread).

use std::cell::RefCell;
use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;

use crate::error::StoreError;

thread_local! {
    /// `Some` while a contained closure runs on this thread: the last panic's message.
    static CAUGHT: RefCell<Option<String>> = const { RefCell::new(None) };
}

static HOOK: Once = Once::new();

fn install_hook() {
    HOOK.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            let contained = CAUGHT.with(|c| {
                let mut c = c.borrow_mut();
                match c.as_mut() {
                    Some(slot) => {
                        let msg = info
                            .payload()
                            .downcast_ref::<&str>()
                            .map(|s| s.to_string())
                            .or_else(|| info.payload().downcast_ref::<String>().cloned())
                            .unwrap_or_else(|| "panic".into());
                        *slot = match info.location() {
                            Some(l) => {
                                // From the crate's name on (`redb-4.6.0/src/...`).
                                let f = l.file();
                                let f = f.rfind("/redb-").map_or(f, |i| &f[i + 1..]);
                                format!("{msg} (at {f}:{})", l.line())
                            }
                            None => msg,
                        };
                        true
                    }
                    None => false,
                }
            });
            if !contained {
                previous(info);
            }
        }));
    });
}

/// Runs `f`; a panic inside it becomes [`StoreError::Damaged`] naming `what`.
pub(crate) fn contain<T>(
    what: &'static str,
    f: impl FnOnce() -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    install_hook();
    let outer = CAUGHT.with(|c| c.borrow_mut().replace(String::new()));
    let r = panic::catch_unwind(AssertUnwindSafe(f));
    let caught = CAUGHT.with(|c| std::mem::replace(&mut *c.borrow_mut(), outer));
    match r {
        Ok(v) => v,
        Err(_) => Err(StoreError::Damaged {
            what,
            msg: format!(
                "redb panicked: {}",
                caught.filter(|m| !m.is_empty()).unwrap_or_default()
            ),
        }),
    }
}

/// A redb transaction or table that is leaked instead of dropped when a panic unwinds through
/// its scope. A panic inside redb can leave its locks poisoned, and the transaction's and the
/// table's `drop` unwrap those locks: a second panic while unwinding aborts the process, which
/// [`contain`] cannot catch. On the normal path the value is dropped (or taken) as usual; the
/// leak, on a damaged file only, is one transaction per failed operation.
pub(crate) struct LeakOnUnwind<T>(ManuallyDrop<T>);

impl<T> LeakOnUnwind<T> {
    pub(crate) fn new(value: T) -> LeakOnUnwind<T> {
        LeakOnUnwind(ManuallyDrop::new(value))
    }

    /// The value, to consume (a transaction's `commit`).
    pub(crate) fn into_inner(self) -> T {
        let mut this = ManuallyDrop::new(self);
        // SAFETY: `this` is never dropped, so the value is taken exactly once and not used after.
        unsafe { ManuallyDrop::take(&mut this.0) }
    }
}

impl<T> Deref for LeakOnUnwind<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> DerefMut for LeakOnUnwind<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

impl<T> Drop for LeakOnUnwind<T> {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            // SAFETY: drop runs once, and the value is not used after it.
            unsafe { ManuallyDrop::drop(&mut self.0) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_a_damaged_error_and_nesting_restores_the_slot() {
        let r: Result<(), _> = contain("outer", || {
            let inner: Result<(), _> = contain("inner", || panic!("boom {}", 7));
            match inner {
                Err(StoreError::Damaged { what, msg }) => {
                    assert_eq!(what, "inner");
                    assert!(msg.contains("boom 7"), "{msg}");
                }
                other => panic!("expected Damaged, got {other:?}"),
            }
            unreachable!("second")
        });
        let e = r.expect_err("outer panicked");
        assert!(e.to_string().contains("second"), "{e}");
        assert_eq!(contain("ok", || Ok(3)).expect("no panic"), 3);
    }

    /// Panics in its drop, as redb's transaction does on a poisoned lock.
    struct PanicsOnDrop<'a>(&'a std::cell::Cell<u32>);

    impl Drop for PanicsOnDrop<'_> {
        fn drop(&mut self) {
            self.0.set(self.0.get() + 1);
            if std::thread::panicking() {
                panic!("a second panic while unwinding would abort");
            }
        }
    }

    #[test]
    fn a_guarded_value_is_leaked_while_unwinding_and_dropped_otherwise() {
        let drops = std::cell::Cell::new(0);
        let r: Result<(), _> = contain("unwind", || {
            let _txn = LeakOnUnwind::new(PanicsOnDrop(&drops));
            panic!("damaged page")
        });
        assert!(matches!(r, Err(StoreError::Damaged { .. })), "{r:?}");
        assert_eq!(drops.get(), 0, "leaked, not dropped, while unwinding");
        drop(LeakOnUnwind::new(PanicsOnDrop(&drops)));
        assert_eq!(drops.get(), 1);
        let inner = LeakOnUnwind::new(PanicsOnDrop(&drops)).into_inner();
        assert_eq!(drops.get(), 1, "taken, not dropped");
        drop(inner);
        assert_eq!(drops.get(), 2);
    }
}
