//! HF's `tojson` filter: Python's `json.dumps(x, ensure_ascii=False, indent=None,
//! separators=None, sort_keys=False)` over minijinja values. Invariants: map keys keep their
//! insertion order unless `sort_keys`; separators default to Python's (`", "`, `": "`, or `","`
//! when indenting); non-ASCII text is kept as is unless `ensure_ascii`.

use std::fmt::Write as _;

use minijinja::value::{Kwargs, ValueKind};
use minijinja::{Error, ErrorKind, Value};

/// Options of one `tojson` call.
struct Options {
    indent: Option<String>,
    item_sep: String,
    key_sep: String,
    sort_keys: bool,
    ensure_ascii: bool,
}

impl Options {
    fn from_kwargs(kwargs: &Kwargs) -> Result<Options, Error> {
        let indent = match kwargs.get::<Option<Value>>("indent")? {
            None => None,
            Some(v) if v.is_none() || v.is_undefined() => None,
            Some(v) => match (v.as_i64(), v.as_str()) {
                (Some(n), _) => Some(" ".repeat(usize::try_from(n).unwrap_or(0))),
                (None, Some(s)) => Some(s.to_owned()),
                _ => {
                    return Err(Error::new(
                        ErrorKind::InvalidOperation,
                        "tojson: indent must be an integer or a string",
                    ));
                }
            },
        };
        let (mut item_sep, mut key_sep) = match indent {
            Some(_) => (",".to_owned(), ": ".to_owned()),
            None => (", ".to_owned(), ": ".to_owned()),
        };
        if let Some(seps) = kwargs.get::<Option<Value>>("separators")?
            && !seps.is_none()
        {
            let parts: Vec<Value> = seps.try_iter()?.collect();
            match parts.as_slice() {
                [item, key] if item.as_str().is_some() && key.as_str().is_some() => {
                    item_sep = item.to_string();
                    key_sep = key.to_string();
                }
                _ => {
                    return Err(Error::new(
                        ErrorKind::InvalidOperation,
                        "tojson: separators must be a pair of strings",
                    ));
                }
            }
        }
        let sort_keys = kwargs.get::<Option<bool>>("sort_keys")?.unwrap_or(false);
        let ensure_ascii = kwargs.get::<Option<bool>>("ensure_ascii")?.unwrap_or(false);
        kwargs.assert_all_used()?;
        Ok(Options {
            indent,
            item_sep,
            key_sep,
            sort_keys,
            ensure_ascii,
        })
    }
}

/// The `tojson` filter.
pub(crate) fn tojson(value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
    let options = Options::from_kwargs(&kwargs)?;
    let mut out = String::new();
    write_value(&mut out, value, &options, 0)?;
    Ok(Value::from_safe_string(out))
}

fn newline(out: &mut String, options: &Options, depth: usize) {
    if let Some(indent) = &options.indent {
        out.push('\n');
        for _ in 0..depth {
            out.push_str(indent);
        }
    }
}

fn write_value(
    out: &mut String,
    value: &Value,
    options: &Options,
    depth: usize,
) -> Result<(), Error> {
    match value.kind() {
        ValueKind::Undefined | ValueKind::None => out.push_str("null"),
        ValueKind::Bool => out.push_str(if value.is_true() { "true" } else { "false" }),
        ValueKind::Number => write_number(out, value),
        ValueKind::String => write_string(out, value.as_str().unwrap_or_default(), options),
        ValueKind::Map => {
            let mut keys: Vec<Value> = value.try_iter()?.collect();
            if options.sort_keys {
                keys.sort_by_key(key_text);
            }
            write_container(out, options, depth, ('{', '}'), &keys, |out, key| {
                write_string(out, &key_text(key), options);
                out.push_str(&options.key_sep);
                write_value(out, &value.get_item(key)?, options, depth + 1)
            })?;
        }
        ValueKind::Seq | ValueKind::Iterable => {
            let items: Vec<Value> = value.try_iter()?.collect();
            write_container(out, options, depth, ('[', ']'), &items, |out, item| {
                write_value(out, item, options, depth + 1)
            })?;
        }
        kind => {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("tojson: a value of type {kind} is not JSON serializable"),
            ));
        }
    }
    Ok(())
}

fn write_container(
    out: &mut String,
    options: &Options,
    depth: usize,
    (open, close): (char, char),
    items: &[Value],
    mut write_item: impl FnMut(&mut String, &Value) -> Result<(), Error>,
) -> Result<(), Error> {
    out.push(open);
    if items.is_empty() {
        out.push(close);
        return Ok(());
    }
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(&options.item_sep);
        }
        newline(out, options, depth + 1);
        write_item(out, item)?;
    }
    newline(out, options, depth);
    out.push(close);
    Ok(())
}

/// Python stringifies non-string keys: `1` → `"1"`, `True` → `"true"`, `None` → `"null"`.
fn key_text(key: &Value) -> String {
    match key.kind() {
        ValueKind::String => key.as_str().unwrap_or_default().to_owned(),
        ValueKind::Bool => (if key.is_true() { "true" } else { "false" }).to_owned(),
        ValueKind::None | ValueKind::Undefined => "null".to_owned(),
        _ => key.to_string(),
    }
}

fn write_number(out: &mut String, value: &Value) {
    if value.is_integer() {
        out.push_str(&value.to_string());
        return;
    }
    let f = f64::try_from(value.clone()).unwrap_or(f64::NAN);
    if f.is_nan() {
        out.push_str("NaN");
    } else if f.is_infinite() {
        out.push_str(if f > 0.0 { "Infinity" } else { "-Infinity" });
    } else {
        // Rust's Debug is the shortest round-trip form like Python's repr ("1.0", "0.1",
        // "1e20"); Python writes a sign on positive exponents ("1e+20").
        let text = format!("{f:?}");
        match text.split_once('e') {
            Some((mantissa, exp)) if !exp.starts_with('-') => {
                let _ = write!(out, "{mantissa}e+{exp}");
            }
            _ => out.push_str(&text),
        }
    }
}

fn write_string(out: &mut String, s: &str, options: &Options) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (options.ensure_ascii && (c as u32) > 0x7e) => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}
