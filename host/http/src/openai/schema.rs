//! The OpenAI request schema memoria accepts: every known field has a type (a value of the wrong
//! type is a 400 naming it), and fields memoria does not know are ignored, as OpenAI's and
//! llama-server's clients expect (a new client library's new field must not break requests).

use serde::Deserialize;
use serde_json::Value;

/// `stop`: one string or up to four.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Stop {
    One(String),
    Many(Vec<String>),
}

/// `stream_options`.
#[derive(Debug, Deserialize)]
pub struct StreamOptions {
    pub include_usage: Option<bool>,
}

/// A content part of a chat message.
#[derive(Debug, Deserialize)]
#[allow(
    dead_code,
    reason = "some fields are accepted for OpenAI compatibility and ignored"
)]
pub struct ContentPart {
    #[serde(rename = "type")]
    pub kind: String,
    pub text: Option<String>,
    pub image_url: Option<Value>,
    pub input_audio: Option<Value>,
    pub file: Option<Value>,
}

/// A chat message's content.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Content {
    Text(String),
    Parts(Vec<ContentPart>),
}

/// One chat message.
#[derive(Debug, Deserialize)]
#[allow(
    dead_code,
    reason = "some fields are accepted for OpenAI compatibility and ignored"
)]
pub struct Message {
    pub role: String,
    pub content: Option<Content>,
    pub name: Option<String>,
    pub tool_calls: Option<Value>,
    pub tool_call_id: Option<String>,
    pub refusal: Option<String>,
    /// An assistant turn's reasoning (as a reasoning answer returned it).
    pub reasoning_content: Option<String>,
}

/// `POST /v1/chat/completions`.
#[derive(Debug, Deserialize)]
#[allow(
    dead_code,
    reason = "some fields are accepted for OpenAI compatibility and ignored"
)]
pub struct ChatRequest {
    pub model: Option<String>,
    pub messages: Vec<Message>,
    /// An empty `messages` is rendered as it is (the template's opening of an answer) rather
    /// than refused: set by the Anthropic route, whose llama-server counterpart accepts it.
    #[serde(skip)]
    pub allow_empty_messages: bool,
    pub max_tokens: Option<u64>,
    pub max_completion_tokens: Option<u64>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub top_k: Option<u64>,
    pub min_p: Option<f64>,
    pub repeat_penalty: Option<f64>,
    pub presence_penalty: Option<f64>,
    pub frequency_penalty: Option<f64>,
    pub seed: Option<i64>,
    pub n: Option<u64>,
    pub stream: Option<bool>,
    pub stream_options: Option<StreamOptions>,
    pub stop: Option<Stop>,
    pub user: Option<String>,
    pub logprobs: Option<bool>,
    pub top_logprobs: Option<u64>,
    pub logit_bias: Option<serde_json::Map<String, Value>>,
    /// Structured outputs: `text`, `json_object` or `json_schema` (member order kept).
    pub response_format: Option<memoria_constrain::ResponseFormat>,
    pub tools: Option<Vec<Value>>,
    pub tool_choice: Option<Value>,
    pub parallel_tool_calls: Option<bool>,
    pub metadata: Option<Value>,
    pub store: Option<bool>,
    pub service_tier: Option<String>,
    /// llama-server's: keep generating past end-of-generation tokens.
    pub ignore_eos: Option<bool>,
    /// memoria's: `off` turns speculative decoding off for this request.
    pub speculation: Option<super::params::SpeculationField>,
    /// Open the assistant's answer after the conversation (default true).
    pub add_generation_prompt: Option<bool>,
    /// Continue a final assistant message instead of answering anew (default true).
    pub continue_final_message: Option<bool>,
    /// llama-server's: add `__verbose` (the rendered prompt) to the answer (default: on when
    /// the server logs at debug level, `--verbose`).
    pub verbose: Option<bool>,
    /// llama-server's: tokens to generate, when `max_tokens` is absent.
    pub n_predict: Option<i64>,
    /// llama-server's: a JSON Schema the answer must follow.
    pub json_schema: Option<Value>,
    /// llama-server's: a GBNF grammar constraining the output (non-recursive grammars).
    pub grammar: Option<String>,
    /// llama-server's: further chat template variables (`enable_thinking`, ...).
    pub chat_template_kwargs: Option<serde_json::Map<String, Value>>,
    /// OpenAI's reasoning effort; given to the template as `reasoning_effort` (gpt-oss reads it)
    /// unless `chat_template_kwargs` sets that.
    pub reasoning_effort: Option<String>,
}

/// `prompt` of a completion: text or token ids, one or a list (each its own choices).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Prompt {
    Text(String),
    Texts(Vec<String>),
    Tokens(Vec<u32>),
    TokenLists(Vec<Vec<u32>>),
}

/// `POST /v1/completions`.
#[derive(Debug, Deserialize)]
#[allow(
    dead_code,
    reason = "some fields are accepted for OpenAI compatibility and ignored"
)]
pub struct CompletionRequest {
    pub model: Option<String>,
    pub prompt: Prompt,
    pub max_tokens: Option<u64>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub top_k: Option<u64>,
    pub min_p: Option<f64>,
    pub repeat_penalty: Option<f64>,
    pub presence_penalty: Option<f64>,
    pub frequency_penalty: Option<f64>,
    pub seed: Option<i64>,
    pub n: Option<u64>,
    pub best_of: Option<u64>,
    pub stream: Option<bool>,
    pub stream_options: Option<StreamOptions>,
    pub stop: Option<Stop>,
    pub echo: Option<bool>,
    pub suffix: Option<String>,
    pub user: Option<String>,
    pub logprobs: Option<u64>,
    pub logit_bias: Option<serde_json::Map<String, Value>>,
    /// llama-server's: keep generating past end-of-generation tokens.
    pub ignore_eos: Option<bool>,
    /// memoria's: `off` turns speculative decoding off for this request.
    pub speculation: Option<super::params::SpeculationField>,
    /// Structured outputs on completions too (as vLLM and llama-server accept it).
    pub response_format: Option<memoria_constrain::ResponseFormat>,
}

/// `input` of an embeddings request.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum EmbedInput {
    Text(String),
    Texts(Vec<String>),
    Tokens(Vec<u32>),
    TokenLists(Vec<Vec<u32>>),
}

/// `POST /v1/embeddings`.
#[derive(Debug, Deserialize)]
#[allow(
    dead_code,
    reason = "some fields are accepted for OpenAI compatibility and ignored"
)]
pub struct EmbeddingRequest {
    pub model: Option<String>,
    pub input: EmbedInput,
    pub encoding_format: Option<String>,
    pub dimensions: Option<u64>,
    pub user: Option<String>,
}
