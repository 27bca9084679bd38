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

/// The largest magnitude of an emitted integer literal ([`MAX_DIGITS`] digits).
pub(crate) const INT_LIMIT: i128 = 10i128.pow(MAX_DIGITS as u32) - 1;

/// An integer literal with its value in `lo..=hi` (clipped to ±[`INT_LIMIT`], the output
/// policy's 16 digits), every such value reachable, never `-0`; `None` when no value fits.
pub(crate) fn integer_range(lo: i128, hi: i128) -> Option<String> {
    let (lo, hi) = (lo.max(-INT_LIMIT), hi.min(INT_LIMIT));
    if lo > hi {
        return None;
    }
    let mut branches = Vec::new();
    if lo < 0 {
        // -a for a in max(1, -hi)..=-lo.
        let neg = unsigned_range((-hi).max(1) as u128, (-lo) as u128);
        branches.push(format!("-{neg}"));
    }
    if hi >= 0 {
        branches.push(unsigned_range(lo.max(0) as u128, hi as u128));
    }
    Some(format!("(?:{})", branches.join("|")))
}

/// Canonical decimal literals (no leading zeros) of `a..=b`, `a <= b`.
pub(crate) fn unsigned_range(a: u128, b: u128) -> String {
    let digits = |x: u128| x.to_string().len();
    let mut parts = Vec::new();
    for n in digits(a)..=digits(b) {
        let first = if n == 1 { 0 } else { 10u128.pow(n as u32 - 1) };
        let last = 10u128.pow(n as u32) - 1;
        let (x, y) = (a.max(first), b.min(last));
        parts.push(same_length(
            x.to_string().as_bytes(),
            y.to_string().as_bytes(),
        ));
    }
    if parts.len() == 1 {
        parts.pop().unwrap_or_default()
    } else {
        format!("(?:{})", parts.join("|"))
    }
}

/// The digit strings of one length from `a` to `b` (as numbers, `a <= b`).
fn same_length(a: &[u8], b: &[u8]) -> String {
    let Some((&a0, a_rest)) = a.split_first() else {
        return String::new();
    };
    let (b0, b_rest) = (b[0], &b[1..]);
    if a0 == b0 {
        return format!("{}{}", a0 as char, same_length(a_rest, b_rest));
    }
    let n = a_rest.len();
    let any = if n == 0 {
        String::new()
    } else {
        format!("[0-9]{{{n}}}")
    };
    let nines = vec![b'9'; n];
    let zeros = vec![b'0'; n];
    let (mut mid_lo, mut mid_hi) = (a0, b0);
    let mut parts = Vec::new();
    if a_rest.iter().any(|&d| d != b'0') {
        parts.push(format!("{}{}", a0 as char, same_length(a_rest, &nines)));
        mid_lo += 1;
    }
    let mut upper = None;
    if b_rest.iter().any(|&d| d != b'9') {
        upper = Some(format!("{}{}", b0 as char, same_length(&zeros, b_rest)));
        mid_hi -= 1;
    }
    if mid_lo <= mid_hi {
        let class = if mid_lo == mid_hi {
            (mid_lo as char).to_string()
        } else {
            format!("[{}-{}]", mid_lo as char, mid_hi as char)
        };
        parts.push(format!("{class}{any}"));
    }
    parts.extend(upper);
    if parts.len() == 1 {
        parts.pop().unwrap_or_default()
    } else {
        format!("(?:{})", parts.join("|"))
    }
}
