//! A request's prompt tokens, one function for the host and the router (`memoria route`) so both
//! tokenize a request the same way by construction: a chat conversation is rendered with the
//! chat template (tools given to it, or tool instructions added, as the handler does) and encoded as llama-server
//! does (BOS unless the template already wrote it, special tokens parsed); a completion's first
//! prompt is encoded with BOS, or taken as given when it is token ids.

use memoria_model::chat::{ChatMessage, ChatTemplate, ChatTool};
use memoria_model::tokenizer::Tokenizer;

use super::schema::{ChatRequest, CompletionRequest, Prompt};
use crate::error::ApiError;

/// The tokens of a rendered conversation (the chat handler's prompt); `tools` is the template's
/// `tools` variable.
pub fn chat_tokens(
    template: &ChatTemplate,
    tok: &Tokenizer,
    messages: &[ChatMessage],
    tools: Option<&[ChatTool]>,
) -> Result<Vec<u32>, ApiError> {
    let text = template
        .render_with_tools(messages, tools, true)
        .map_err(|e| {
            ApiError::invalid(
                "messages",
                format!("the chat template refused the conversation: {e}"),
            )
        })?;
    let bos_written = tok
        .bos()
        .and_then(|b| tok.token_text(b))
        .is_some_and(|b| !b.is_empty() && text.starts_with(b));
    Ok(tok.encode(&text, !bos_written, true))
}

/// The prompt tokens the body of `POST {path}` asks for, where `path` is `/v1/chat/completions`
/// or `/v1/completions` (a trailing slash allowed); `None` for other paths and for bodies the
/// host would refuse (the router then routes without a prompt and the host answers the error).
pub fn request_tokens(
    template: &ChatTemplate,
    tok: &Tokenizer,
    path: &str,
    body: &[u8],
) -> Option<Vec<u32>> {
    match path.trim_end_matches('/') {
        "/v1/chat/completions" => {
            let req: ChatRequest = super::json::parse(body).ok()?;
            // The handler's own checks, which also add the tool instructions.
            let syntax = super::tool_syntax::ToolSyntax::detect(template);
            let checked = super::chat_check::check(req, tok.n_vocab(), syntax).ok()?;
            let tools = checked.template_tools.as_deref();
            chat_tokens(template, tok, &checked.messages, tools).ok()
        }
        "/v1/completions" => {
            let req: CompletionRequest = super::json::parse(body).ok()?;
            match req.prompt {
                Prompt::Text(t) => Some(tok.encode(&t, true, true)),
                Prompt::Texts(v) => v.first().map(|t| tok.encode(t, true, true)),
                Prompt::Tokens(v) => Some(v),
                Prompt::TokenLists(mut v) => (!v.is_empty()).then(|| v.swap_remove(0)),
            }
        }
        _ => None,
    }
}
