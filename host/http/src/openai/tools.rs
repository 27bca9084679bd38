//! Tool calls for chat completions. With a template of a known tool syntax (`tool_syntax`) the
//! tools go to the template's `tools` variable and the answer is constrained to that syntax: the
//! call JSON between its literal wrappers (`required`, a named function), or with `auto` either
//! prose not starting with the syntax's trigger or the calls. Otherwise the generic form (as
//! llama.cpp does for templates without a tool syntax of their own): the tools are described in
//! the system message, the answer is constrained to JSON, either `{"tool_calls": [{"name",
//! "arguments"}]}` or, with `auto`, `{"response": "..."}`. Either way the answer is parsed back
//! into OpenAI's `message.tool_calls`; `none` leaves tools out.

use memoria_constrain::ResponseFormat;
use memoria_model::chat::{ChatFunctionCall, ChatMessage, ChatTool, ChatToolCall};
use serde_json::{Value, json};

use super::native_plan;
use super::tool_scan::{self, Scan};
use super::tool_syntax::ToolSyntax;
use crate::error::ApiError;

/// At most this many calls in one answer (one when `parallel_tool_calls` is false).
pub(super) const MAX_CALLS: usize = 4;

/// How a request's tools shape its generation.
pub struct ToolPlan {
    /// Added to (or as) the system message (the generic form only).
    pub instructions: Option<String>,
    /// The constraint the answer follows.
    pub format: ResponseFormat,
    /// The template's `tools` variable (native syntaxes only).
    pub template_tools: Option<Vec<ChatTool>>,
}

/// One validated tool.
pub(super) struct Tool {
    pub(super) name: String,
    pub(super) description: String,
    pub(super) parameters: Value,
}

fn tool_of(i: usize, v: &Value) -> Result<Tool, ApiError> {
    let field = format!("tools[{i}]");
    if v.get("type").and_then(Value::as_str) != Some("function") {
        return Err(ApiError::invalid(
            format!("{field}.type"),
            "only tools of type \"function\" are supported",
        ));
    }
    let f = v
        .get("function")
        .ok_or_else(|| ApiError::invalid(format!("{field}.function"), "a tool needs `function`"))?;
    let name = f
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| {
            !n.is_empty()
                && n.len() <= 64
                && n.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        })
        .ok_or_else(|| {
            ApiError::invalid(
                format!("{field}.function.name"),
                "a function name is 1 to 64 of a-z, A-Z, 0-9, _ and -",
            )
        })?;
    let parameters = match f.get("parameters") {
        None => json!({"type": "object", "properties": {}}),
        Some(p) if p.is_object() => p.clone(),
        Some(_) => {
            return Err(ApiError::invalid(
                format!("{field}.function.parameters"),
                "`parameters` must be a JSON Schema object",
            ));
        }
    };
    Ok(Tool {
        name: name.to_string(),
        description: f
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        parameters,
    })
}

/// The plan for `tools` under `tool_choice` (`None`: answer in plain text) for a template of
/// `syntax`; `parallel` allows several calls in one answer (where the syntax has them).
pub fn plan(
    tools: Option<&Vec<Value>>,
    choice: Option<&Value>,
    parallel: bool,
    syntax: ToolSyntax,
) -> Result<Option<ToolPlan>, ApiError> {
    // An empty list is no tools, as llama-server reads it.
    let Some(tools) = tools.filter(|t| !t.is_empty()) else {
        if choice.is_some_and(|c| c != "none" && c != "auto") {
            return Err(ApiError::invalid(
                "tool_choice",
                "`tool_choice` names a tool but `tools` is missing",
            ));
        }
        return Ok(None);
    };
    let tools: Vec<Tool> = tools
        .iter()
        .enumerate()
        .map(|(i, t)| tool_of(i, t))
        .collect::<Result<_, _>>()?;
    let (offered, may_answer): (Vec<&Tool>, bool) = match choice {
        None => (tools.iter().collect(), true),
        Some(Value::String(s)) if s == "auto" => (tools.iter().collect(), true),
        Some(Value::String(s)) if s == "none" => return Ok(None),
        Some(Value::String(s)) if s == "required" => (tools.iter().collect(), false),
        Some(c) => {
            let name = c
                .get("function")
                .and_then(|f| f.get("name"))
                .and_then(Value::as_str)
                .filter(|_| c.get("type").and_then(Value::as_str) == Some("function"))
                .ok_or_else(|| {
                    ApiError::invalid(
                        "tool_choice",
                        "`tool_choice` is \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}",
                    )
                })?;
            let t = tools.iter().find(|t| t.name == name).ok_or_else(|| {
                ApiError::invalid(
                    "tool_choice",
                    format!("`tool_choice` names {name:?}, which is not among `tools`"),
                )
            })?;
            (vec![t], false)
        }
    };
    if syntax.is_native() {
        return native_plan::plan(&tools, &offered, may_answer, parallel, syntax).map(Some);
    }
    // Written as text: member order matters (a call names its function before its arguments).
    let call = |t: &Tool| {
        format!(
            r#"{{"type":"object","properties":{{"name":{{"const":{}}},"arguments":{}}},"required":["name","arguments"],"additionalProperties":false}}"#,
            json!(t.name),
            t.parameters
        )
    };
    let items: Vec<String> = offered.iter().map(|t| call(t)).collect();
    let max_calls = if parallel { MAX_CALLS } else { 1 };
    let calls = format!(
        r#"{{"type":"object","properties":{{"tool_calls":{{"type":"array","items":{{"anyOf":[{}]}},"minItems":1,"maxItems":{max_calls}}}}},"required":["tool_calls"],"additionalProperties":false}}"#,
        items.join(",")
    );
    let schema = if may_answer {
        format!(
            r#"{{"anyOf":[{calls},{{"type":"object","properties":{{"response":{{"type":"string"}}}},"required":["response"],"additionalProperties":false}}]}}"#
        )
    } else {
        calls
    };
    let text = format!(
        r#"{{"type":"json_schema","json_schema":{{"name":"tool_calls","schema":{schema}}}}}"#
    );
    let format = ResponseFormat::from_json_str(&text)
        .map_err(|e| ApiError::invalid("tools", format!("a tool's `parameters`: {e}")))?;
    let described: Vec<Value> = offered
        .iter()
        .map(|t| json!({"name": t.name, "description": t.description, "parameters": t.parameters}))
        .collect();
    let mut instructions = String::from(
        "You can call tools. Reply with JSON only. To call tools: {\"tool_calls\": [{\"name\": \"<tool name>\", \"arguments\": {<arguments>}}]}.",
    );
    if may_answer {
        instructions.push_str(" To answer directly instead: {\"response\": \"<your answer>\"}.");
    }
    instructions.push_str("\nTools:\n");
    for d in described {
        instructions.push_str(&d.to_string());
        instructions.push('\n');
    }
    Ok(Some(ToolPlan {
        instructions: Some(instructions),
        format,
        template_tools: None,
    }))
}

