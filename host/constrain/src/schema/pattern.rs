//! JSON Schema `pattern` (an ECMA-262 regular expression, unanchored unless it says `^`/`$`)
//! compiled into the regex of a JSON string literal whose *decoded* text it matches.
//!
//! The ECMA source is first rewritten into `regex-syntax`'s dialect where the two differ (`\d`,
//! `\w`, `\s` and `.` with ECMA's meaning; `[` `&` `~` literal inside a class), parsed, and the
//! parsed expression is re-emitted over the JSON encoding: each character as serde_json writes it
//! (`"` `\` and controls escaped, the rest raw), so every emitted literal decodes to a match.
//! Refused (an `Err` with the reason): back-references, look-around, word boundaries, `\c`
//! escapes, empty classes `[]`/`[^]`, and anchors anywhere but at the very start or end.

use regex_syntax::hir::{Class, Hir, HirKind, Look};

use super::pieces::STRING_CHAR;

/// ECMA-262's `\s`: WhiteSpace and LineTerminator.
const ECMA_SPACE: &str =
    r"\t\n\x0B\x0C\r \xA0\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}\x{FEFF}";
/// ECMA-262's `.` (without the `s` flag): any character but a line terminator.
const ECMA_DOT: &str = r"[^\n\r\x{2028}\x{2029}]";
/// A class without members: matches nothing.
const NOTHING: &str = "[a&&b]";

/// The regex of a JSON string literal (quotes included) whose content matches `pattern`.
pub(crate) fn string(pattern: &str) -> Result<String, String> {
    let source = rewrite(pattern)?;
    let hir = regex_syntax::ParserBuilder::new()
        .unicode(true)
        .utf8(true)
        .nest_limit(200)
        .build()
        .parse(&source)
        .map_err(|e| format!("cannot parse the pattern: {e}"))?;
    let items: &[Hir] = match hir.kind() {
        HirKind::Concat(v) => v,
        _ => std::slice::from_ref(&hir),
    };
    let is = |h: Option<&Hir>, look: Look| matches!(h.map(Hir::kind), Some(HirKind::Look(l)) if *l == look);
    let mut items = items;
    let start = is(items.first(), Look::Start);
    if start {
        items = &items[1..];
    }
    let end = is(items.last(), Look::End);
    if end {
        items = &items[..items.len() - 1];
    }
    let mut out = String::from("\"");
    if !start {
        out.push_str(&format!("{STRING_CHAR}*"));
    }
    for h in items {
        emit(h, &mut out)?;
    }
    if !end {
        out.push_str(&format!("{STRING_CHAR}*"));
    }
    out.push('"');
    Ok(out)
}

/// ECMA syntax into regex-syntax's, where their meanings differ.
fn rewrite(p: &str) -> Result<String, String> {
    let mut out = String::with_capacity(p.len() + 16);
    let mut chars = p.chars().peekable();
    let mut in_class = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let Some(e) = chars.next() else {
                    return Err("the pattern ends with a lone `\\`".to_owned());
                };
                match e {
                    'd' => out.push_str("[0-9]"),
                    'D' => out.push_str("[^0-9]"),
                    'w' => out.push_str("[0-9A-Za-z_]"),
                    'W' => out.push_str("[^0-9A-Za-z_]"),
                    's' => out.push_str(&format!("[{ECMA_SPACE}]")),
                    'S' => out.push_str(&format!("[^{ECMA_SPACE}]")),
                    'b' if in_class => out.push_str(r"\x08"),
                    'b' | 'B' => {
                        return Err("word boundaries (`\\b`, `\\B`) are not supported".to_owned());
                    }
                    '0' if !chars.peek().is_some_and(char::is_ascii_digit) => out.push_str(r"\x00"),
                    '0'..='9' | 'k' => {
                        return Err("back-references are not supported".to_owned());
                    }
                    'c' => return Err("`\\c` control escapes are not supported".to_owned()),
                    'n' | 'r' | 't' | 'f' | 'v' | 'x' | 'u' | 'p' | 'P' => {
                        out.push('\\');
                        out.push(e);
                    }
                    e if e.is_ascii_alphanumeric() => {
                        return Err(format!("the escape `\\{e}` is not supported"));
                    }
                    e => out.push_str(&regex_syntax::escape(e.encode_utf8(&mut [0; 4]))),
                }
            }
            '[' if !in_class => {
                in_class = true;
                out.push('[');
                if chars.peek() == Some(&'^') {
                    chars.next();
                    out.push('^');
                }
                if chars.peek() == Some(&']') {
                    return Err("empty classes `[]`/`[^]` are not supported".to_owned());
                }
            }
            ']' if in_class => {
                in_class = false;
                out.push(']');
            }
            '[' | '&' | '~' if in_class => {
                out.push('\\');
                out.push(c);
            }
            '.' if !in_class => out.push_str(ECMA_DOT),
            '(' if !in_class && chars.peek() == Some(&'?') => {
                chars.next();
                let next = chars.next();
                let named = next == Some('<') && chars.peek().is_some_and(|c| c.is_alphabetic());
                if next != Some(':') && !named {
                    return Err("look-around and inline flags are not supported (only `(?:` and `(?<name>` groups)".to_owned());
                }
                out.push_str("(?");
                out.extend(next);
            }
            c => out.push(c),
        }
    }
    Ok(out)
}

