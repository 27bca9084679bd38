//! The store's one way to take a mutex: a poisoned lock is recovered (every holder leaves the
//! data consistent), and taking one reports itself to the step guard, so a test pins that no
//! engine step takes a store lock (see `memoria_kv::step_guard`).

use std::sync::{Mutex, MutexGuard};

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    memoria_kv::step_guard::note_step_work();
    m.lock().unwrap_or_else(|p| p.into_inner())
}
