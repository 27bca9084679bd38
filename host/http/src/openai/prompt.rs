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
/// `tools` variable. A final assistant message is continued (see [`Render`]).
pub fn chat_tokens(
    template: &ChatTemplate,
    tok: &Tokenizer,
    messages: &[ChatMessage],
    tools: Option<&[ChatTool]>,
) -> Result<Vec<u32>, ApiError> {
    chat_tokens_as(template, tok, messages, tools, &Render::default())
}

/// How a conversation is rendered: with the opening of the assistant's answer
/// (`add_generation_prompt`, default true), and whether a final assistant message is continued
/// as the start of the answer (assistant prefill, `continue_final_message`, default true) rather
/// than closed and answered anew; `kwargs` are further template variables
/// (`chat_template_kwargs`).
#[derive(Clone, Debug)]
pub struct Render {
    pub generation_prompt: bool,
    pub continue_final: bool,
    pub kwargs: serde_json::Map<String, serde_json::Value>,
}

impl Default for Render {
    fn default() -> Self {
        Render {
            generation_prompt: true,
            continue_final: true,
            kwargs: serde_json::Map::new(),
        }
    }
}

/// [`chat_tokens`] rendered as `render` says.
pub fn chat_tokens_as(
    template: &ChatTemplate,
    tok: &Tokenizer,
    messages: &[ChatMessage],
    tools: Option<&[ChatTool]>,
    render: &Render,
) -> Result<Vec<u32>, ApiError> {
    let text = chat_text_of(template, messages, tools, render)?;
    let bos_written = tok
        .bos()
        .and_then(|b| tok.token_text(b))
        .is_some_and(|b| !b.is_empty() && text.starts_with(b));
    Ok(tok.encode(&text, !bos_written, true))
}

/// The rendered conversation. With a final assistant message to continue, the template renders
/// the whole conversation and the text is cut right after that message's content, so the
/// answer goes on from it (the template's end of turn is left out); an empty one is dropped and
/// the answer opened as usual.
pub fn chat_text_of(
    template: &ChatTemplate,
    messages: &[ChatMessage],
    tools: Option<&[ChatTool]>,
    render: &Render,
) -> Result<String, ApiError> {
    let refused = |e: memoria_model::chat::ChatError| {
        ApiError::invalid(
            "messages",
            format!("the chat template refused the conversation: {e}"),
        )
    };
    let last = messages.last().filter(|m| m.role == "assistant");
    if let Some(last) = last.filter(|_| render.continue_final && messages.len() > 1) {
        if last.content.is_empty() && last.tool_calls.is_empty() {
            let head = &messages[..messages.len() - 1];
            return template
                .render_with(head, tools, true, &render.kwargs)
                .map_err(refused);
        }
        let full = template
            .render_with(messages, tools, false, &render.kwargs)
            .map_err(refused)?;
        if !last.content.is_empty()
            && let Some(at) = full.rfind(last.content.as_str())
        {
            return Ok(full[..at + last.content.len()].to_string());
        }
        if last.content.is_empty() {
            return Ok(full);
        }
        // The template changed the content (e.g. trimmed its trailing blank lines): as
        // llama.cpp, the answer is opened as usual and the content follows verbatim.
        let head = &messages[..messages.len() - 1];
        let mut text = template
            .render_with(head, tools, true, &render.kwargs)
            .map_err(refused)?;
        text.push_str(&last.content);
        return Ok(text);
    }
    template
        .render_with(messages, tools, render.generation_prompt, &render.kwargs)
        .map_err(refused)
}

/// The text `POST /apply-template` answers: the chat request checked as the chat endpoint
/// checks it (tool instructions added) and rendered.
pub(crate) fn chat_text(
    state: &crate::state::AppState,
    req: ChatRequest,
) -> Result<String, ApiError> {
    let syntax = super::tool_syntax::ToolSyntax::detect(&state.chat);
    let n_vocab = state.engine.tokenizer().n_vocab();
    let checked = super::chat_check::check(req, n_vocab, syntax, &state.config.defaults)?;
    chat_text_of(
        &state.chat,
        &checked.messages,
        checked.template_tools.as_deref(),
        &checked.render,
    )
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
            let defaults = crate::state::RequestDefaults::default();
            let checked = super::chat_check::check(req, tok.n_vocab(), syntax, &defaults).ok()?;
            let tools = checked.template_tools.as_deref();
            chat_tokens_as(template, tok, &checked.messages, tools, &checked.render).ok()
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
