//! OpenAI's `response_format` request field: `text`, `json_object`, `json_schema`, read from an
//! order-preserving [`Json`] so the schema's `properties` order survives.

use serde::de::{Deserialize, Deserializer, Error as _};

use crate::error::ConstrainError;
use crate::json::Json;

/// The longest `json_schema.name` OpenAI accepts.
const MAX_NAME_LEN: usize = 64;

/// What the output must look like.
#[derive(Debug, Clone, PartialEq)]
pub enum ResponseFormat {
    /// No constraint (`{"type":"text"}`).
    Text,
    /// Any JSON object (`{"type":"json_object"}`).
    JsonObject,
    /// JSON text validating against a schema.
    JsonSchema(JsonSchemaFormat),
    /// A schema's JSON wrapped in literal text (a chat template's tool-call syntax); never read
    /// from a request's `response_format`, only built by the server.
    Wrapped(crate::wrap::Wrapped),
    /// Text a GBNF grammar (llama.cpp's `grammar` field) generates; built with
    /// [`ResponseFormat::from_gbnf`], which checks it.
    Gbnf(String),
}

/// The `json_schema` member of `{"type":"json_schema", "json_schema": {...}}`.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonSchemaFormat {
    /// `[a-zA-Z0-9_-]{1,64}`, as OpenAI requires.
    pub name: String,
    pub description: Option<String>,
    /// The schema; `None` when absent (then any JSON object, as `json_object`).
    pub schema: Option<Json>,
    /// OpenAI's `strict`; the constraint is enforced either way.
    pub strict: bool,
}

fn format_err(field: &str, reason: impl Into<String>) -> ConstrainError {
    ConstrainError::Format {
        field: field.to_owned(),
        reason: reason.into(),
    }
}

/// The name a schema gets when the request gives none.
const DEFAULT_NAME: &str = "response";

/// A schema value: an object or `true`.
fn schema_value(v: &Json, field: &str) -> Result<Json, ConstrainError> {
    match v {
        Json::Object(_) | Json::Bool(true) => Ok(v.clone()),
        _ => Err(format_err(field, "expected an object")),
    }
}

impl ResponseFormat {
    /// A bare JSON Schema (llama.cpp's top-level `json_schema` field): the JSON it describes.
    pub fn from_schema(schema: &Json, field: &str) -> Result<ResponseFormat, ConstrainError> {
        Ok(ResponseFormat::JsonSchema(JsonSchemaFormat {
            name: DEFAULT_NAME.to_owned(),
            description: None,
            schema: Some(schema_value(schema, field)?),
            strict: false,
        }))
    }

    /// Reads the value of the request's `response_format` field.
    pub fn from_json(v: &Json) -> Result<ResponseFormat, ConstrainError> {
        const F: &str = "response_format";
        let Json::Object(obj) = v else {
            return Err(format_err(F, "expected an object"));
        };
        let ty = match v.get("type") {
            Some(Json::String(t)) => t.as_str(),
            Some(_) => return Err(format_err("response_format.type", "expected a string")),
            None => return Err(format_err("response_format.type", "missing")),
        };
        match ty {
            "text" => Ok(ResponseFormat::Text),
            // llama.cpp's form: a schema beside `json_object` constrains the object.
            "json_object" => match obj.iter().find(|(k, _)| k == "schema") {
                None | Some((_, Json::Null)) => Ok(ResponseFormat::JsonObject),
                Some((_, schema)) => Ok(ResponseFormat::JsonSchema(JsonSchemaFormat {
                    name: DEFAULT_NAME.to_owned(),
                    description: None,
                    schema: Some(schema_value(schema, "response_format.schema")?),
                    strict: false,
                })),
            },
            "json_schema" => {
                let js = v
                    .get("json_schema")
                    .ok_or_else(|| format_err("response_format.json_schema", "missing"))?;
                JsonSchemaFormat::from_json(js).map(ResponseFormat::JsonSchema)
            }
            other => Err(format_err(
                "response_format.type",
                format!("`{other}` is not one of `text`, `json_object`, `json_schema`"),
            )),
        }
    }

    /// Parses the JSON text of a `response_format` value.
    pub fn from_json_str(text: &str) -> Result<ResponseFormat, ConstrainError> {
        let v = Json::parse(text).map_err(|e| format_err("response_format", e.to_string()))?;
        ResponseFormat::from_json(&v)
    }

    /// A GBNF grammar's format, checked (parsed, non-recursive, within the limits) here so that a
    /// bad grammar is refused before anything runs.
    pub fn from_gbnf(text: &str) -> Result<ResponseFormat, ConstrainError> {
        crate::gbnf::to_regex(text)?;
        Ok(ResponseFormat::Gbnf(text.to_owned()))
    }

