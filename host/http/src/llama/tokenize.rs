//! llama-server's `POST /tokenize` (with `with_pieces`: each token's id and text, or its bytes
//! when they are not whole UTF-8) and `POST /detokenize`, with the model's tokenizer.

use bytes::Bytes;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::body::{Response, ok_json};
use crate::error::ApiError;
use crate::state::AppState;

/// `POST /tokenize`.
#[derive(Debug, Deserialize)]
struct TokenizeRequest {
    content: String,
    add_special: Option<bool>,
    parse_special: Option<bool>,
    with_pieces: Option<bool>,
}

/// `POST /detokenize`.
#[derive(Debug, Deserialize)]
struct DetokenizeRequest {
    tokens: Vec<u32>,
}

/// Text to token ids.
pub fn tokenize(state: &AppState, body: &Bytes) -> Result<Response, ApiError> {
    let req: TokenizeRequest = crate::openai::parse_json(body)?;
    let tok = state.engine.tokenizer();
    let ids = tok.encode(
        &req.content,
        req.add_special.unwrap_or(false),
        req.parse_special.unwrap_or(true),
    );
    if !req.with_pieces.unwrap_or(false) {
        return Ok(ok_json(&json!({"tokens": ids})));
    }
    let tokens: Vec<Value> = ids
        .iter()
        .map(|&id| {
            let bytes = tok.token_to_piece(id, true);
            let piece = match String::from_utf8(bytes) {
                Ok(s) => json!(s),
                Err(e) => json!(e.into_bytes()),
            };
            json!({"id": id, "piece": piece})
        })
        .collect();
    Ok(ok_json(&json!({"tokens": tokens})))
}

/// Token ids to text.
pub fn detokenize(state: &AppState, body: &Bytes) -> Result<Response, ApiError> {
    let req: DetokenizeRequest = crate::openai::parse_json(body)?;
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
