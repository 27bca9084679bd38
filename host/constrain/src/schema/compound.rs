//! The compound and textual values of a schema: strings (lengths, `format`, `pattern`), arrays
//! (`items`, tuples, `minItems`/`maxItems`) and objects (`properties` in order, `required`,
//! `additionalProperties`).

use super::{Gen, invalid, non_negative, pattern, pieces, pointer_escape, unsupported};
use crate::error::ConstrainError;
use crate::json::{Json, write_string};

impl<'a> Gen<'a> {
    pub(super) fn string(&self, s: &Json, path: &str) -> Result<String, ConstrainError> {
        let min = s
            .get("minLength")
            .map(|v| non_negative(v, "minLength", path))
            .transpose()?;
        let max = s
            .get("maxLength")
            .map(|v| non_negative(v, "maxLength", path))
            .transpose()?;
        if let Some(p) = s.get("pattern") {
            let Json::String(p) = p else {
                return Err(invalid(path, "`pattern` must be a string"));
            };
            if let Some(k) = ["minLength", "maxLength", "format"]
                .into_iter()
                .find(|k| s.get(k).is_some())
            {
                return Err(unsupported(
                    "pattern",
                    path,
                    format!(
                        "`pattern` with `{k}` is not supported (the two cannot be combined exactly)"
                    ),
                ));
            }
            return pattern::string(p).map_err(|reason| {
                unsupported("pattern", path, format!("pattern {p:?}: {reason}"))
            });
        }
        if let Some(f) = s.get("format") {
            let Json::String(f) = f else {
                return Err(invalid(path, "`format` must be a string"));
            };
            if min.is_some() || max.is_some() {
                return Err(unsupported(
                    "format",
                    path,
                    "`format` with `minLength`/`maxLength` is not supported",
                ));
            }
            return pieces::formatted_string(f).ok_or_else(|| {
                unsupported(
                    "format",
                    path,
                    format!(
                        "format {f:?} is not supported (supported: {})",
                        pieces::FORMATS
                    ),
                )
            });
        }
        let min = min.unwrap_or(0);
        if max.is_some_and(|x| x < min) {
            return Err(ConstrainError::Empty {
                path: path.to_owned(),
                reason: "`maxLength` is below `minLength`".to_owned(),
            });
        }
        Ok(pieces::string(min, max))
    }

    pub(super) fn array(
        &mut self,
        s: &'a Json,
        path: &str,
    ) -> Result<Option<String>, ConstrainError> {
        let min = s
            .get("minItems")
            .map(|v| non_negative(v, "minItems", path))
            .transpose()?
            .unwrap_or(0);
        let max = s
            .get("maxItems")
            .map(|v| non_negative(v, "maxItems", path))
            .transpose()?;
        if max.is_some_and(|x| x < min) {
            return Err(ConstrainError::Empty {
                path: path.to_owned(),
                reason: "`maxItems` is below `minItems`".to_owned(),
            });
        }
        let Some(items) = s.get("items") else {
            return Err(unsupported(
                "items",
                path,
                "an array without `items` (any values) is not supported",
            ));
        };
        if let Json::Array(tuple) = items {
            return self.tuple(tuple, (min, max), path);
        }
        let item = if max == Some(0) {
            None
        } else {
            self.node(items, &format!("{path}/items"))?
        };
        let Some(item) = item else {
            return Ok((min == 0).then(|| "\\[\\]".to_owned()));
        };
        let c = pieces::COMMA;
        let rest = match (min.saturating_sub(1), max.map(|x| x - 1)) {
            (0, None) => format!("(?:{c}{item})*"),
            (lo, None) => format!("(?:{c}{item}){{{lo},}}"),
            (0, Some(0)) => String::new(),
            (lo, Some(hi)) => format!("(?:{c}{item}){{{lo},{hi}}}"),
        };
        Ok(Some(if min == 0 {
            format!("\\[(?:{item}{rest})?\\]")
        } else {
            format!("\\[{item}{rest}\\]")
        }))
    }

