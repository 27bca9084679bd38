//! memoria-sched: sessions, continuous batching and the engine thread over the shared block
//! pool, plus sampling and stop strings.

pub mod config;
pub mod embed_cache;
mod engine;
pub mod handle;
pub mod paged;
pub mod preload;
pub mod public;
mod remote_reads;
pub mod sampling;
pub mod session;
pub mod speculation;
pub mod stats;
pub mod stop;

pub use config::EngineConfig;
pub use engine::{GenerateParams, SessionInfo};
pub use handle::{EMBED_WAVE, Embedded, EngineHandle, GenerationStream, OwnedSession};
pub use preload::{Preload, preload};
pub use session::{Event, SessionId, StopReason, Usage, WarmInfo};
pub use speculation::{SpecSnapshot, Speculate};
pub use stats::{EngineStats, EngineStatsSnapshot};

/// Why an engine request failed.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("session {0:?} not found in this namespace")]
    NotFound(SessionId),
    #[error("session {0:?} is busy with a generation")]
    Busy(SessionId),
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// No session is saved under this name in the namespace (on disk or in the remote tier).
    #[error("no saved session {0:?} in this namespace")]
    NoSavedSession(String),
    #[error("context overflow: {have} tokens + {adding} > {max}")]
    ContextOverflow {
        have: usize,
        adding: usize,
        max: usize,
    },
    #[error("too many sessions (limit {0})")]
    TooManySessions(usize),
    #[error("K/V memory: {0}")]
    Pool(#[from] memoria_kv::PoolError),
    #[error("cancelled")]
    Cancelled,
    #[error("the engine has stopped")]
    Stopped,
    #[error("internal error: {0}")]
    Internal(String),
    /// A command (or an engine step, named `step`) panicked inside the engine; the engine
    /// closed the sessions involved and carries on.
    #[error(
        "internal error: the engine's `{0}` command failed (a bug, logged by the server); its session was closed and the engine carries on"
    )]
    Panicked(&'static str),
    /// The engine thread died and its supervisor is restarting it; sessions open before are
    /// gone.
    #[error("the engine is restarting after an internal error; retry shortly")]
    Restarting,
    /// The persistent store refused or failed (a full disk or saves budget, an I/O error, a
    /// damaged file): the engine itself is fine.
    #[error("{0}")]
    Store(memoria_kv::backing::BackingError),
}
