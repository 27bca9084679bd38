//! The crate's one error type; every variant says which input (field, keyword, token) it is about,
//! so the HTTP layer can answer 400 with a message naming it.

/// Why a `response_format` could not be compiled, or a token was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConstrainError {
    /// The `response_format` object itself is malformed (`field` is its path, e.g.
    /// `response_format.json_schema.name`).
    #[error("invalid {field}: {reason}")]
    Format { field: String, reason: String },
    /// A schema keyword (or value of one) outside the supported subset; `path` is a JSON pointer
    /// into the schema.
    #[error("unsupported JSON Schema keyword `{keyword}` at {path}: {reason}")]
    Unsupported {
        keyword: String,
        path: String,
        reason: String,
    },
    /// A schema that is not valid JSON Schema for the keyword it uses.
    #[error("invalid JSON Schema at {path}: {reason}")]
    InvalidSchema { path: String, reason: String },
    /// The schema admits no JSON text within the limits (e.g. a required recursive `$ref` deeper
    /// than the unrolling depth, an `enum` with no value of the declared type).
    #[error("the schema at {path} admits no value: {reason}")]
    Empty { path: String, reason: String },
    /// The automaton would exceed the compile limits.
    #[error("schema too complex: {0}")]
    TooComplex(String),
    /// A vocabulary the constraint cannot work with.
    #[error("invalid vocabulary: {0}")]
    Vocab(String),
    /// A token the constraint does not allow in the current state (the state is unchanged).
    #[error("token {token} is not allowed here by the response format")]
    TokenRejected { token: u32 },
}

impl ConstrainError {
    /// The request field or schema keyword the error is about, for an HTTP 400's `param`.
    pub fn param(&self) -> String {
        match self {
            ConstrainError::Format { field, .. } => field.clone(),
            ConstrainError::Unsupported { keyword, .. } => {
                format!("response_format.json_schema.schema: {keyword}")
            }
            ConstrainError::InvalidSchema { .. }
            | ConstrainError::Empty { .. }
            | ConstrainError::TooComplex(_) => "response_format.json_schema.schema".to_owned(),
            ConstrainError::Vocab(_) | ConstrainError::TokenRejected { .. } => {
                "response_format".to_owned()
            }
        }
    }
}
