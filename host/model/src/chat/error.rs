//! Chat-template errors: every failure of compiling or rendering a template maps to one
//! [`ChatError`] variant whose message names the cause (minijinja's text, with template line).

use std::fmt;

/// Why a chat template could not be compiled or rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChatError {
    /// The template source is not valid Jinja (reported by `ChatTemplate::new`).
    #[error("chat template syntax error: {0}")]
    Syntax(String),
    /// The template called `raise_exception(message)`; holds the message verbatim.
    #[error("chat template raised an exception: {0}")]
    Raised(String),
    /// Any other failure while rendering (undefined operations, bad types, ...).
    #[error("chat template render error: {0}")]
    Render(String),
    /// `--chat-template NAME` names no built-in template.
    #[error("unknown built-in chat template `{name}` (known: {known})")]
    UnknownBuiltin { name: String, known: String },
}

/// The source attached to the minijinja error that `raise_exception` returns, so that rendering
/// can tell a template's deliberate exception from an engine error.
#[derive(Debug)]
pub(crate) struct RaisedException(pub(crate) String);

impl fmt::Display for RaisedException {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RaisedException {}

impl ChatError {
    /// Classifies a minijinja error raised while rendering.
    pub(crate) fn from_render(err: &minijinja::Error) -> ChatError {
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
        while let Some(e) = source {
            if let Some(raised) = e.downcast_ref::<RaisedException>() {
                return ChatError::Raised(raised.0.clone());
            }
            source = e.source();
        }
        ChatError::Render(err.to_string())
    }

    /// Wraps a minijinja error raised while compiling.
    pub(crate) fn from_compile(err: &minijinja::Error) -> ChatError {
        ChatError::Syntax(err.to_string())
    }
}
