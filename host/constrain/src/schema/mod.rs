//! JSON Schema (OpenAI's strict-mode subset) to one anchored regex over the output bytes. A
//! sub-schema with no instance within the limits compiles to `None` (the empty language), which
//! alternatives drop and optional members skip.

mod compound;
mod number;
mod pattern;
mod pieces;

use crate::error::ConstrainError;
use crate::json::{Json, write_string};

use self::number::{integer, number};

pub(crate) use pieces::MAX_DIGITS;

/// A recursive `$ref` is expanded at most this many times on one path; deeper, its branch is
/// dropped (a nullable or optional use ends there, a required one makes the schema empty).
pub const MAX_REF_DEPTH: usize = 3;
/// Schemas nested deeper than this are refused (bounds the compiler's recursion).
pub const MAX_SCHEMA_DEPTH: usize = 48;
/// `minItems`/`maxItems`/`minLength`/`maxLength` above this are refused.
pub const MAX_REPEAT: u64 = 1000;
/// The generated regex may not exceed this many bytes.
const MAX_REGEX_LEN: usize = 4 << 20;

/// Keywords that only annotate, accepted anywhere and ignored.
const ANNOTATIONS: &[&str] = &[
    "title",
    "description",
    "default",
    "examples",
    "$schema",
    "$id",
    "$comment",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$defs",
    "definitions",
];

/// The numeric keywords (`number.rs`).
const NUMERIC: &[&str] = &[
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
];

/// `multipleOf` on an integer is compiled as the list of its multiples when there are at most
/// this many between the bounds.
pub const MAX_MULTIPLES: i128 = 256;

/// The JSON types and the keywords each one takes.
const TYPES: &[(&str, &[&str])] = &[
    ("null", &[]),
    ("boolean", &[]),
    ("integer", NUMERIC),
    ("number", NUMERIC),
    ("string", &["minLength", "maxLength", "format", "pattern"]),
    ("array", &["items", "minItems", "maxItems"]),
    (
        "object",
        &["properties", "required", "additionalProperties"],
    ),
];

/// Keywords that pick the value another way than `type`.
const SELECTORS: &[&str] = &["type", "enum", "const", "anyOf", "$ref"];

/// Why a known JSON Schema keyword is refused.
fn refusal(keyword: &str) -> &'static str {
    match keyword {
        "allOf" | "oneOf" | "not" | "if" | "then" | "else" => {
            "only `anyOf` combines schemas (OpenAI strict mode has no allOf/oneOf/not/if)"
        }
        "patternProperties" | "propertyNames" => "regular-expression keywords are not supported",
        "minProperties"
        | "maxProperties"
        | "dependentRequired"
        | "dependentSchemas"
        | "unevaluatedProperties" => "this object keyword is not supported",
        "prefixItems" | "contains" | "minContains" | "maxContains" | "uniqueItems"
        | "unevaluatedItems" | "additionalItems" => "this array keyword is not supported",
        "$anchor" | "$dynamicRef" | "$dynamicAnchor" | "$recursiveRef" | "$recursiveAnchor" => {
            "only `$ref` to a JSON pointer in this schema is supported"
        }
        "nullable" => "not JSON Schema: use `\"type\": [T, \"null\"]` or `anyOf`",
        _ => "unknown keyword",
    }
}

fn unsupported(keyword: &str, path: &str, reason: impl Into<String>) -> ConstrainError {
    ConstrainError::Unsupported {
        keyword: keyword.to_owned(),
        path: if path.is_empty() {
            "#".to_owned()
        } else {
            path.to_owned()
        },
        reason: reason.into(),
    }
}

fn invalid(path: &str, reason: impl Into<String>) -> ConstrainError {
    ConstrainError::InvalidSchema {
        path: if path.is_empty() {
            "#".to_owned()
        } else {
            path.to_owned()
        },
        reason: reason.into(),
    }
}

/// Compiles `root` into a regex matching exactly the JSON texts the crate may emit for it.
pub(crate) fn to_regex(root: &Json) -> Result<String, ConstrainError> {
    let mut g = Gen {
        root,
        refs: Vec::new(),
        depth: 0,
    };
    g.node(root, "#")?.ok_or_else(|| ConstrainError::Empty {
        path: "#".to_owned(),
        reason: format!(
            "no value fits (recursive `$ref` are unrolled {MAX_REF_DEPTH} levels deep)"
        ),
    })
}

struct Gen<'a> {
    root: &'a Json,
    /// The `$ref`s being expanded, outermost first.
    refs: Vec<&'a str>,
    depth: usize,
}

/// `(?:a|b|...)` of the branches that have instances; `None` when none has.
fn alternation(branches: Vec<String>) -> Option<String> {
    match branches.len() {
        0 => None,
        1 => branches.into_iter().next(),
        _ => Some(format!("(?:{})", branches.join("|"))),
    }
}

