//! llama-server's `POST /tokenize` and `POST /detokenize` with the model's tokenizer (used by
//! clients, e.g. `memoria bench serve`, to size prompts in tokens).

use bytes::Bytes;
use serde_json::json;

use super::schema::{DetokenizeRequest, TokenizeRequest};
use crate::body::{Response, ok_json};
use crate::error::ApiError;
use crate::state::AppState;

/// Text to token ids.
pub fn tokenize(state: &AppState, body: &Bytes) -> Result<Response, ApiError> {
    let req: TokenizeRequest = super::json::parse(body)?;
    let tok = state.engine.tokenizer();
    let ids = tok.encode(
        &req.content,
        req.add_special.unwrap_or(false),
        req.parse_special.unwrap_or(true),
    );
    Ok(ok_json(&json!({"tokens": ids})))
}

/// Token ids to text.
pub fn detokenize(state: &AppState, body: &Bytes) -> Result<Response, ApiError> {
    let req: DetokenizeRequest = super::json::parse(body)?;
    let tok = state.engine.tokenizer();
    let n = tok.n_vocab();
    if let Some(bad) = req.tokens.iter().find(|&&t| t as usize >= n) {
        return Err(ApiError::invalid(
            "tokens",
            format!("token id {bad} is not in the vocabulary ({n} tokens)"),
        ));
    }
    Ok(ok_json(
        &json!({"content": tok.decode(&req.tokens, false, true)}),
    ))
}
