//! The regex fragments for JSON's lexical pieces under the crate's output policy: compact JSON with
//! at most one space after `:` and `,`, bounded number lengths, strings without lone surrogates.

/// Between a key and its value.
pub(crate) const COLON: &str = ": ?";
/// Between two members or items.
pub(crate) const COMMA: &str = ", ?";

/// One character inside a string: any scalar value but `"`, `\` and controls, or an escape.
/// `\u` escapes of surrogates (D800-DFFF) are excluded: a lone one is not valid text, and
/// characters beyond the BMP can be written as raw UTF-8.
pub(crate) const STRING_CHAR: &str = r#"(?:[^"\\\x00-\x1F]|\\["\\/bfnrt]|\\u(?:[0-9a-cA-CefEF][0-9a-fA-F]{3}|[dD][0-7][0-9a-fA-F]{2}))"#;

/// At most this many digits in an integer part, and in a fraction.
pub(crate) const MAX_DIGITS: usize = 16;

/// An integer literal of at most 16 digits; not `-0` (parsers such as serde_json read it as a
/// float, which a validator then calls a number).
pub(crate) fn integer() -> String {
    format!("(?:0|-?[1-9][0-9]{{0,{}}})", MAX_DIGITS - 1)
}

/// A number literal: `-?(0|[1-9][0-9]{0,15})`, an optional fraction of 1-16 digits, an optional
/// exponent of 1-2 digits (so every literal is a finite f64).
pub(crate) fn number() -> String {
    format!(
        "-?(?:0|[1-9][0-9]{{0,{}}})(?:\\.[0-9]{{1,{MAX_DIGITS}}})?(?:[eE][+-]?[0-9]{{1,2}})?",
        MAX_DIGITS - 1
    )
}

pub(crate) const BOOLEAN: &str = "(?:true|false)";
pub(crate) const NULL: &str = "null";

/// A string literal of `min..=max` characters (escapes count as one), `max` unbounded when `None`.
pub(crate) fn string(min: u64, max: Option<u64>) -> String {
    match (min, max) {
        (0, None) => format!("\"{STRING_CHAR}*\""),
        (m, None) => format!("\"{STRING_CHAR}{{{m},}}\""),
        (m, Some(x)) => format!("\"{STRING_CHAR}{{{m},{x}}}\""),
    }
}

const DATE: &str = "[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])";
const TIME: &str = "(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]{1,6})?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])";
const UUID: &str = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}";

/// The string literal for a supported `format`, or `None` for an unsupported one.
pub(crate) fn formatted_string(format: &str) -> Option<String> {
    let body = match format {
        "date" => DATE.to_owned(),
        "time" => TIME.to_owned(),
        "date-time" => format!("{DATE}T{TIME}"),
        "uuid" => UUID.to_owned(),
        _ => return None,
    };
    Some(format!("\"{body}\""))
}

/// The formats [`formatted_string`] knows, for error messages.
pub(crate) const FORMATS: &str = "date, time, date-time, uuid";
