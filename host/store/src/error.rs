//! The store's error type, and the conversion of redb's per-operation errors into it: each keeps
//! its message, says which step failed, and is classified (a full disk, another I/O error, a
//! damaged file) so callers can answer with the right status and advice.

use crate::hot::HotError;
use crate::session::SessionError;

/// What to do about a store file that cannot be used.
pub const DAMAGED_ADVICE: &str = "run `memoria store repair --store DIR` (redb's repair; a file \
    damaged beyond it is salvaged: every entry that still reads and verifies is kept in a fresh \
    file and the damaged one set aside), or start `memoria serve` with --store-recover to do the \
    same at start";

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("store at {path}: {msg}")]
    Open { path: String, msg: String },
    /// The file is damaged (redb reported corruption or panicked on it).
    #[error(
        "the store file is damaged ({what}: {msg}): nothing more is written to it (reads go on, \
         damaged blocks are misses); with no server using it, run `memoria store repair --store \
         DIR` (it keeps every entry that still reads), or restart `memoria serve` with \
         --store-recover"
    )]
    Damaged { what: &'static str, msg: String },
    /// A store that cannot be opened because its file is damaged, with what to do.
    #[error("the store file {path} is damaged and cannot be opened ({msg}); {DAMAGED_ADVICE}")]
    Unopenable { path: String, msg: String },
    #[error("store: {what}: {msg}")]
    Db { what: &'static str, msg: String },
    /// The filesystem is full (ENOSPC).
    #[error(
        "the store's disk is full ({what}: {msg}); nothing more is written to it (the engine keeps \
         serving from RAM); free disk space or lower [store] max_disk_mb: the store writes again on its own once \
         there is room"
    )]
    DiskFull { what: &'static str, msg: String },
    /// Another I/O error from the store's file.
    #[error(
        "store disk I/O error ({what}: {msg}); nothing more is written to it for now (the engine \
         keeps serving from RAM, and the store tries writing again every few seconds)"
    )]
    DiskIo { what: &'static str, msg: String },
    /// Named saves are over their own budget.
    #[error(
        "the saved-session budget is full: {used} of {budget} bytes in use and this save needs \
         {need}; delete saved sessions (`memoria store clear`) or raise [store] max_saves_mb"
    )]
    SavesFull { used: u64, budget: u64, need: u64 },
    #[error("the store's table format is {found}, this build reads {supported}")]
    Format { found: u64, supported: u64 },
    #[error("the store has no disk tier")]
    NoDisk,
    /// A save's namespace is no longer registered.
    #[error("namespace {0} is not registered")]
    UnknownNamespace(u32),
    #[error("the store's writer thread has stopped")]
    WriterGone,
    /// The remote tier did not answer a saved session's write or read (down, timed out, or its
    /// circuit breaker open).
    #[error(
        "the remote tier (Valkey/Redis) did not answer for the saved session: it is down or timed          out; retry once it is back"
    )]
    RemoteUnavailable,
    /// The writer is reopening the file after a disk failure (reads are misses meanwhile).
    #[error("the store file is being reopened after a disk failure")]
    Reopening,
    #[error("saved session: {0}")]
    Session(#[from] SessionError),
    #[error("saved hot prefixes: {0}")]
    Hot(#[from] HotError),
    #[error("saved routing keys: {0}")]
    Routes(HotError),
    #[error("store i/o: {0}")]
    Io(#[from] std::io::Error),
}

impl StoreError {
    /// Whether the refusal is for lack of space (the disk, or the saves' budget): HTTP 507.
    pub fn is_full(&self) -> bool {
        matches!(
            self,
            StoreError::DiskFull { .. } | StoreError::SavesFull { .. }
        )
    }

    /// Whether the file is damaged.
    pub fn is_damaged(&self) -> bool {
        matches!(
            self,
            StoreError::Damaged { .. } | StoreError::Unopenable { .. }
        )
    }

    /// What is wrong with a damaged file, without the advice (the whole message otherwise).
    pub fn damage(&self) -> String {
        match self {
            StoreError::Unopenable { msg, .. } => msg.clone(),
            StoreError::Damaged { what, msg } => format!("{what}: {msg}"),
            e => e.to_string(),
        }
    }

    /// Whether the disk failed (full or another I/O error): the writer stops.
    pub fn is_disk_failure(&self) -> bool {
        matches!(
            self,
            StoreError::DiskFull { .. } | StoreError::DiskIo { .. }
        )
    }

    /// A copy for acknowledging several waiters with one failure.
    pub fn duplicate(&self) -> StoreError {
        match self {
            StoreError::Open { path, msg } => StoreError::Open {
                path: path.clone(),
                msg: msg.clone(),
            },
            StoreError::Damaged { what, msg } => StoreError::Damaged {
                what,
                msg: msg.clone(),
            },
            StoreError::Unopenable { path, msg } => StoreError::Unopenable {
                path: path.clone(),
                msg: msg.clone(),
            },
            StoreError::Db { what, msg } => StoreError::Db {
                what,
                msg: msg.clone(),
            },
            StoreError::DiskFull { what, msg } => StoreError::DiskFull {
                what,
                msg: msg.clone(),
            },
            StoreError::DiskIo { what, msg } => StoreError::DiskIo {
                what,
                msg: msg.clone(),
            },
            StoreError::SavesFull { used, budget, need } => StoreError::SavesFull {
                used: *used,
                budget: *budget,
                need: *need,
            },
            StoreError::Format { found, supported } => StoreError::Format {
                found: *found,
                supported: *supported,
            },
            StoreError::NoDisk => StoreError::NoDisk,
            StoreError::UnknownNamespace(n) => StoreError::UnknownNamespace(*n),
            StoreError::WriterGone => StoreError::WriterGone,
            StoreError::RemoteUnavailable => StoreError::RemoteUnavailable,
            StoreError::Reopening => StoreError::Reopening,
            StoreError::Session(e) => StoreError::Session(e.clone()),
            StoreError::Hot(e) => StoreError::Hot(e.clone()),
            StoreError::Routes(e) => StoreError::Routes(e.clone()),
            StoreError::Io(e) => StoreError::Io(std::io::Error::new(e.kind(), e.to_string())),
        }
    }
}

/// Whether an I/O error means the filesystem is full.
pub(crate) fn io_is_full(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::StorageFull
        || e.kind() == std::io::ErrorKind::QuotaExceeded
        || e.raw_os_error() == Some(28)
}

/// Classifies one redb error for the step `what`.
pub(crate) fn classify(what: &'static str, e: redb::Error) -> StoreError {
    let msg = e.to_string();
    match e {
        redb::Error::Io(io) if io_is_full(&io) => StoreError::DiskFull { what, msg },
        redb::Error::Io(_) | redb::Error::Backend(_) => StoreError::DiskIo { what, msg },
        redb::Error::PreviousIo => StoreError::DiskIo {
            what,
            msg: "an earlier write to the file failed".into(),
        },
        redb::Error::Corrupted(_) | redb::Error::LockPoisoned(_) => {
            StoreError::Damaged { what, msg }
        }
        _ => StoreError::Db { what, msg },
    }
}

/// Converts a redb result, naming the step that failed.
pub(crate) trait DbResult<T> {
    fn db(self, what: &'static str) -> Result<T, StoreError>;
}

impl<T, E: Into<redb::Error>> DbResult<T> for Result<T, E> {
    fn db(self, what: &'static str) -> Result<T, StoreError> {
        self.map_err(|e| classify(what, e.into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redb_errors_are_classified_with_their_step() {
        let full = std::io::Error::from_raw_os_error(28);
        let e = classify("commit", redb::Error::Io(full));
        assert!(e.is_full() && e.is_disk_failure(), "{e}");
        assert!(e.to_string().contains("disk is full") && e.to_string().contains("commit"));
        assert!(!e.to_string().contains("shutting down"));
        let e = classify(
            "write",
            redb::Error::Io(std::io::Error::other("bad sector")),
        );
        assert!(
            matches!(e, StoreError::DiskIo { .. }) && !e.is_full(),
            "{e}"
        );
        let e = classify("read", redb::Error::Corrupted("x".into()));
        assert!(e.is_damaged(), "{e}");
        let e = StoreError::SavesFull {
            used: 1,
            budget: 2,
            need: 3,
        };
        assert!(e.duplicate().is_full());
    }
}
