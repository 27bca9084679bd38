//! A compiled `response_format`, independent of any vocabulary: a trimmed DFA for a schema, or the
//! pushdown recognizer for `json_object`, behind one byte-step interface.

use crate::dfa::{DEAD, Table};
use crate::error::ConstrainError;
use crate::format::{JsonSchemaFormat, ResponseFormat};
use crate::json::Json;
use crate::pda::{self, JState};
use crate::schema;

/// A position in the output language; `Copy` and hashable, it keys the mask cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum State {
    Dfa(u32),
    Json(JState),
}

#[derive(Debug)]
enum Kind {
    Dfa(Box<Table>),
    JsonObject,
}

/// The language one `response_format` allows, as a byte automaton.
#[derive(Debug)]
pub struct Grammar {
    kind: Kind,
    key: [u8; 32],
}

/// What identifies a format's language: the schema's compact text (name and description do not
/// change the language), or `json_object`. `None` for `text`.
fn canonical(f: &ResponseFormat) -> Option<String> {
    match f {
        ResponseFormat::Text => None,
        ResponseFormat::JsonObject
        | ResponseFormat::JsonSchema(JsonSchemaFormat { schema: None, .. }) => {
            Some("json_object".to_owned())
        }
        ResponseFormat::JsonSchema(js) => js
            .schema
            .as_ref()
            .map(|s| format!("schema:{}", s.to_compact())),
        ResponseFormat::Wrapped(w) => Some(w.canonical()),
        ResponseFormat::Gbnf(g) => Some(format!("gbnf:{g}")),
    }
}

impl Grammar {
    /// Compiles a constrained format; `text` is refused (it has no constraint: check
    /// [`ResponseFormat::is_constrained`] first).
    pub fn compile(f: &ResponseFormat) -> Result<Grammar, ConstrainError> {
        let key = Grammar::content_key(f).ok_or_else(|| ConstrainError::Format {
            field: "response_format.type".to_owned(),
            reason: "`text` has no constraint to compile".to_owned(),
        })?;
        let kind = match f {
            ResponseFormat::JsonSchema(JsonSchemaFormat {
                schema: Some(s), ..
            }) => Kind::Dfa(Box::new(Table::build(&schema::to_regex(s)?)?)),
            ResponseFormat::Wrapped(w) => Kind::Dfa(Box::new(Table::build(&w.to_regex()?)?)),
            ResponseFormat::Gbnf(g) => {
                Kind::Dfa(Box::new(Table::build(&crate::gbnf::to_regex(g)?)?))
            }
            _ => Kind::JsonObject,
        };
        Ok(Grammar { kind, key })
    }

    /// Compiles a bare JSON Schema.
    pub fn from_schema(schema: &Json) -> Result<Grammar, ConstrainError> {
        let key = *blake3::hash(format!("schema:{}", schema.to_compact()).as_bytes()).as_bytes();
        Ok(Grammar {
            kind: Kind::Dfa(Box::new(Table::build(&schema::to_regex(schema)?)?)),
            key,
        })
    }

    /// Any JSON object.
    pub fn json_object() -> Grammar {
        Grammar {
            kind: Kind::JsonObject,
            key: *blake3::hash(b"json_object").as_bytes(),
        }
    }

    /// The content hash formats with the same language share (`None` for `text`).
    pub fn content_key(f: &ResponseFormat) -> Option<[u8; 32]> {
        canonical(f).map(|c| *blake3::hash(c.as_bytes()).as_bytes())
    }

    /// This grammar's content hash.
    pub fn key(&self) -> [u8; 32] {
        self.key
    }

    /// The DFA's state count (`None` for the `json_object` recognizer).
    pub fn dfa_states(&self) -> Option<usize> {
        match &self.kind {
            Kind::Dfa(t) => Some(t.states()),
            Kind::JsonObject => None,
        }
    }

    pub(crate) fn start(&self) -> State {
        match &self.kind {
            Kind::Dfa(t) => State::Dfa(t.start),
            Kind::JsonObject => State::Json(pda::START),
        }
    }

    /// The state after `bytes`, `None` when one is refused.
    pub(crate) fn advance(&self, s: State, bytes: &[u8]) -> Option<State> {
        match (&self.kind, s) {
            (Kind::Dfa(t), State::Dfa(mut x)) => {
                for &b in bytes {
                    x = t.next(x, b);
                    if x == DEAD {
                        return None;
                    }
                }
                Some(State::Dfa(x))
            }
            (Kind::JsonObject, State::Json(j)) => {
                bytes.iter().try_fold(j, |j, &b| j.next(b)).map(State::Json)
            }
            _ => None,
        }
    }

    pub(crate) fn is_accepting(&self, s: State) -> bool {
        match (&self.kind, s) {
            (Kind::Dfa(t), State::Dfa(x)) => t.is_accepting(x),
            (Kind::JsonObject, State::Json(j)) => j.is_accepting(),
            _ => false,
        }
    }

    /// Fewest bytes from `s` to an accepting state.
    pub(crate) fn distance(&self, s: State) -> u32 {
        match (&self.kind, s) {
            (Kind::Dfa(t), State::Dfa(x)) => t.distance(x),
            (Kind::JsonObject, State::Json(j)) => j.distance(),
            _ => u32::MAX,
        }
    }

    /// Sets in `mask` the bit of every trie token allowed from `s` (EOS is the caller's).
    pub(crate) fn walk(&self, s: State, vocab: &crate::Vocab, mask: &mut [u64]) {
        match (&self.kind, s) {
            (Kind::Dfa(t), State::Dfa(x)) => crate::mask::walk(&DfaStep(t), x, vocab, mask),
            (Kind::JsonObject, State::Json(j)) => crate::mask::walk(&JsonStep, j, vocab, mask),
            _ => {}
        }
    }
}

struct DfaStep<'a>(&'a Table);

impl crate::mask::Step for DfaStep<'_> {
    type S = u32;
    #[inline]
    fn step(&self, s: u32, b: u8) -> Option<u32> {
        let n = self.0.next(s, b);
        (n != DEAD).then_some(n)
    }
}

struct JsonStep;

impl crate::mask::Step for JsonStep {
    type S = JState;
    #[inline]
    fn step(&self, s: JState, b: u8) -> Option<JState> {
        s.next(b)
    }
}