fn non_negative(v: &Json, keyword: &str, path: &str) -> Result<u64, ConstrainError> {
    let n = match v {
        Json::Number(n) => n.as_u64(),
        _ => None,
    }
    .ok_or_else(|| invalid(path, format!("`{keyword}` must be a non-negative integer")))?;
    if n > MAX_REPEAT {
        return Err(ConstrainError::TooComplex(format!(
            "`{keyword}` {n} at {path} is above {MAX_REPEAT}"
        )));
    }
    Ok(n)
}

impl<'a> Gen<'a> {
    fn node(&mut self, s: &'a Json, path: &str) -> Result<Option<String>, ConstrainError> {
        if self.depth >= MAX_SCHEMA_DEPTH {
            return Err(ConstrainError::TooComplex(format!(
                "schema nested deeper than {MAX_SCHEMA_DEPTH} at {path}"
            )));
        }
        self.depth += 1;
        let r = self.node_inner(s, path);
        self.depth -= 1;
        let r = r?;
        if r.as_ref().is_some_and(|re| re.len() > MAX_REGEX_LEN) {
            return Err(ConstrainError::TooComplex(format!(
                "the automaton's expression passes {MAX_REGEX_LEN} bytes at {path}"
            )));
        }
        Ok(r)
    }

    fn node_inner(&mut self, s: &'a Json, path: &str) -> Result<Option<String>, ConstrainError> {
        let members = match s {
            Json::Object(m) => m,
            Json::Bool(false) => return Ok(None),
            Json::Bool(true) => {
                return Err(unsupported(
                    "true",
                    path,
                    "a schema accepting any value is not supported: give `type`, `enum`, `const`, `anyOf` or `$ref`",
                ));
            }
            _ => return Err(invalid(path, "a schema must be an object or a boolean")),
        };
        let type_keywords = |k: &str| TYPES.iter().any(|(_, kws)| kws.contains(&k));
        for (k, _) in members {
            let k = k.as_str();
            if !(ANNOTATIONS.contains(&k) || SELECTORS.contains(&k) || type_keywords(k)) {
                return Err(unsupported(k, path, refusal(k)));
            }
        }
        let structural: Vec<&str> = members
            .iter()
            .map(|(k, _)| k.as_str())
            .filter(|k| !ANNOTATIONS.contains(k))
            .collect();
        let only = |allowed: &[&str], what: &str| -> Result<(), ConstrainError> {
            match structural.iter().find(|k| !allowed.contains(k)) {
                Some(k) => Err(unsupported(
                    k,
                    path,
                    format!("`{k}` beside `{what}` is not supported"),
                )),
                None => Ok(()),
            }
        };
        if let Some(r) = s.get("$ref") {
            only(&["$ref"], "$ref")?;
            return self.reference(r, path);
        }
        if let Some(any) = s.get("anyOf") {
            only(&["anyOf"], "anyOf")?;
            let Json::Array(subs) = any else {
                return Err(invalid(path, "`anyOf` must be an array"));
            };
            if subs.is_empty() {
                return Err(invalid(path, "`anyOf` must not be empty"));
            }
            let mut branches = Vec::new();
            for (i, sub) in subs.iter().enumerate() {
                if let Some(re) = self.node(sub, &format!("{path}/anyOf/{i}"))? {
                    branches.push(re);
                }
            }
            return Ok(alternation(branches));
        }
        let types = self.types(s, path)?;
        if s.get("enum").is_some() || s.get("const").is_some() {
            only(&["enum", "const", "type"], "enum/const")?;
            return self.literals(s, types.as_deref(), path);
        }
        // Without `type`, keywords of one type alone imply it (`items` an array, `properties`
        // an object), as llama.cpp reads such schemas.
        let implied = || {
            // A keyword several types take (`minimum`) implies none.
            let of = |k: &&str| {
                let mut of = TYPES.iter().filter(|(_, kws)| kws.contains(k));
                match (of.next(), of.next()) {
                    (Some((t, _)), None) => Some(*t),
                    _ => None,
                }
            };
            let first = structural.first().and_then(of)?;
            structural
                .iter()
                .all(|k| of(k) == Some(first))
                .then(|| vec![first])
        };
        let Some(types) = types.or_else(implied) else {
            return Err(unsupported(
                structural.first().copied().unwrap_or("{}"),
                path,
                "a schema without `type` (any value) is not supported: give `type`, `enum`, `const`, `anyOf` or `$ref`",
            ));
        };
        for k in &structural {
            if *k != "type"
                && !TYPES
                    .iter()
                    .any(|(t, kws)| types.contains(t) && kws.contains(k))
            {
                return Err(unsupported(
                    k,
                    path,
                    format!("`{k}` does not apply to type {types:?}"),
                ));
            }
        }
        let mut branches = Vec::new();
        for t in &types {
            if let Some(re) = self.typed(s, t, path)? {
                branches.push(re);
            }
        }
        Ok(alternation(branches))
    }

