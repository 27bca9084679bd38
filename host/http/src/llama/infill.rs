//! `POST /infill`: llama-server's fill-in-the-middle for code editors. The prompt is laid out
//! as its `/infill` does it (prefix-suffix-middle): `[BOS] FIM_PRE extra-context + input_prefix
//! FIM_SUF input_suffix FIM_MID prompt`, the texts encoded without special tokens (a file's
//! text cannot smuggle in FIM markers); `input_extra` files (`{"filename", "text"}`) go before
//! the prefix as `filename\ntext` chunks. Then it runs as `/completion` does.

use bytes::Bytes;
use serde_json::Value;

use super::request::NativeRequest;
use crate::body::Response;
use crate::error::ApiError;
use crate::openai::Ctx;

/// The most `input_extra` chunks one request may give.
const MAX_EXTRA: usize = 256;

/// Handles one request.
pub async fn handle(ctx: Ctx, body: Bytes) -> Result<Response, ApiError> {
    let req: NativeRequest = crate::openai::parse_json(&body)?;
    ctx.check_model(req.model.as_deref())?;
    let tok = ctx.state.engine.tokenizer().clone();
    let mut prefix_text = extra_context(req.input_extra.as_deref())?;
    let fim = tok.fim().ok_or_else(|| {
        ApiError::not_implemented(
            "infill needs a model with fill-in-the-middle tokens (FIM prefix, suffix and middle), and this model has none",
        )
    })?;
    prefix_text.push_str(req.input_prefix.as_deref().unwrap_or(""));
    let middle = match &req.prompt {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(_) => {
            return Err(ApiError::invalid(
                "prompt",
                "`prompt` of an infill is the text before the cursor (a string)",
            ));
        }
    };
    let prefix = tok.encode(&prefix_text, false, false);
    let suffix = tok.encode(req.input_suffix.as_deref().unwrap_or(""), false, false);
    let mut ids = crate::openai::completion_check::infill(&tok, fim, &prefix, &suffix);
    ids.extend(tok.encode(&middle, false, false));
    super::completion::generate(ctx, req, vec![ids], "infill").await
}

/// The `input_extra` chunks as text (`filename\ntext` each); every chunk must have a string
/// `filename` and a string `text`.
fn extra_context(extra: Option<&[Value]>) -> Result<String, ApiError> {
    let Some(items) = extra else {
        return Ok(String::new());
    };
    if items.len() > MAX_EXTRA {
        return Err(ApiError::invalid(
            "input_extra",
            format!(
                "`input_extra` has {} chunks; at most {MAX_EXTRA} are allowed",
                items.len()
            ),
        ));
    }
    let mut out = String::new();
    for (i, chunk) in items.iter().enumerate() {
        let field = |k: &str| chunk.get(k).and_then(Value::as_str);
        match (field("filename"), field("text")) {
            (Some(name), Some(text)) => {
                out.push_str(name);
                out.push('\n');
                out.push_str(text);
                if !text.ends_with('\n') {
                    out.push('\n');
                }
            }
            _ => {
                return Err(ApiError::invalid(
                    format!("input_extra[{i}]"),
                    format!("`input_extra[{i}]` needs a string `filename` and a string `text`"),
                ));
            }
        }
    }
    Ok(out)
}
