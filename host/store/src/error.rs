//! The store's error type, and the conversion of redb's per-operation errors into it (each
//! keeps its message and says which step failed).

use std::fmt::Display;

use crate::session::SessionError;

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("store at {path}: {msg}")]
    Open { path: String, msg: String },
    #[error("store: {what}: {msg}")]
    Db { what: &'static str, msg: String },
    #[error("the store's table format is {found}, this build reads {supported}")]
    Format { found: u64, supported: u64 },
    #[error("the store has no disk tier")]
    NoDisk,
    #[error("the store's writer thread has stopped")]
    WriterGone,
    #[error("saved session: {0}")]
    Session(#[from] SessionError),
    #[error("store i/o: {0}")]
    Io(#[from] std::io::Error),
}

/// Converts a redb result, naming the step that failed.
pub(crate) trait DbResult<T> {
    fn db(self, what: &'static str) -> Result<T, StoreError>;
}

impl<T, E: Display> DbResult<T> for Result<T, E> {
    fn db(self, what: &'static str) -> Result<T, StoreError> {
        self.map_err(|e| StoreError::Db {
            what,
            msg: e.to_string(),
        })
    }
}
