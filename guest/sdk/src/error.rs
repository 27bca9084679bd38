//! [`Error`]: the host's `memoria:llm/types.error` with `Display` and `std::error::Error`.

use std::fmt;

use crate::raw::types::Error as RawError;

/// A failed host call; the message says what to fix.
#[derive(Clone, Debug, PartialEq)]
pub enum Error {
    InvalidArgument(String),
    ContextOverflow(String),
    QuotaExceeded(String),
    NotFound(String),
    Unavailable(String),
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<RawError> for Error {
    fn from(e: RawError) -> Error {
        match e {
            RawError::InvalidArgument(m) => Error::InvalidArgument(m),
            RawError::ContextOverflow(m) => Error::ContextOverflow(m),
            RawError::QuotaExceeded(m) => Error::QuotaExceeded(m),
            RawError::NotFound(m) => Error::NotFound(m),
            RawError::Unavailable(m) => Error::Unavailable(m),
        }
    }
}

impl Error {
    /// The HTTP status a handler would usually answer with.
    pub fn status(&self) -> u16 {
        match self {
            Error::InvalidArgument(_) | Error::ContextOverflow(_) => 400,
            Error::NotFound(_) => 404,
            Error::QuotaExceeded(_) => 429,
            Error::Unavailable(_) => 503,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidArgument(m) => write!(f, "invalid argument: {m}"),
            Error::ContextOverflow(m) => write!(f, "context overflow: {m}"),
            Error::QuotaExceeded(m) => write!(f, "quota exceeded: {m}"),
            Error::NotFound(m) => write!(f, "not found: {m}"),
            Error::Unavailable(m) => write!(f, "unavailable: {m}"),
        }
    }
}

impl std::error::Error for Error {}
