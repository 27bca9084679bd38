//! `POST /v1/embeddings`: mean-pooled, L2-normalised final hidden states of each input, from
//! the engine's embedding cache or computed by the engine, batched into its steps
//! (`EngineHandle::embed`).
//! `encoding_format` is `float` or `base64` (little-endian f32, what the `openai` package asks
//! for by default). In a namespace with `hit_timing = "pad"` the response leaves no earlier than
//! computing every input would have taken (the estimate learnt from computed ones, bucketed and
//! jittered as for first tokens), so a vector from the cache cannot be told by its timing.

use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use bytes::Bytes;
use serde_json::{Value, json};

use super::Ctx;
use super::schema::{EmbedInput, EmbeddingRequest};
use crate::body::{Response, ok_json};
use crate::error::ApiError;

/// Most inputs per request (OpenAI's limit).
const MAX_INPUTS: usize = 2048;

/// Handles one request.
pub async fn handle(ctx: Ctx, body: Bytes) -> Result<Response, ApiError> {
    let req: EmbeddingRequest = super::json::parse(&body)?;
    ctx.check_model(req.model.as_deref())?;
    let base64 = match req.encoding_format.as_deref() {
        None | Some("float") => false,
        Some("base64") => true,
        Some(other) => {
            return Err(ApiError::invalid(
                "encoding_format",
                format!("`encoding_format` {other:?}: use float or base64"),
            ));
        }
    };
    let engine = &ctx.state.engine;
    let n_embd = engine.model().hparams().n_embd;
    if let Some(d) = req.dimensions
        && d != n_embd as u64
    {
        return Err(ApiError::invalid(
            "dimensions",
            format!("`dimensions` = {d}: this model's embeddings have {n_embd} dimensions"),
        ));
    }
    let tok = engine.tokenizer().clone();
    let inputs: Vec<Vec<u32>> = match req.input {
        EmbedInput::Text(t) => vec![text_tokens(&tok, &t, 0)?],
        EmbedInput::Texts(v) => v
            .iter()
            .enumerate()
            .map(|(i, t)| text_tokens(&tok, t, i))
            .collect::<Result<_, _>>()?,
        EmbedInput::Tokens(ids) => vec![ids],
        EmbedInput::TokenLists(v) => v,
    };
    let (out, prompt_tokens) = compute(&ctx, inputs).await?;
    let data: Vec<Value> = out
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let embedding = if base64 {
                Value::String(encode_base64(&e.vector))
            } else {
                json!(*e.vector)
            };
            json!({"object": "embedding", "index": i, "embedding": embedding})
        })
        .collect();
    Ok(ok_json(&json!({
        "object": "list",
        "data": data,
        "model": ctx.model_id(),
        "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens},
    })))
}

/// The embeddings of `inputs` (checked: 1 to [`MAX_INPUTS`], each non-empty, within the
/// context, in the vocabulary) and their token count, through the engine, released no earlier
/// than a padded namespace's estimate (also llama-server's `/embedding`).
pub(crate) async fn compute(
    ctx: &Ctx,
    inputs: Vec<Vec<u32>>,
) -> Result<(Vec<memoria_sched::Embedded>, usize), ApiError> {
    let engine = &ctx.state.engine;
    let n_vocab = engine.tokenizer().n_vocab();
    if inputs.is_empty() || inputs.len() > MAX_INPUTS {
        return Err(ApiError::invalid(
            "input",
            format!(
                "`input` needs 1 to {MAX_INPUTS} items, got {}",
                inputs.len()
            ),
        ));
    }
    let max = ctx.max_context();
    for (i, ids) in inputs.iter().enumerate() {
        if ids.is_empty() {
            return Err(ApiError::invalid("input", format!("`input[{i}]` is empty")));
        }
        if ids.len() > max {
            return Err(ApiError::invalid(
                "input",
                format!(
                    "`input[{i}]` has {} tokens; this model's maximum context length is {max}",
                    ids.len()
                ),
            )
            .with_code("context_length_exceeded"));
        }
        if let Some(bad) = ids.iter().find(|&&t| t as usize >= n_vocab) {
            return Err(ApiError::invalid(
                "input",
                format!("`input[{i}]`: token id {bad} is not in the vocabulary ({n_vocab} tokens)"),
            ));
        }
    }
    let _permit = ctx.admit().await?;
    let started = Instant::now();
    let prompt_tokens: usize = inputs.iter().map(Vec::len).sum();
    let out = engine.embed(ctx.ns.id, &inputs).await?;
    let computed = memoria_sched::handle::computed_tokens(&inputs, &out);
    let hits = out.iter().filter(|e| e.cached).count();
    ctx.nsm.embeddings.fetch_add(out.len() as u64, Relaxed);
    ctx.nsm.embedding_cache_hits.fetch_add(hits as u64, Relaxed);
    if computed > 0 {
        ctx.state
            .embed_pad
            .observe(prompt_tokens, computed, started.elapsed());
    }
    if ctx.ns.spec.pads_hits() {
        let at = ctx
            .state
            .embed_pad
            .release_at(started, prompt_tokens, Instant::now());
        tokio::time::sleep_until(at.into()).await;
    }
    Ok((out, prompt_tokens))
}

pub(crate) fn text_tokens(
    tok: &memoria_model::tokenizer::Tokenizer,
    text: &str,
    i: usize,
) -> Result<Vec<u32>, ApiError> {
    if text.is_empty() {
        return Err(ApiError::invalid(
            "input",
            format!("`input[{i}]` is an empty string"),
        ));
    }
    Ok(tok.encode(text, true, false))
}

/// Standard base64 (with padding) of the vector's little-endian f32 bytes.
fn encode_base64(v: &[f32]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> shift) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn base64_matches_rfc4648() {
        let one = super::encode_base64(&[1.0]);
        assert_eq!(one, "AACAPw==");
        let two = super::encode_base64(&[1.0, -2.0]);
        assert_eq!(two, "AACAPwAAAMA=");
    }
}
