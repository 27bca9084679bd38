//! `POST /apply-template`: a chat request's conversation rendered with the chat template, as
//! the chat endpoint would render it (tools and the generation prompt included), without
//! generating: `{"prompt": TEXT}`.

use bytes::Bytes;
use serde_json::json;

use crate::body::{Response, ok_json};
use crate::error::ApiError;
use crate::openai::schema::ChatRequest;
use crate::state::AppState;

/// The answer.
pub fn apply(state: &AppState, body: &Bytes) -> Result<Response, ApiError> {
    let req: ChatRequest = crate::openai::parse_json(body)?;
    let text = crate::openai::prompt::chat_text(state, req)?;
    Ok(ok_json(&json!({"prompt": text})))
}