/// `h` over the JSON encoding of its characters.
fn emit(h: &Hir, out: &mut String) -> Result<(), String> {
    match h.kind() {
        HirKind::Empty => {}
        HirKind::Literal(lit) => {
            let text = std::str::from_utf8(&lit.0).map_err(|_| "a non-UTF-8 literal".to_owned())?;
            for c in text.chars() {
                out.push_str(&encoded(c));
            }
        }
        HirKind::Class(Class::Unicode(cls)) => {
            let mut plain = String::new();
            let mut escaped: Vec<String> = Vec::new();
            for r in cls.ranges() {
                let (s, e) = (u32::from(r.start()), u32::from(r.end()));
                for c in s..=e.min(0x5C) {
                    if c < 0x20 || c == 0x22 || c == 0x5C {
                        escaped.extend(char::from_u32(c).map(encoded));
                    }
                }
                // The range minus 0x00-0x1F, `"` and `\`.
                for (a, b) in [(0x20, 0x21), (0x23, 0x5B), (0x5D, u32::MAX)] {
                    let (a, b) = (s.max(a), e.min(b));
                    if a <= b {
                        plain.push_str(&format!("\\x{{{a:X}}}-\\x{{{b:X}}}"));
                    }
                }
            }
            if !plain.is_empty() {
                escaped.insert(0, format!("[{plain}]"));
            }
            match escaped.len() {
                0 => out.push_str(NOTHING),
                1 => out.push_str(&escaped[0]),
                _ => out.push_str(&format!("(?:{})", escaped.join("|"))),
            }
        }
        HirKind::Class(Class::Bytes(_)) => return Err("byte classes are not supported".to_owned()),
        HirKind::Look(_) => {
            return Err(
                "anchors are supported only at the very start (`^`) and end (`$`)".to_owned(),
            );
        }
        HirKind::Repetition(rep) => {
            out.push_str("(?:");
            emit(&rep.sub, out)?;
            out.push(')');
            match (rep.min, rep.max) {
                (0, None) => out.push('*'),
                (1, None) => out.push('+'),
                (0, Some(1)) => out.push('?'),
                (m, None) => out.push_str(&format!("{{{m},}}")),
                (m, Some(x)) => out.push_str(&format!("{{{m},{x}}}")),
            }
        }
        HirKind::Capture(cap) => {
            out.push_str("(?:");
            emit(&cap.sub, out)?;
            out.push(')');
        }
        HirKind::Concat(v) => {
            for h in v {
                emit(h, out)?;
            }
        }
        HirKind::Alternation(v) => {
            out.push_str("(?:");
            for (i, h) in v.iter().enumerate() {
                if i > 0 {
                    out.push('|');
                }
                emit(h, out)?;
            }
            out.push(')');
        }
    }
    Ok(())
}

/// One character as serde_json writes it in a string, as a regex literal.
fn encoded(c: char) -> String {
    let mut lit = String::new();
    super::write_string(c.encode_utf8(&mut [0; 4]), &mut lit);
    regex_syntax::escape(&lit[1..lit.len() - 1])
}
