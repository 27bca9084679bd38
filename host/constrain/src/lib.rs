//! Structured outputs: OpenAI's `response_format` (`json_object`, `json_schema`) compiled into a
//! token-level constraint over a model's vocabulary, so constrained decoding always yields text
//! that parses and validates.
//!
//! # Use
//!
//! ```text
//! // once per model; with memoria-model's tokenizer: token_bytes[id] = tok.token_to_piece(id,
//! // false) (empty for control tokens, never allowed), eog_ids = tok.eog_ids()
//! let vocab = Arc::new(Vocab::new(&token_bytes, &eog_ids)?);
//! let cache = ConstraintCache::new(vocab, 64, DEFAULT_MASK_CACHE_BYTES); // once per model
//! let c = cache.get(&response_format)?;        // per request: Err → HTTP 400, None → `text`
//! let mut m = Matcher::new(c);                 // per session (clone it to fork for n > 1)
//! loop {
//!     m.apply(&mut logits_row);                // disallowed ids → -inf, before sampling
//!     let tok = sampler.sample(&logits_row);
//!     m.advance(tok)?;                         // Err only for a token the mask refused
//!     if m.is_finished() { break }             // an end-of-generation id was taken
//! }
//! ```
//!
//! `ResponseFormat` implements `Deserialize` itself, keeping the schema's member order (so the
//! request field can be typed `Option<ResponseFormat>`); [`ConstrainError::param`] names the
//! field or keyword for the 400.
//!
//! # How
//!
//! A schema becomes one anchored regex (the subset below), determinized by `regex-automata`
//! (a dense DFA, all-matches semantics), copied into our own table over its byte classes and
//! trimmed to the states that can still reach acceptance. `json_object` uses our own pushdown
//! recognizer (objects/arrays nested at most [`MAX_DEPTH`] deep). The token mask is ours: the
//! vocabulary's bytes form a depth-first byte trie, walked through the automaton from the current
//! state, a refused prefix skipping its whole subtree. Inside a string (a state where every plain
//! byte, printable ASCII but `"` and `\`, leads to one same state for as long as a plain token
//! can be, or loops) the plain tokens are taken as a precomputed mask by length and only the
//! trie of the other tokens (2k nodes of SmolLM2's 100k) is walked. Masks are cached per
//! automaton state in each [`Constraint`] (shared by all sessions of that format on that model),
//! bounded to
//! [`DEFAULT_MASK_CACHE_BYTES`] (configurable), oldest out first; a cached step copies or applies
//! the mask without allocating. End-of-generation ids are allowed exactly in accepting states.
//! Every reachable state allows at least one token when the vocabulary holds all 256 single
//! bytes (byte-level BPE and SentencePiece with byte fallback do).
//!
//! A [`Wrapped`] format (built by the server for tool calls in a chat template's own syntax) is
//! the schema's regex between literal texts, repeated with a separator up to a bound, optionally
//! in alternation with "any text not starting with a trigger literal" (`tool_choice: auto`):
//! still one anchored DFA, so masks, caching and the guarantees below hold unchanged.
//!
//! # Supported JSON Schema subset (OpenAI strict mode)
//!
//! - `type`: `object`, `array`, `string`, `number`, `integer`, `boolean`, `null`, or an array of
//!   them (nullable: `["string", "null"]`).
//! - objects: `properties` (keys emitted in `properties` order, as OpenAI does), `required`
//!   (members not listed are optional), `additionalProperties` (any value; undeclared members
//!   are never emitted, which validates under every setting).
//! - arrays: `items` (required; a list of schemas is a tuple of exactly those items),
//!   `minItems`, `maxItems` (≤ 1000).
//! - without `type`, keywords of one type alone imply it (`items`: array, `properties`:
//!   object).
//! - strings: `minLength`, `maxLength` (≤ 1000 characters, an escape counting as one), `format`
//!   `date`, `time`, `date-time`, `uuid`.
//! - strings: `pattern` (ECMA-262: literals, classes with `\d \w \s` in ECMA's ASCII/ECMA
//!   meanings, `.`, groups `(...)` `(?:...)` `(?<name>...)`, `|`, `* + ? {m} {m,} {m,n}`, `^`/`$`
//!   only at the very start/end, unanchored otherwise): the decoded text matches; characters JSON
//!   escapes (`"`, `\`, controls) are matched in their escaped form. Refused: back-references,
//!   look-around, `\b`/`\B`, `\c`, `[]`/`[^]`, anchors elsewhere, and `pattern` beside
//!   `minLength`/`maxLength`/`format`.
//! - integers: `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum` (numbers; draft 4's
//!   booleans too), exactly: every emitted integer is in range and every in-range integer of at
//!   most 16 digits can be emitted (fractional bounds rounded inward). `multipleOf`: 1 anywhere;
//!   another positive integer with both bounds and at most [`schema::MAX_MULTIPLES`] multiples
//!   between them.
//! - numbers: `minimum: 0` (literals without a sign) and `maximum: 0` (a `-` or a zero literal);
//!   both exact (every emitted value is in range), other number bounds are refused.
//! - `enum`, `const` (any JSON values, emitted compact; values not of a declared `type` dropped).
//! - `anyOf` (alone, besides annotations).
//! - `$ref` to a local JSON pointer (`#`, `#/$defs/x`, `#/definitions/x`, ...). Recursive
//!   references are unrolled [`MAX_REF_DEPTH`] levels deep; beyond that the recursive branch is
//!   dropped (a nullable or optional use ends, a required one makes the schema empty: an error).
//! - annotations ignored: `title`, `description`, `default`, `examples`, `$schema`, `$id`,
//!   `$comment`, `deprecated`, `readOnly`, `writeOnly`, `$defs`, `definitions`.
//!
//! Refused with [`ConstrainError::Unsupported`] naming the keyword: `allOf`, `oneOf`, `not`,
//! `if`/`then`/`else`, `patternProperties`, `propertyNames`, numeric keywords on `number`
//! other than `minimum: 0`/`maximum: 0` (a fraction or exponent is not bounded exactly), `multipleOf` beyond the case above, `minProperties`/`maxProperties`,
//! `dependent*`, `unevaluated*`, `prefixItems`, `contains`, `uniqueItems`, other `format`s,
//! remote `$ref`, `$anchor`/`$dynamicRef`, the empty schema `{}`/`true` and a schema without
//! `type`/`enum`/`const`/`anyOf`/`$ref` (any value), an array without `items`, `required` names
//! missing from `properties`, `nullable`, and any unknown keyword.
//!
//! # Output policy
//!
//! Compact JSON: no whitespace except at most one space after each `:` and `,`; no leading or
//! trailing whitespace. Numbers: at most 16 integer digits, 16 fraction digits and a 2-digit
//! exponent (every literal is a finite f64). Strings: valid UTF-8, no raw control characters,
//! escapes `\" \\ \/ \b \f \n \r \t \uXXXX` without surrogate code units (characters beyond the
//! BMP are written as UTF-8). Strings are otherwise unbounded unless `maxLength` says so:
//! `max_tokens` still ends a session, with incomplete JSON, as OpenAI's `finish_reason: length`.

mod constraint;
mod dfa;
mod error;
mod format;
mod gbnf;
mod grammar;
mod json;
mod mask;
mod matcher;
mod pda;
pub mod schema;
mod vocab;
mod wrap;

pub use constraint::{CacheStats, Constraint, ConstraintCache, DEFAULT_MASK_CACHE_BYTES};
pub use error::ConstrainError;
pub use format::{JsonSchemaFormat, ResponseFormat};
pub use gbnf::MAX_GBNF_REPEAT;
pub use grammar::Grammar;
pub use json::Json;
pub use matcher::Matcher;
pub use pda::MAX_DEPTH;
pub use schema::{MAX_REF_DEPTH, MAX_REPEAT, MAX_SCHEMA_DEPTH};
pub use vocab::{MAX_TOKEN_BYTES, Vocab};
pub use wrap::{MAX_WRAPPED_ITEMS, Wrapped};