    /// Whether this format constrains the output at all.
    pub fn is_constrained(&self) -> bool {
        !matches!(self, ResponseFormat::Text)
    }
}

impl JsonSchemaFormat {
    fn from_json(v: &Json) -> Result<JsonSchemaFormat, ConstrainError> {
        const F: &str = "response_format.json_schema";
        let Json::Object(_) = v else {
            return Err(format_err(F, "expected an object"));
        };
        // OpenAI requires a name; llama.cpp and most local servers do not.
        let name = match v.get("name") {
            Some(Json::String(n)) => n.clone(),
            Some(_) => {
                return Err(format_err(
                    "response_format.json_schema.name",
                    "expected a string",
                ));
            }
            None => DEFAULT_NAME.to_owned(),
        };
        let name_ok = !name.is_empty()
            && name.len() <= MAX_NAME_LEN
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !name_ok {
            return Err(format_err(
                "response_format.json_schema.name",
                "must be 1 to 64 characters of a-z, A-Z, 0-9, `_` and `-`",
            ));
        }
        let description = match v.get("description") {
            None | Some(Json::Null) => None,
            Some(Json::String(d)) => Some(d.clone()),
            Some(_) => {
                return Err(format_err(
                    "response_format.json_schema.description",
                    "expected a string",
                ));
            }
        };
        let schema = match v.get("schema") {
            None | Some(Json::Null) => None,
            Some(s) => Some(schema_value(s, "response_format.json_schema.schema")?),
        };
        let strict = match v.get("strict") {
            None | Some(Json::Null) => false,
            Some(Json::Bool(b)) => *b,
            Some(_) => {
                return Err(format_err(
                    "response_format.json_schema.strict",
                    "expected a boolean",
                ));
            }
        };
        Ok(JsonSchemaFormat {
            name,
            description,
            schema,
            strict,
        })
    }
}

impl<'de> Deserialize<'de> for ResponseFormat {
    /// Deserializes from the request body directly (member order kept); errors carry the message
    /// of [`ConstrainError`].
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<ResponseFormat, D::Error> {
        let v = Json::deserialize(d)?;
        ResponseFormat::from_json(&v).map_err(D::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_three_types() {
        assert_eq!(
            ResponseFormat::from_json_str(r#"{"type":"text"}"#).unwrap(),
            ResponseFormat::Text
        );
        assert_eq!(
            ResponseFormat::from_json_str(r#"{"type":"json_object"}"#).unwrap(),
            ResponseFormat::JsonObject
        );
        let f = ResponseFormat::from_json_str(
            r#"{"type":"json_schema","json_schema":{"name":"a-b_1","strict":true,
                "schema":{"type":"object","properties":{"z":{"type":"string"},"a":{"type":"null"}}}}}"#,
        )
        .unwrap();
        let ResponseFormat::JsonSchema(js) = f else {
            panic!("not json_schema")
        };
        assert!(js.strict);
        let Some(Json::Object(props)) = js.schema.as_ref().and_then(|s| s.get("properties")) else {
            panic!("no properties")
        };
        assert_eq!(props[0].0, "z", "properties keep document order");
    }

    #[test]
    fn names_the_bad_field() {
        let cases = [
            (r#"{"type":"xml"}"#, "response_format.type"),
            (r#"{"type":"json_schema"}"#, "response_format.json_schema"),
            (
                r#"{"type":"json_schema","json_schema":{"name":"a b"}}"#,
                "response_format.json_schema.name",
            ),
            (
                r#"{"type":"json_schema","json_schema":{"name":"a","strict":1}}"#,
                "response_format.json_schema.strict",
            ),
            (
                r#"{"type":"json_object","schema":7}"#,
                "response_format.schema",
            ),
        ];
        for (text, field) in cases {
            let e = ResponseFormat::from_json_str(text).unwrap_err();
            assert_eq!(e.param(), field, "{text}: {e}");
        }
    }

    #[test]
    fn deserializes_inside_a_request() {
        #[derive(serde::Deserialize)]
        struct Req {
            response_format: ResponseFormat,
        }
        let r: Req = serde_json::from_str(r#"{"response_format":{"type":"json_object"}}"#).unwrap();
        assert_eq!(r.response_format, ResponseFormat::JsonObject);
        let e = serde_json::from_str::<Req>(r#"{"response_format":{"type":"yaml"}}"#)
            .err()
            .unwrap();
        assert!(e.to_string().contains("response_format.type"), "{e}");
    }
}