    /// `items` as a list (draft 4's tuple form): exactly those items, in order (items past them
    /// are allowed by the schema and never emitted).
    fn tuple(
        &mut self,
        tuple: &'a [Json],
        (min, max): (u64, Option<u64>),
        path: &str,
    ) -> Result<Option<String>, ConstrainError> {
        let len = tuple.len() as u64;
        if min > len || max.is_some_and(|m| m < len) {
            return Err(unsupported(
                "items",
                path,
                "`minItems`/`maxItems` other than the length of a tuple `items` are not supported",
            ));
        }
        let mut parts = Vec::with_capacity(tuple.len());
        for (i, item) in tuple.iter().enumerate() {
            match self.node(item, &format!("{path}/items/{i}"))? {
                Some(re) => parts.push(re),
                None => return Ok(None),
            }
        }
        Ok(Some(format!("\\[{}\\]", parts.join(pieces::COMMA))))
    }

    pub(super) fn object(
        &mut self,
        s: &'a Json,
        path: &str,
    ) -> Result<Option<String>, ConstrainError> {
        match s.get("additionalProperties") {
            None | Some(Json::Bool(_) | Json::Object(_)) => {}
            Some(_) => {
                return Err(invalid(
                    path,
                    "`additionalProperties` must be a boolean or a schema",
                ));
            }
        }
        let props: &[(String, Json)] = match s.get("properties") {
            None => &[],
            Some(Json::Object(p)) => p,
            Some(_) => return Err(invalid(path, "`properties` must be an object")),
        };
        let required: Vec<&str> = match s.get("required") {
            None => Vec::new(),
            Some(Json::Array(r)) => r
                .iter()
                .map(|n| match n {
                    Json::String(n) => Ok(n.as_str()),
                    _ => Err(invalid(path, "`required` entries must be strings")),
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(invalid(path, "`required` must be an array")),
        };
        if let Some(missing) = required
            .iter()
            .find(|n| !props.iter().any(|(k, _)| k == *n))
        {
            return Err(unsupported(
                "required",
                path,
                format!("required property {missing:?} is not in `properties`"),
            ));
        }
        // Each member as `"key": value`, with whether it must appear; members without an
        // instance are dropped when optional, and empty the object when required.
        let mut members: Vec<(String, bool)> = Vec::new();
        for (k, sub) in props {
            let req = required.contains(&k.as_str());
            let mut key = String::new();
            write_string(k, &mut key);
            let sub_path = format!("{path}/properties/{}", pointer_escape(k));
            match self.node(sub, &sub_path)? {
                Some(v) => members.push((
                    format!("{}{}{v}", regex_syntax::escape(&key), pieces::COLON),
                    req,
                )),
                None if req => return Ok(None),
                None => {}
            }
        }
        let c = pieces::COMMA;
        // tail(j): the members after j, each preceded by a comma, optional ones optional.
        let tail = |j: usize| -> String {
            members[j + 1..]
                .iter()
                .map(|(m, req)| {
                    if *req {
                        format!("{c}{m}")
                    } else {
                        format!("(?:{c}{m})?")
                    }
                })
                .collect()
        };
        // The first member present is any optional one before the first required one, or it.
        let first_required = members.iter().position(|(_, r)| *r);
        let last_first = first_required.unwrap_or(members.len().saturating_sub(1));
        let mut branches: Vec<String> = Vec::new();
        if !members.is_empty() {
            for (j, (m, _)) in members.iter().enumerate().take(last_first + 1) {
                branches.push(format!("{m}{}", tail(j)));
            }
        }
        let body = match (branches.len(), first_required) {
            (0, _) => String::new(),
            (1, Some(_)) => branches.pop().unwrap_or_default(),
            (_, Some(_)) => format!("(?:{})", branches.join("|")),
            (_, None) => format!("(?:{})?", branches.join("|")),
        };
        Ok(Some(format!("\\{{{body}\\}}")))
    }
}