    /// The `type` keyword as a list of known type names; `None` when absent.
    fn types(&self, s: &Json, path: &str) -> Result<Option<Vec<&'static str>>, ConstrainError> {
        let names: Vec<&str> = match s.get("type") {
            None => return Ok(None),
            Some(Json::String(t)) => vec![t.as_str()],
            Some(Json::Array(ts)) if !ts.is_empty() => ts
                .iter()
                .map(|t| match t {
                    Json::String(t) => Ok(t.as_str()),
                    _ => Err(invalid(path, "`type` entries must be strings")),
                })
                .collect::<Result<_, _>>()?,
            Some(_) => {
                return Err(invalid(
                    path,
                    "`type` must be a string or a non-empty array",
                ));
            }
        };
        let mut out = Vec::new();
        for n in names {
            let Some((t, _)) = TYPES.iter().find(|(t, _)| *t == n) else {
                return Err(invalid(path, format!("unknown type `{n}`")));
            };
            if !out.contains(t) {
                out.push(*t);
            }
        }
        Ok(Some(out))
    }

    fn reference(&mut self, r: &'a Json, path: &str) -> Result<Option<String>, ConstrainError> {
        let Json::String(r) = r else {
            return Err(invalid(path, "`$ref` must be a string"));
        };
        let target = resolve(self.root, r).ok_or_else(|| {
            if r.starts_with('#') {
                invalid(
                    path,
                    format!("`$ref` {r:?} does not resolve in this schema"),
                )
            } else {
                unsupported(
                    "$ref",
                    path,
                    format!("only local references (`#/...`) are supported, not {r:?}"),
                )
            }
        })?;
        if self.refs.iter().filter(|x| **x == r.as_str()).count() >= MAX_REF_DEPTH {
            return Ok(None);
        }
        self.refs.push(r.as_str());
        let out = self.node(target, r);
        self.refs.pop();
        out
    }

    /// `enum` / `const`: the compact serializations, keeping those of the declared types.
    fn literals(
        &self,
        s: &Json,
        types: Option<&[&str]>,
        path: &str,
    ) -> Result<Option<String>, ConstrainError> {
        let mut values: Vec<&Json> = Vec::new();
        if let Some(c) = s.get("const") {
            values.push(c);
        }
        if let Some(e) = s.get("enum") {
            let Json::Array(vs) = e else {
                return Err(invalid(path, "`enum` must be an array"));
            };
            if vs.is_empty() {
                return Err(invalid(path, "`enum` must not be empty"));
            }
            if values.is_empty() {
                values.extend(vs.iter());
            } else {
                values.retain(|c| vs.contains(c));
            }
        }
        let fits = |v: &Json| match types {
            None => true,
            Some(ts) => {
                let t = v.type_name();
                ts.contains(&t) || (t == "integer" && ts.contains(&"number"))
            }
        };
        let mut branches: Vec<String> = Vec::new();
        for v in values.into_iter().filter(|v| fits(v)) {
            let lit = regex_syntax::escape(&v.to_compact());
            if !branches.contains(&lit) {
                branches.push(lit);
            }
        }
        if branches.is_empty() {
            return Err(ConstrainError::Empty {
                path: path.to_owned(),
                reason: "no `enum`/`const` value has the declared type".to_owned(),
            });
        }
        Ok(alternation(branches))
    }

    fn typed(
        &mut self,
        s: &'a Json,
        t: &str,
        path: &str,
    ) -> Result<Option<String>, ConstrainError> {
        Ok(Some(match t {
            "null" => pieces::NULL.to_owned(),
            "boolean" => pieces::BOOLEAN.to_owned(),
            "integer" => return integer(s, path),
            "number" => return number(s, path),
            "string" => return self.string(s, path).map(Some),
            "array" => return self.array(s, path),
            _ => return self.object(s, path),
        }))
    }
}

/// `~` and `/` escaped for a JSON pointer segment.
fn pointer_escape(s: &str) -> String {
    s.replace('~', "~0").replace('/', "~1")
}

/// Resolves a local reference `#` or `#/a/b/0` (JSON pointer, `~0`/`~1` unescaped).
fn resolve<'a>(root: &'a Json, r: &str) -> Option<&'a Json> {
    let rest = r.strip_prefix('#')?;
    if rest.is_empty() {
        return Some(root);
    }
    let mut cur = root;
    for seg in rest.strip_prefix('/')?.split('/') {
        let seg = seg.replace("~1", "/").replace("~0", "~");
        cur = match cur {
            Json::Object(_) => cur.get(&seg)?,
            Json::Array(items) => items.get(seg.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(cur)
}

#[cfg(test)]
mod tests;
