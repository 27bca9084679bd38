//! Support shared by memoria's fuzz harnesses (a dev-dependency only): how many cases a harness
//! runs ([`config`], raised for long runs by `MEMORIA_FUZZ_CASES`), byte-level mutations of
//! valid encodings ([`Edit`]), and a probe of the largest allocation a call makes
//! ([`largest_allocation`], with [`TrackingAlloc`] installed as the test's global allocator).
//!
//! Every harness asserts the same contract: any input yields `Ok` or a clean `Err`, never a
//! panic, and never an allocation sized by a number read from the input without a check.

mod alloc;
mod cases;
mod mutate;

pub use alloc::{TrackingAlloc, largest_allocation};
pub use cases::{CASES_VAR, cases, config};
pub use mutate::{Edit, apply, edits};
