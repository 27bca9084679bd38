//! llama-server's own API, beside the OpenAI one and on the same engine path (`openai::run`):
//! `/completion` (and `/completions`), `/infill`, `/props`, `/slots` with save, restore and
//! erase, `/apply-template`, `/embedding` (and `/embeddings`), `/tokenize` (with pieces) and
//! `/detokenize`. Requests take llama-server's field names (`n_predict`, `n_probs`, `id_slot`,
//! ...); errors take its shape, `{"error": {"code": STATUS, "message", "type"}}`.

pub mod completion;
pub mod embedding;
mod format;
pub mod infill;
pub mod props;
mod request;
pub mod slots;
pub mod template;
pub mod tokenize;

use crate::body::{Response, json_response};
use crate::error::ApiError;

/// An error in llama-server's shape: the HTTP status as `code`, its `type` and `message` (and
/// the field at fault, when one is).
pub fn error_response(e: ApiError) -> Response {
    let kind = match e.status.as_u16() {
        404 => "not_found_error",
        501 => "not_supported_error",
        503 => "unavailable_error",
        _ => e.kind,
    };
    let mut body = serde_json::json!({
        "error": {
            "code": e.status.as_u16(),
            "message": e.message,
            "type": kind,
        }
    });
    if let Some(p) = &e.param {
        body["error"]["param"] = serde_json::json!(p);
    }
    e.add_figures(&mut body);
    let mut resp = json_response(e.status, &body);
    if let Some(s) = e.retry_after
        && let Ok(v) = http::HeaderValue::from_str(&s.to_string())
    {
        resp.headers_mut().insert(http::header::RETRY_AFTER, v);
    }
    resp
}
