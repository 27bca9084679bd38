//! The checks of a chat completion request that need no model state: `n`, `logprobs`, tools,
//! `response_format` against tools, `stream_options`, sampling ranges, `logit_bias`, `stop` and
//! the messages (roles, content parts, earlier tool calls in the form the template's tool syntax
//! takes). Rendering, the constraint compiler and the context budget follow in the handler.
//! Invariant: every refusal is a 400 naming its field.

use memoria_constrain::ResponseFormat;
use memoria_model::chat::{ChatMessage, ChatTool};
use memoria_sched::sampling::SamplingParams;

use super::schema::{ChatRequest, Content, Message};
use super::tool_syntax::ToolSyntax;
use super::{params, tools};
use crate::error::ApiError;
use crate::state::RequestDefaults;

/// A chat request that passed [`check`].
pub(crate) struct Checked {
    pub n: usize,
    pub top_logprobs: Option<usize>,
    pub tool_plan: Option<tools::ToolPlan>,
    /// The output format to compile (the tools' when the request has tools).
    pub format: Option<ResponseFormat>,
    pub stream: bool,
    pub include_usage: bool,
    pub sampling: SamplingParams,
    pub stop: Vec<String>,
    pub ignore_eos: bool,
    /// The conversation, tool instructions included.
    pub messages: Vec<ChatMessage>,
    /// The template's `tools` variable (a native tool syntax with tools in play).
    pub template_tools: Option<Vec<ChatTool>>,
    /// The tool syntax answers are constrained to and parsed in.
    pub syntax: ToolSyntax,
    /// The field that sets the completion budget and its value.
    pub max_tokens: (&'static str, Option<u64>),
    /// How the conversation is rendered (generation prompt, assistant prefill).
    pub render: super::prompt::Render,
}

/// Checks `req` for a model of `n_vocab` tokens whose chat template writes tool calls in
/// `syntax`; fields the request leaves out take the server's `defaults`.
pub(crate) fn check(
    mut req: ChatRequest,
    n_vocab: usize,
    syntax: ToolSyntax,
    defaults: &RequestDefaults,
) -> Result<Checked, ApiError> {
    let n = params::choices("n", req.n, 1)?;
    let top_logprobs = match (req.logprobs.unwrap_or(false), req.top_logprobs) {
        (_, Some(k)) if k > 20 => {
            return Err(ApiError::invalid(
                "top_logprobs",
                format!("`top_logprobs` = {k} is out of range: use 0 to 20"),
            ));
        }
        (false, Some(_)) => {
            return Err(ApiError::invalid(
                "top_logprobs",
                "`top_logprobs` needs `logprobs` set to true",
            ));
        }
        (true, k) => Some(usize::try_from(k.unwrap_or(0)).unwrap_or(0)),
        (false, None) => None,
    };
    let mut tool_plan = tools::plan(
        req.tools.as_ref(),
        req.tool_choice.as_ref(),
        req.parallel_tool_calls.unwrap_or(true),
        syntax,
    )?;
    let format = match (tool_plan.as_ref(), req.response_format.take()) {
        (Some(_), Some(f)) if f != ResponseFormat::Text => {
            return Err(ApiError::invalid(
                "response_format",
                "`response_format` cannot be combined with `tools` (tool calls are already constrained JSON)",
            ));
        }
        (Some(p), _) => Some(p.format.clone()),
        (None, f) => f,
    };
    let format = llama_format(format, req.json_schema.take(), req.grammar.take())?;
    let stream = req.stream.unwrap_or(false);
    let include_usage = params::include_usage(stream, req.stream_options.as_ref())?;
    let mut sampling = params::sampling(&params::sampling_fields_of!(req), defaults)?;
    sampling.logit_bias = params::logit_bias(req.logit_bias.as_ref(), n_vocab)?;
    sampling.logprobs = top_logprobs;
    let stop = params::stops(req.stop)?;
    let ignore_eos = req.ignore_eos.unwrap_or(false);
    let mut messages = messages(req.messages, syntax, req.allow_empty_messages)?;
    let mut render = render_of(
        req.add_generation_prompt,
        req.continue_final_message,
        &messages,
    )?;
    let mut template_tools = None;
    if let Some(p) = &mut tool_plan {
        tools::instruct(&mut messages, p);
        template_tools = p.template_tools.take();
    }
    let mut kwargs = req.chat_template_kwargs.take().unwrap_or_default();
    if let Some(effort) = req.reasoning_effort.take() {
        kwargs
            .entry("reasoning_effort")
            .or_insert(serde_json::Value::String(effort));
    }
    kwargs
        .entry("enable_thinking")
        .or_insert(serde_json::Value::Bool(!defaults.no_thinking));
    // Today's date, as llama-server gives every template (Llama 3.x, FireFunction).
    for (key, format) in [("date_string", "%d %b %Y"), ("datetime", "%b %d %Y")] {
        kwargs
            .entry(key)
            .or_insert_with(|| memoria_model::chat::strftime_utc_now(format).into());
    }
    // FireFunction v2 appends a `functions` variable no caller sets; llama.cpp's Jinja joins an
    // undefined value as empty text, where minijinja refuses `"..." + undefined`.
    kwargs
        .entry("functions")
        .or_insert(serde_json::Value::String(String::new()));
    render.kwargs = kwargs;
    let max_tokens = match (req.max_completion_tokens, req.max_tokens, req.n_predict) {
        (Some(m), _, _) => ("max_completion_tokens", Some(m)),
        (None, Some(m), _) => ("max_tokens", Some(m)),
        (None, None, Some(n)) if n > 0 => ("n_predict", Some(n.unsigned_abs())),
        (None, None, _) => ("max_tokens", None),
    };
    Ok(Checked {
        n,
        top_logprobs,
        tool_plan,
        format,
        stream,
        include_usage,
        sampling,
        stop,
        ignore_eos,
        messages,
        template_tools,
        syntax,
        max_tokens,
        render,
    })
}

/// How the conversation is rendered. Refused as llama-server refuses them: both
/// `add_generation_prompt` and `continue_final_message` set to true (the answer cannot both
/// open anew and continue the last message), and a continued final assistant message that
/// follows another assistant message.
fn render_of(
    generation_prompt: Option<bool>,
    continue_final: Option<bool>,
    messages: &[ChatMessage],
) -> Result<super::prompt::Render, ApiError> {
    if generation_prompt == Some(true) && continue_final == Some(true) {
        return Err(ApiError::invalid(
            "continue_final_message",
            "cannot set both `add_generation_prompt` and `continue_final_message` to true",
        ));
    }
    let continue_final = continue_final.unwrap_or(true);
    let n = messages.len();
    if continue_final
        && n >= 2
        && messages[n - 1].role == "assistant"
        && messages[n - 2].role == "assistant"
    {
        return Err(ApiError::invalid(
            "messages",
            "cannot have 2 or more assistant messages at the end of the list (the last one is continued as the start of the answer; merge them, or set `continue_final_message` to false)",
        ));
    }
    Ok(super::prompt::Render {
        generation_prompt: generation_prompt.unwrap_or(true),
        continue_final,
        kwargs: serde_json::Map::new(),
    })
}

/// llama-server's structured-output fields beside `response_format`: a top-level JSON Schema
/// (`json_schema`) when no format is given, or a GBNF `grammar` (non-recursive ones).
pub(crate) fn llama_format(
    format: Option<ResponseFormat>,
    json_schema: Option<serde_json::Value>,
    grammar: Option<String>,
) -> Result<Option<ResponseFormat>, ApiError> {
    if let Some(g) = grammar.filter(|g| !g.trim().is_empty()) {
        if format.is_some() {
            return Err(ApiError::invalid(
                "grammar",
                "`grammar` and `response_format` cannot both be given",
            ));
        }
        return ResponseFormat::from_gbnf(&g)
            .map(Some)
            .map_err(|e| ApiError::invalid("grammar", e.to_string()));
    }
    match (format, json_schema) {
        (Some(f), _) => Ok(Some(f)),
        (None, Some(serde_json::Value::Null)) | (None, None) => Ok(None),
        (None, Some(schema)) => {
            let json = memoria_constrain::Json::parse(&schema.to_string()).map_err(|e| {
                ApiError::invalid("json_schema", format!("invalid `json_schema`: {e}"))
            })?;
            ResponseFormat::from_schema(&json, "json_schema")
                .map(Some)
                .map_err(|e| ApiError::invalid(e.param(), e.to_string()))
        }
    }
}

/// Validates roles and flattens content parts to text; an assistant turn's `tool_calls` become
/// the template's structured calls (a native syntax) or the generic form's text, its
/// `reasoning_content` goes to the template (and, with calls, as harmony's `thinking`), and a
/// `tool` turn keeps its `tool_call_id` and `name`.
fn messages(
    msgs: Vec<Message>,
    syntax: ToolSyntax,
    allow_empty: bool,
) -> Result<Vec<ChatMessage>, ApiError> {
    if msgs.is_empty() && !allow_empty {
        return Err(ApiError::invalid(
            "messages",
            "`messages` must contain at least one message",
        ));
    }
    let mut out = Vec::with_capacity(msgs.len());
    let n_msgs = msgs.len();
    for (i, m) in msgs.into_iter().enumerate() {
        // Text parts are joined by a newline, as llama.cpp does; a final assistant message (an
        // answer to continue) by a blank line, as llama.cpp writes the prefill.
        let joiner = if i + 1 == n_msgs && m.role == "assistant" {
            "\n\n"
        } else {
            "\n"
        };
        let role = match m.role.as_str() {
            "system" | "user" | "assistant" | "tool" => m.role.clone(),
            "developer" => "system".to_string(),
            other => {
                return Err(ApiError::invalid(
                    format!("messages[{i}].role"),
                    format!(
                        "`messages[{i}].role` {other:?} is not one of system, developer, user, assistant, tool"
                    ),
                ));
            }
        };
        let content = match m.content {
            Some(Content::Text(t)) => t,
            Some(Content::Parts(parts)) => {
                let mut text = String::new();
                for (j, p) in parts.into_iter().enumerate() {
                    match (p.kind.as_str(), p.text) {
                        ("text", Some(t)) => {
                            if !text.is_empty() {
                                text.push_str(joiner);
                            }
                            text.push_str(&t);
                        }
                        (kind, _) => {
                            return Err(ApiError::invalid(
                                format!("messages[{i}].content[{j}]"),
                                format!(
                                    "content parts of type {kind:?} are not supported (only text parts with `text`)"
                                ),
                            ));
                        }
                    }
                }
                text
            }
            None if role == "assistant" => match &m.tool_calls {
                Some(calls) if !syntax.is_native() => tools::calls_as_text(i, calls)?,
                _ => String::new(),
            },
            None => {
                return Err(ApiError::invalid(
                    format!("messages[{i}].content"),
                    format!("`messages[{i}].content` is required for role {role:?}"),
                ));
            }
        };
        let mut msg = ChatMessage::new(role, content);
        if syntax.is_native()
            && msg.role == "assistant"
            && let Some(calls) = &m.tool_calls
        {
            msg.tool_calls = tools::calls_of(i, calls)?;
        }
        if msg.role == "tool" {
            msg.tool_call_id = m.tool_call_id;
            msg.name = m.name;
        }
        if msg.role == "assistant" {
            // gpt-oss's template reads a call's reasoning as `thinking` (as llama.cpp passes it).
            if syntax == ToolSyntax::Harmony && !msg.tool_calls.is_empty() {
                msg.thinking.clone_from(&m.reasoning_content);
            }
            msg.reasoning_content = m.reasoning_content;
        }
        out.push(msg);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefill_and_generation_prompt_are_refused_together_as_llama_server_does() {
        let m = |r: &str| ChatMessage::new(r, "x");
        let open = [m("user"), m("assistant")];
        let e = render_of(Some(true), Some(true), &open).expect_err("both true");
        assert_eq!(e.param.as_deref(), Some("continue_final_message"));
        // Defaults: the final assistant message is continued.
        let r = render_of(None, None, &open).expect("defaults");
        assert!(r.generation_prompt && r.continue_final);
        let r = render_of(None, Some(true), &open).expect("continue alone");
        assert!(r.continue_final);
        // Two assistant messages at the end cannot be continued, but can be answered anew.
        let two = [m("user"), m("assistant"), m("assistant")];
        let e = render_of(None, None, &two).expect_err("two assistants");
        assert_eq!(e.param.as_deref(), Some("messages"));
        assert_eq!(e.status, http::StatusCode::BAD_REQUEST);
        let r = render_of(None, Some(false), &two).expect("closed and answered");
        assert!(!r.continue_final);
    }
}
