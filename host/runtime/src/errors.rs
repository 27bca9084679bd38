//! Mapping engine and runtime failures to the WIT `error` variant guests see, and classifying
//! why a request's wasm failed (trap kinds, deadline, memory cap) for the 500 page.

use memoria_sched::EngineError;
use wasmtime::Trap;

use crate::bindings::WitError;
use crate::named::NamedError;

/// The guest-facing error for an engine failure (messages never name other namespaces).
pub fn from_engine(e: EngineError) -> WitError {
    let msg = format!("{e:#}");
    match e {
        EngineError::NotFound(_) | EngineError::NoSavedSession(_) => WitError::NotFound(msg),
        EngineError::InvalidArgument(_) | EngineError::Busy(_) => WitError::InvalidArgument(msg),
        EngineError::ContextOverflow { .. } => WitError::ContextOverflow(msg),
        EngineError::TooManySessions(_) | EngineError::Pool(_) => WitError::QuotaExceeded(msg),
        _ => WitError::Unavailable(msg),
    }
}

/// The guest-facing error for a named-session failure.
pub fn from_named(e: NamedError) -> WitError {
    let msg = e.to_string();
    match e {
        NamedError::BadName(_) => WitError::InvalidArgument(msg),
        NamedError::NotFound(_) => WitError::NotFound(msg),
        NamedError::Full(_) => WitError::QuotaExceeded(msg),
    }
}

/// A short, stable description of why a request's wasm failed.
pub fn describe_failure(
    err: &wasmtime::Error,
    memory_hit: Option<usize>,
    timed_out: bool,
) -> String {
    if timed_out {
        return "wall-time limit reached (wall_time_ms)".into();
    }
    if let Some(bytes) = memory_hit {
        return format!(
            "memory limit reached: the guest tried to grow its memory to {bytes} bytes (memory_bytes)"
        );
    }
    match err.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => {
            "wall-time limit reached (wall_time_ms): the guest was interrupted".into()
        }
        Some(Trap::OutOfFuel) => "fuel limit reached (fuel)".into(),
        Some(Trap::StackOverflow) => "the guest overflowed its stack".into(),
        Some(t) => format!("the guest trapped: {t}"),
        None => format!("the guest failed: {err:#}"),
    }
}
