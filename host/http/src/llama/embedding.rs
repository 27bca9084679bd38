//! llama-server's `POST /embedding` (and `/embeddings`): `content` (or `input`) as a text, token
//! ids or a list of them, answered as `[{"index": i, "embedding": [[...]]}]` (one pooled,
//! normalised vector per input) through the same engine path as `/v1/embeddings`.

use bytes::Bytes;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::body::{Response, ok_json};
use crate::error::ApiError;
use crate::openai::Ctx;
use crate::openai::schema::EmbedInput;

#[derive(Deserialize)]
struct EmbeddingRequest {
    content: Option<EmbedInput>,
    input: Option<EmbedInput>,
    model: Option<String>,
}

/// Handles one request.
pub async fn handle(ctx: Ctx, body: Bytes) -> Result<Response, ApiError> {
    let req: EmbeddingRequest = crate::openai::parse_json(&body)?;
    ctx.check_model(req.model.as_deref())?;
    let Some(input) = req.content.or(req.input) else {
        return Err(ApiError::invalid("content", "`content` is required"));
    };
    let tok = ctx.state.engine.tokenizer().clone();
    let text = |t: &str, i| crate::openai::embeddings::text_tokens(&tok, t, i);
    let inputs: Vec<Vec<u32>> = match input {
        EmbedInput::Text(t) => vec![text(&t, 0)?],
        EmbedInput::Texts(v) => v
            .iter()
            .enumerate()
            .map(|(i, t)| text(t, i))
            .collect::<Result<_, _>>()?,
        EmbedInput::Tokens(ids) => vec![ids],
        EmbedInput::TokenLists(v) => v,
    };
    let (out, _) = crate::openai::embeddings::compute(&ctx, inputs).await?;
    let data: Vec<Value> = out
        .iter()
        .enumerate()
        .map(|(i, e)| json!({"index": i, "embedding": [*e.vector]}))
        .collect();
    Ok(ok_json(&Value::Array(data)))
}
