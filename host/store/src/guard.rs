//! Panic containment around redb: a damaged file can make redb panic (an `unreachable!` on a
//! page type it does not know, an index out of range), and no panic inside the store may reach
//! the engine or the CLI. [`contain`] runs a closure under `catch_unwind` and turns a panic into
//! [`StoreError::Damaged`] carrying redb's message and location. While a contained closure runs
//! on a thread, the panic hook records the message instead of printing it (the hook chains to
//! the previous one for every other panic, on every other thread).

use std::cell::RefCell;
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
}
