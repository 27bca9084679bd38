//! The minijinja environment HF transformers renders chat templates in: trim_blocks and
//! lstrip_blocks on, trailing newline dropped, no auto-escaping, lenient undefined values,
//! python string/dict/list methods (minijinja-contrib pycompat), and the globals/filters HF adds:
//! `raise_exception`, `strftime_now` (UTC) and `tojson` (python `json.dumps` formatting); plus
//! `c_trim`, the C `isspace` trim that llama.cpp's built-in templates apply.

use minijinja::syntax::SyntaxConfig;
use minijinja::{AutoEscape, Environment, Error, ErrorKind, UndefinedBehavior};

use super::error::RaisedException;
use super::{json, strftime};

/// A fresh environment with no template added.
pub(crate) fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    let syntax = SyntaxConfig::builder()
        .trim_blocks(true)
        .lstrip_blocks(true)
        .keep_trailing_newline(false)
        .build()
        .expect("the default delimiters are valid");
    env.set_syntax(syntax);
    env.set_auto_escape_callback(|_| AutoEscape::None);
    env.set_undefined_behavior(UndefinedBehavior::Lenient);
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.add_function("raise_exception", raise_exception);
    env.add_function("strftime_now", strftime_now);
    env.add_filter("tojson", json::tojson);
    env.add_filter("c_trim", c_trim);
    env
}

/// Trims the ASCII whitespace C's `isspace` knows (space, \t, \n, \v, \f, \r) from both ends,
/// leaving other Unicode spaces, as llama.cpp's `trim` does.
pub(crate) fn c_trim(s: String) -> String {
    s.trim_matches(|c| matches!(c, ' ' | '\t' | '\n' | '\x0B' | '\x0C' | '\r'))
        .to_owned()
}

/// `raise_exception(message)`: aborts rendering with `ChatError::Raised(message)`.
fn raise_exception(message: String) -> Result<String, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, message.clone())
        .with_source(RaisedException(message)))
}

/// `strftime_now(format)`: the current UTC time formatted like Python's `strftime`.
fn strftime_now(format: String) -> String {
    strftime::strftime(&format, strftime::unix_now())
}