/// Adds the plan's instructions (if any) to the conversation's system message (or as one).
pub fn instruct(messages: &mut Vec<ChatMessage>, plan: &ToolPlan) {
    let Some(instructions) = &plan.instructions else {
        return;
    };
    match messages.first_mut() {
        Some(m) if m.role == "system" => {
            m.content.push_str("\n\n");
            m.content.push_str(instructions);
        }
        _ => messages.insert(0, ChatMessage::new("system", instructions.clone())),
    }
}

/// An earlier assistant turn's `tool_calls` (`messages[i]`), arguments read as JSON (text that
/// is not JSON stays a string), as a template receives them.
pub fn calls_of(i: usize, calls: &Value) -> Result<Vec<ChatToolCall>, ApiError> {
    let field = format!("messages[{i}].tool_calls");
    let list = calls
        .as_array()
        .ok_or_else(|| ApiError::invalid(&field, "`tool_calls` must be a list"))?;
    let mut out = Vec::with_capacity(list.len());
    for (k, c) in list.iter().enumerate() {
        let f = c.get("function");
        let name = f.and_then(|f| f.get("name")).and_then(Value::as_str);
        let args = f.and_then(|f| f.get("arguments")).and_then(Value::as_str);
        let (Some(name), Some(args)) = (name, args) else {
            return Err(ApiError::invalid(
                &field,
                "each tool call needs `function.name` and `function.arguments`",
            ));
        };
        let arguments: Value =
            serde_json::from_str(args).unwrap_or_else(|_| Value::String(args.into()));
        let id = c
            .get("id")
            .and_then(Value::as_str)
            .map_or_else(|| format!("call_{i}_{k}"), str::to_owned);
        out.push(ChatToolCall {
            id,
            kind: "function".to_owned(),
            function: ChatFunctionCall {
                name: name.to_owned(),
                arguments,
            },
        });
    }
    Ok(out)
}

/// An earlier assistant turn's `tool_calls`, as the text the model would have written in the
/// generic form.
pub fn calls_as_text(i: usize, calls: &Value) -> Result<String, ApiError> {
    let out: Vec<String> = calls_of(i, calls)?
        .into_iter()
        .map(|c| {
            format!(
                r#"{{"name":{},"arguments":{}}}"#,
                json!(c.function.name),
                c.function.arguments
            )
        })
        .collect();
    Ok(format!(r#"{{"tool_calls":[{}]}}"#, out.join(",")))
}

/// What a constrained answer says.
pub enum Answer {
    Calls(Vec<Value>),
    Text(String),
}

/// The id of call `k` of the choice whose calls are numbered from `id_base` (the same in a
/// streamed and a whole answer).
pub fn call_id(id_base: &str, k: usize) -> String {
    format!("call_{id_base}_{k}")
}

/// One call in OpenAI's shape; `arguments` is the raw JSON text the model wrote.
pub fn call_json(id_base: &str, k: usize, name: &str, arguments: &str) -> Value {
    json!({
        "id": call_id(id_base, k),
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    })
}

/// Parses a finished answer in `syntax`: tool calls in OpenAI's shape (ids from `id_base`,
/// arguments as written), or the direct response. A generic direct response cut short by the
/// token budget is still its text (what was written of the string); `None` when the text is
/// neither (calls cut short, damaged calls): the caller answers the raw text as content.
pub fn parse_answer(text: &str, id_base: &str, syntax: ToolSyntax) -> Option<Answer> {
    match tool_scan::scan_as(syntax, text) {
        Scan::Response { text, .. } => Some(Answer::Text(text)),
        Scan::Calls {
            calls,
            closed: true,
        } => Some(Answer::Calls(
            calls
                .iter()
                .enumerate()
                .map(|(k, c)| call_json(id_base, k, c.name.as_deref().unwrap_or(""), c.arguments))
                .collect(),
        )),
        _ => None,
    }
}

#[cfg(test)]
#[path = "tools_tests.rs"]
mod tests;
