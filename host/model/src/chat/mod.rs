//! Chat templates: renders a model's `tokenizer.chat_template` (Jinja, from GGUF metadata) over a
//! conversation as HF transformers' `apply_chat_template` and llama.cpp's server (`--jinja`) do.
//! Invariants: a template is compiled once, in [`ChatTemplate::new`], so syntax errors surface
//! there and never while rendering; rendering reads only its arguments, the BOS/EOS texts and, for
//! `strftime_now`, the clock; the Jinja dialect is HF's (see `env`). A model without a template
//! gets a built-in one by name (`builtin`), as llama.cpp's `--chat-template NAME`.

mod builtin;
mod env;
mod error;
#[cfg(test)]
mod family_tests;
mod json;
mod strftime;
#[cfg(test)]
mod tests;

use minijinja::value::Serde;
use minijinja::{Environment, Value, context};
use serde::{Deserialize, Serialize};

pub use builtin::{BUILTIN_NAMES, default_for_arch};
pub use error::ChatError;

/// The current UTC time formatted like Python's `strftime` (what templates' `strftime_now`
/// gives).
pub fn strftime_utc_now(format: &str) -> String {
    strftime::strftime(format, strftime::unix_now())
}

use crate::gguf::GgufFile;
use crate::tokenizer::Tokenizer;

/// One turn of a conversation: `role` is "system", "user", "assistant", "tool" (or what a
/// template knows). The template sees `tool_calls`, `tool_call_id` and `name` only when set (a
/// template may test `'tool_calls' in message`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
    /// An assistant turn's tool calls.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ChatToolCall>,
    /// A `tool` turn's answer to this call id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// A `tool` turn's function name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// An assistant turn's reasoning, apart from its answer (Qwen3's templates read it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    /// An assistant turn's reasoning under the name gpt-oss's (harmony) template reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<String>,
}

/// One tool call of an assistant turn, in OpenAI's shape but with `arguments` as a JSON value
/// (as HF templates expect: they write it with `tojson`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatToolCall {
    pub id: String,
    #[serde(rename = "type", default = "function_kind")]
    pub kind: String,
    pub function: ChatFunctionCall,
}

/// The function a [`ChatToolCall`] calls.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatFunctionCall {
    pub name: String,
    pub arguments: serde_json::Value,
}

fn function_kind() -> String {
    "function".to_owned()
}

/// A tool offered to the model, given to the template as OpenAI's
/// `{"type": "function", "function": {"name", "description", "parameters"}}` (in that order).
#[derive(Debug, Clone, PartialEq)]
pub struct ChatTool {
    pub name: String,
    pub description: Option<String>,
    pub parameters: serde_json::Value,
}

impl Serialize for ChatTool {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Function<'a> {
            name: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            description: Option<&'a str>,
            parameters: &'a serde_json::Value,
        }
        #[derive(Serialize)]
        struct Tool<'a> {
            #[serde(rename = "type")]
            kind: &'static str,
            function: Function<'a>,
        }
        Tool {
            kind: "function",
            function: Function {
                name: &self.name,
                description: self.description.as_deref(),
                parameters: &self.parameters,
            },
        }
        .serialize(s)
    }
}

impl ChatMessage {
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> ChatMessage {
        ChatMessage {
            role: role.into(),
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            name: None,
            reasoning_content: None,
            thinking: None,
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
pub const CHATML_TEMPLATE: &str = builtin::CHATML;

/// GGUF key of a model's own template.
const GGUF_TEMPLATE_KEY: &str = "tokenizer.chat_template";

/// The name the template is registered under in its private environment.
const NAME: &str = "chat_template";

/// A compiled chat template plus the special-token texts it is rendered with.
pub struct ChatTemplate {
    env: Environment<'static>,
    source: String,
    /// The built-in name, for a template made by [`ChatTemplate::builtin`].
    builtin: Option<&'static str>,
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
            builtin: None,
            bos_token: bos_token.to_owned(),
            eos_token: eos_token.to_owned(),
        })
    }

    /// The built-in template `name` (`chatml`, `gemma`, `llama3`, `llama2`, `phi3`, ... see
    /// [`BUILTIN_NAMES`]), formatting exactly as llama.cpp's template of that name.
    pub fn builtin(
        name: &str,
        bos_token: &str,
        eos_token: &str,
    ) -> Result<ChatTemplate, ChatError> {
        let (Some(&known), Some(source)) = (
            BUILTIN_NAMES.iter().find(|&&n| n == name),
            builtin::source(name),
        ) else {
            return Err(ChatError::UnknownBuiltin {
                name: name.to_owned(),
                known: BUILTIN_NAMES.join(", "),
            });
        };
        let mut t = ChatTemplate::new(&source, bos_token, eos_token)?;
        t.builtin = Some(known);
        Ok(t)
    }

