//! Strict JSON request parsing: a body is one JSON value (nothing trailing) decoded into a typed
//! request; every error is a 400 that names the field (`param`) — for type errors from the
//! decoder's path, for syntax errors (NaN, truncation, invalid UTF-8) from the nearest key before
//! the error position.

use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// Decodes `body` as `T`.
pub fn parse<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request(
            "the request body is empty; send a JSON object",
        ));
    }
    let mut de = serde_json::Deserializer::from_slice(body);
    let value: T = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let inner = e.inner();
        if inner.is_data() {
            let path = field_path(&e.path().to_string(), &inner.to_string());
            let message = format!("invalid `{path}`: {inner}");
            ApiError::invalid(path, message)
        } else {
            syntax_error(body, inner)
        }
    })?;
    de.end().map_err(|e| syntax_error(body, &e))?;
    Ok(value)
}

/// The decoder's path, completed with the field a "missing field `x`" error names.
fn field_path(path: &str, message: &str) -> String {
    let missing = message
        .strip_prefix("missing field `")
        .and_then(|rest| rest.split('`').next());
    match (path, missing) {
        (".", Some(f)) => f.to_string(),
        (p, Some(f)) => format!("{p}.{f}"),
        (p, None) => p.to_string(),
    }
}

fn syntax_error(body: &[u8], e: &serde_json::Error) -> ApiError {
    let offset = byte_offset(body, e.line(), e.column());
    match key_before(body, offset) {
        Some(key) => ApiError::invalid(
            key.clone(),
            format!("invalid JSON in the value of `{key}`: {e}"),
        ),
        None => ApiError::bad_request(format!("invalid JSON: {e}")),
    }
}

/// Byte offset of a 1-based line and column (serde_json counts bytes within a line).
fn byte_offset(body: &[u8], line: usize, column: usize) -> usize {
    let mut start = 0;
    for _ in 1..line {
        match body[start..].iter().position(|&b| b == b'\n') {
            Some(p) => start += p + 1,
            None => break,
        }
    }
    (start + column).min(body.len())
}

/// The last complete `"key":` before `offset`.
fn key_before(body: &[u8], offset: usize) -> Option<String> {
    let head = &body[..offset];
    let mut i = head.len();
    while i > 0 {
        i -= 1;
        if head[i] != b':' {
            continue;
        }
        let mut j = i;
        while j > 0 && head[j - 1].is_ascii_whitespace() {
            j -= 1;
        }
        if j == 0 || head[j - 1] != b'"' {
            continue;
        }
        let end = j - 1;
        let start = head[..end].iter().rposition(|&b| b == b'"')? + 1;
        let key = std::str::from_utf8(&head[start..end]).ok()?;
        if !key.is_empty()
            && key.len() <= 64
            && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            return Some(key.to_string());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct R {
        temperature: Option<f32>,
        max_tokens: Option<u32>,
    }

    #[test]
    fn errors_name_the_field() {
        let e = parse::<R>(br#"{"temperature": NaN}"#).expect_err("NaN");
        assert_eq!(e.param.as_deref(), Some("temperature"), "{e:?}");
        let e = parse::<R>(br#"{"max_tokens": -1}"#).expect_err("negative");
        assert_eq!(e.param.as_deref(), Some("max_tokens"), "{e:?}");
        let e = parse::<R>(br#"{"colour": 1}"#).expect_err("unknown");
        assert!(e.message.contains("colour"), "{e:?}");
        assert!(parse::<R>(b"").is_err());
        assert!(parse::<R>(br#"{} {}"#).is_err());
        assert!(parse::<R>(br#"{"max_tokens": 3}"#).is_ok());
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct P {
            prompt: String,
        }
        let e = parse::<P>(br#"{}"#).expect_err("missing");
        assert_eq!(e.param.as_deref(), Some("prompt"), "{e:?}");
    }
}
