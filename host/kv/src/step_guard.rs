//! Marks the engine's step on the engine thread, so the layers below can tell when they are
//! called from inside it. Work that must never run there (a redb transaction, a stored block's
//! checksum and decode) reports itself with [`note_step_work`]; inside a step it is counted,
//! and [`step_work_seen`] (per thread: each engine has its own) lets a test pin that count at
//! zero.

use std::cell::Cell;

thread_local! {
    static IN_STEP: Cell<bool> = const { Cell::new(false) };
    /// Store work this thread ran inside a step.
    static STEP_WORK: Cell<u64> = const { Cell::new(0) };
}

/// While alive, this thread is inside an engine step.
#[derive(Debug)]
pub struct StepScope {
    outer: bool,
}

/// Marks this thread as inside a step until the scope is dropped.
pub fn enter() -> StepScope {
    StepScope {
        outer: IN_STEP.with(|c| c.replace(true)),
    }
}

impl Drop for StepScope {
    fn drop(&mut self) {
        IN_STEP.with(|c| c.set(self.outer));
    }
}

/// Whether this thread is inside an engine step.
pub fn in_step() -> bool {
    IN_STEP.with(Cell::get)
}

/// Called by work that must stay out of the step; counts it when this thread is in one.
pub fn note_step_work() {
    if in_step() {
        STEP_WORK.with(|c| c.set(c.get().saturating_add(1)));
    }
}

/// How many times store work ran inside a step on this thread.
pub fn step_work_seen() -> u64 {
    STEP_WORK.with(Cell::get)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_work_inside_a_step_is_counted() {
        std::thread::spawn(|| {
            note_step_work();
            assert!(!in_step());
            assert_eq!(step_work_seen(), 0);
            {
                let _s = enter();
                assert!(in_step());
                {
                    let _inner = enter();
                }
                assert!(in_step(), "a nested scope leaves the outer one marked");
                note_step_work();
            }
            assert!(!in_step());
            note_step_work();
            assert_eq!(step_work_seen(), 1);
        })
        .join()
        .unwrap();
    }
}