    /// The template to chat with a model, as llama-server chooses it: `override_template` when
    /// given (Jinja source if it holds `{{` or `{%`, else a built-in name, unknown ones an error), else the file's `tokenizer.chat_template`,
    /// else the architecture's built-in default (`gemma` for Gemma, ChatML otherwise). BOS/EOS
    /// texts come from the tokenizer. A file template that does not compile is an error (the
    /// caller may fall back to [`ChatTemplate::default_for`]).
    pub fn for_model(
        gguf: &GgufFile,
        tok: &Tokenizer,
        override_template: Option<&str>,
    ) -> Result<ChatTemplate, ChatError> {
        let (bos, eos) = special_texts(tok);
        match override_template {
            // A single word is a built-in's name (an unknown one is an error); anything else is
            // Jinja source, as llama-server's `--chat-template` takes either.
            Some(name) if is_template_name(name) => ChatTemplate::builtin(name.trim(), &bos, &eos),
            Some(source) => ChatTemplate::new(source, &bos, &eos),
            None => match gguf.get_str(GGUF_TEMPLATE_KEY) {
                Some(source) => ChatTemplate::new(source, &bos, &eos),
                None => ChatTemplate::default_for(gguf, tok),
            },
        }
    }

    /// The built-in default of the file's architecture (`general.architecture`).
    pub fn default_for(gguf: &GgufFile, tok: &Tokenizer) -> Result<ChatTemplate, ChatError> {
        let (bos, eos) = special_texts(tok);
        let arch = gguf.get_str("general.architecture").unwrap_or("");
        ChatTemplate::builtin(default_for_arch(arch), &bos, &eos)
    }

    /// The built-in name, when this is a built-in template.
    pub fn builtin_name(&self) -> Option<&'static str> {
        self.builtin
    }

    /// Renders `messages`; with `add_generation_prompt` the template appends the opening of an
    /// assistant turn. A template's `raise_exception(msg)` is [`ChatError::Raised`]`(msg)`.
    pub fn render(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
    ) -> Result<String, ChatError> {
        self.render_with_tools(messages, None, add_generation_prompt)
    }

    /// Renders as [`render`](Self::render), with `tools` given to the template as its `tools`
    /// variable (left undefined when `None`), as HF's `apply_chat_template(tools=...)` does.
    pub fn render_with_tools(
        &self,
        messages: &[ChatMessage],
        tools: Option<&[ChatTool]>,
        add_generation_prompt: bool,
    ) -> Result<String, ChatError> {
        self.render_with(
            messages,
            tools,
            add_generation_prompt,
            &serde_json::Map::new(),
        )
    }

    /// Renders as [`render_with_tools`](Self::render_with_tools) with `kwargs` as further
    /// template variables (llama-server's `chat_template_kwargs`, HF's extra
    /// `apply_chat_template` arguments: `enable_thinking`, `reasoning_effort`, ...). The
    /// variables the renderer sets itself (`messages`, `tools`, `add_generation_prompt`,
    /// `bos_token`, `eos_token`) win over a kwarg of the same name.
    pub fn render_with(
        &self,
        messages: &[ChatMessage],
        tools: Option<&[ChatTool]>,
        add_generation_prompt: bool,
        kwargs: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<String, ChatError> {
        let template = self
            .env
            .get_template(NAME)
            .map_err(|e| ChatError::from_compile(&e))?;
        let messages: Vec<Value> = messages.iter().map(|m| Value::from(Serde(m))).collect();
        let base = context! {
            messages => messages,
            bos_token => self.bos_token.as_str(),
            eos_token => self.eos_token.as_str(),
            add_generation_prompt => add_generation_prompt,
        };
        let base = match tools {
            Some(tools) => context! { tools => Value::from(Serde(tools)), ..base },
            None => base,
        };
        let ctx = if kwargs.is_empty() {
            base
        } else {
            context! { ..base, ..Value::from(Serde(kwargs)) }
        };
        template.render(ctx).map_err(|e| ChatError::from_render(&e))
    }

    /// Whether the template reads a `tools` variable: a template naming `tools` anywhere counts
    /// (a plain text search, as llama.cpp's capability detection is).
    pub fn uses_tools(&self) -> bool {
        self.source.contains("tools")
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

/// The BOS and EOS token texts a template is rendered with (empty when the vocabulary has none).
fn special_texts(tok: &Tokenizer) -> (String, String) {
    let text = |id: Option<u32>| id.and_then(|i| tok.token_text(i)).unwrap_or("").to_owned();
    (text(tok.bos()), text(tok.eos()))
}

/// Whether a `--chat-template` value is a built-in's name (one word of letters, digits, `.`,
/// `_` and `-`) rather than Jinja source.
fn is_template_name(s: &str) -> bool {
    let t = s.trim();
    !t.is_empty()
        && t.len() <= 64
        && t.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}
