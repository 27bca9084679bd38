//! Chat templates: renders a model's `tokenizer.chat_template` (Jinja, from GGUF metadata) over a
//! conversation as HF transformers' `apply_chat_template` and llama.cpp's server (`--jinja`) do.
//! Invariants: a template is compiled once, in [`ChatTemplate::new`], so syntax errors surface
//! there and never while rendering; rendering reads only its arguments, the BOS/EOS texts and, for
//! `strftime_now`, the clock; the Jinja dialect is HF's (see `env`).

mod env;
mod error;
mod json;
mod strftime;
#[cfg(test)]
mod tests;

use minijinja::{Environment, Value, context};
use serde::{Deserialize, Serialize};

pub use error::ChatError;

/// One turn of a conversation: `role` is "system", "user", "assistant" (or what a template knows).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
}

impl ChatMessage {
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> ChatMessage {
        ChatMessage {
            role: role.into(),
            content: content.into(),
        }
    }

    pub fn system(content: impl Into<String>) -> ChatMessage {
        ChatMessage::new("system", content)
    }

    pub fn user(content: impl Into<String>) -> ChatMessage {
        ChatMessage::new("user", content)
    }

    pub fn assistant(content: impl Into<String>) -> ChatMessage {
        ChatMessage::new("assistant", content)
    }
}

/// ChatML, the template llama.cpp falls back to when a model ships none.
pub const CHATML_TEMPLATE: &str = "{%- for message in messages %}\
{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}\
{%- endfor %}\
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

/// The name the template is registered under in its private environment.
const NAME: &str = "chat_template";

/// A compiled chat template plus the special-token texts it is rendered with.
pub struct ChatTemplate {
    env: Environment<'static>,
    source: String,
    bos_token: String,
    eos_token: String,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("source_len", &self.source.len())
            .field("bos_token", &self.bos_token)
            .field("eos_token", &self.eos_token)
            .finish()
    }
}

impl ChatTemplate {
    /// Compiles `source`; a Jinja syntax error is [`ChatError::Syntax`] with the line.
    pub fn new(source: &str, bos_token: &str, eos_token: &str) -> Result<ChatTemplate, ChatError> {
        let mut env = env::environment();
        env.add_template_owned(NAME, source.to_owned())
            .map_err(|e| ChatError::from_compile(&e))?;
        Ok(ChatTemplate {
            env,
            source: source.to_owned(),
            bos_token: bos_token.to_owned(),
            eos_token: eos_token.to_owned(),
        })
    }

    /// Renders `messages`; with `add_generation_prompt` the template appends the opening of an
    /// assistant turn. A template's `raise_exception(msg)` is [`ChatError::Raised`]`(msg)`.
    pub fn render(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
    ) -> Result<String, ChatError> {
        let template = self
            .env
            .get_template(NAME)
            .map_err(|e| ChatError::from_compile(&e))?;
        let messages: Vec<Value> = messages
            .iter()
            .map(|m| context! { role => m.role.as_str(), content => m.content.as_str() })
            .collect();
        let ctx = context! {
            messages => messages,
            bos_token => self.bos_token.as_str(),
            eos_token => self.eos_token.as_str(),
            add_generation_prompt => add_generation_prompt,
        };
        template.render(ctx).map_err(|e| ChatError::from_render(&e))
    }

    /// The template text as given to [`ChatTemplate::new`].
    pub fn source(&self) -> &str {
        &self.source
    }

    pub fn bos_token(&self) -> &str {
        &self.bos_token
    }

    pub fn eos_token(&self) -> &str {
        &self.eos_token
    }
}
