//! What a declared public prefix looks like in a prompt, as tokens. A prompt reaches the engine
//! already rendered and tokenized, so a declared text is matched in the two forms it takes
//! there: **raw**, a `/v1/completions` prompt starting with the text (tokenized as that
//! endpoint does: BOS, special tokens parsed), and **chat**, the text as the system message of
//! a `/v1/chat/completions` conversation: the chat template rendered for `[system: text, user:
//! …]`, cut just before the user message's content (so the form includes the template's BOS,
//! system header, the text, the end of the system turn and the user header), tokenized as the
//! chat endpoint does. A prompt's leading whole blocks are public while they equal the start of
//! one form (see `memoria_kv::PublicChain`); the block holding the boundary is public only if
//! it lies entirely inside the form, so a tokenizer merging across the boundary costs at most
//! that block, never correctness.

use memoria_model::chat::{ChatMessage, ChatTemplate};
use memoria_model::tokenizer::Tokenizer;

/// Stands for the user's content while rendering (private-use characters no template alters).
const USER_MARK: &str = "\u{e000}memoria-public-prefix-user\u{e000}";

/// The token forms of one declared `text`: raw, then chat (when the template renders it with
/// the user's content after the system text); duplicates removed.
pub fn prefix_tokens(tok: &Tokenizer, chat: &ChatTemplate, text: &str) -> Vec<Vec<u32>> {
    let mut forms = vec![tok.encode(text, true, true)];
    let messages = [
        ChatMessage::new("system", text),
        ChatMessage::new("user", USER_MARK),
    ];
    if let Ok(rendered) = chat.render(&messages, true)
        && let Some(at) = rendered.find(USER_MARK)
        && rendered[..at].contains(text)
    {
        let head = &rendered[..at];
        let bos_written = tok
            .bos()
            .and_then(|b| tok.token_text(b))
            .is_some_and(|b| !b.is_empty() && head.starts_with(b));
        let form = tok.encode(head, !bos_written, true);
        if !forms.contains(&form) {
            forms.push(form);
        }
    }
    forms
}
