//! Composition of a schema with literal text: `open JSON close`, repeated with a separator up to
//! a bound, as a chat template's tool-call syntax writes calls (`<tool_call>\n{...}\n</tool_call>`
//! for Hermes/Qwen, a bare `{"name": ..., "parameters": ...}` for Llama 3.x). Optionally the
//! output may instead be free text that does not begin with a trigger literal (`tool_choice:
//! "auto"`): the automaton then allows either an answer in prose or, from the first byte, the
//! wrapped calls, and stays a single anchored DFA.

use crate::error::ConstrainError;
use crate::json::Json;
use crate::schema;

/// The most repetitions a wrapped format may allow.
pub const MAX_WRAPPED_ITEMS: usize = 16;

/// Items of a schema wrapped in literal text.
#[derive(Debug, Clone, PartialEq)]
pub struct Wrapped {
    /// Literal text before each item (may be empty).
    pub open: String,
    /// The schema each item's JSON follows.
    pub schema: Json,
    /// Literal text after each item (may be empty).
    pub close: String,
    /// Literal text between items.
    pub separator: String,
    /// At most this many items (1 to [`MAX_WRAPPED_ITEMS`]); at least one is always written.
    pub max_items: usize,
    /// When set (and not empty), any text not starting with this literal is allowed instead of
    /// the items; it must be a prefix of what an item starts with, so the two never overlap.
    pub free_text_unless: Option<String>,
}

fn wrap_err(reason: impl Into<String>) -> ConstrainError {
    ConstrainError::Format {
        field: "tools".to_owned(),
        reason: reason.into(),
    }
}

/// A regex matching `s` literally.
fn literal(s: &str) -> String {
    regex_syntax::escape(s)
}

/// Any text that does not start with `trigger` (the empty text and proper prefixes included):
/// for each `i`, the first `i` characters of the trigger followed either by nothing or by a
/// character other than its `i`-th and then anything.
fn not_starting_with(trigger: &str) -> String {
    let mut branches = Vec::new();
    let mut prefix = String::new();
    for c in trigger.chars() {
        let other = format!("[^{}]", literal(&c.to_string()));
        branches.push(format!("{}(?:{other}(?s:.)*)?", literal(&prefix)));
        prefix.push(c);
    }
    format!("(?:{})", branches.join("|"))
}

impl Wrapped {
    /// The anchored regex of the whole output.
    pub(crate) fn to_regex(&self) -> Result<String, ConstrainError> {
        if self.max_items == 0 || self.max_items > MAX_WRAPPED_ITEMS {
            return Err(wrap_err(format!(
                "a wrapped format allows 1 to {MAX_WRAPPED_ITEMS} items, not {}",
                self.max_items
            )));
        }
        let item = format!(
            "{}{}{}",
            literal(&self.open),
            schema::to_regex(&self.schema)?,
            literal(&self.close)
        );
        let items = if self.max_items == 1 {
            item
        } else {
            format!(
                "{item}(?:{}{item}){{0,{}}}",
                literal(&self.separator),
                self.max_items - 1
            )
        };
        match self.free_text_unless.as_deref() {
            None => Ok(items),
            Some("") => Err(wrap_err("the free-text trigger must not be empty")),
            Some(t) if !self.open.starts_with(t) && !t.starts_with(&self.open) => {
                Err(wrap_err(format!(
                    "the free-text trigger {t:?} must be a prefix of what an item starts with ({:?})",
                    self.open
                )))
            }
            Some(t) => Ok(format!("(?:{items})|{}", not_starting_with(t))),
        }
    }

    /// The text identifying this format's language (the cache key's source).
    pub(crate) fn canonical(&self) -> String {
        let head = serde_json::json!([
            self.open,
            self.close,
            self.separator,
            self.max_items,
            self.free_text_unless
        ]);
        format!("wrapped:{head}:{}", self.schema.to_compact())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prose_alternative_excludes_exactly_the_trigger_prefix() {
        let t = crate::dfa::Table::build(&not_starting_with("<t>")).expect("builds");
        let accepts = |text: &str| {
            let mut s = t.start;
            for &b in text.as_bytes() {
                s = t.next(s, b);
                if s == crate::dfa::DEAD {
                    return false;
                }
            }
            t.is_accepting(s)
        };
        for yes in ["", "<", "<t", "hello", "<x", "<tx>", " <t>", "<\n", "é<t>"] {
            assert!(accepts(yes), "{yes:?}");
        }
        for no in ["<t>", "<t> and more"] {
            assert!(!accepts(no), "{no:?}");
        }
    }

    #[test]
    fn bad_bounds_and_triggers_are_errors() {
        let schema = Json::parse(r#"{"type":"integer"}"#).expect("json");
        let w = |max_items, free: Option<&str>| Wrapped {
            open: "<c>".into(),
            schema: schema.clone(),
            close: "</c>".into(),
            separator: "\n".into(),
            max_items,
            free_text_unless: free.map(str::to_owned),
        };
        assert!(w(0, None).to_regex().is_err());
        assert!(w(MAX_WRAPPED_ITEMS + 1, None).to_regex().is_err());
        assert!(w(1, Some("")).to_regex().is_err());
        assert!(w(1, Some("{")).to_regex().is_err());
        assert!(w(2, Some("<")).to_regex().is_ok());
    }
}
