//! Tool calls for chat completions, in the generic form (as llama.cpp does for templates without
//! a tool syntax of their own): the tools are described in the system message, the answer is
//! constrained to JSON, either `{"tool_calls": [{"name", "arguments"}]}` or, with
//! `tool_choice: "auto"`, `{"response": "..."}`, and is parsed back into OpenAI's
//! `message.tool_calls`. `required` and a named function are enforced by the same constraint;
//! `none` leaves tools out. Earlier turns' calls and `tool` results are rendered as text.

use memoria_constrain::ResponseFormat;
use memoria_model::chat::ChatMessage;
use serde_json::{Value, json};

use super::tool_scan::{self, Scan};
use crate::error::ApiError;

/// At most this many calls in one answer (one when `parallel_tool_calls` is false).
const MAX_CALLS: usize = 4;

/// How a request's tools shape its generation.
pub struct ToolPlan {
    /// Added to (or as) the system message.
    pub instructions: String,
    /// The constraint the answer follows.
    pub format: ResponseFormat,
}

/// One validated tool.
struct Tool {
    name: String,
    description: String,
    parameters: Value,
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

/// The plan for `tools` under `tool_choice` (`None`: answer in plain text); `parallel` allows
/// several calls in one answer.
pub fn plan(
    tools: Option<&Vec<Value>>,
    choice: Option<&Value>,
    parallel: bool,
) -> Result<Option<ToolPlan>, ApiError> {
    let Some(tools) = tools else {
        if choice.is_some_and(|c| c != "none" && c != "auto") {
            return Err(ApiError::invalid(
                "tool_choice",
                "`tool_choice` names a tool but `tools` is missing",
            ));
        }
        return Ok(None);
    };
    if tools.is_empty() {
        return Err(ApiError::invalid(
            "tools",
            "`tools` is an empty list: give at least one tool or leave `tools` out",
        ));
    }
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
        instructions,
        format,
    }))
}

/// Adds the plan's instructions to the conversation's system message (or as one).
pub fn instruct(messages: &mut Vec<ChatMessage>, plan: &ToolPlan) {
    match messages.first_mut() {
        Some(m) if m.role == "system" => {
            m.content.push_str("\n\n");
            m.content.push_str(&plan.instructions);
        }
        _ => messages.insert(0, ChatMessage::new("system", plan.instructions.clone())),
    }
}

/// An earlier assistant turn's `tool_calls`, as the text the model would have written.
pub fn calls_as_text(i: usize, calls: &Value) -> Result<String, ApiError> {
    let field = format!("messages[{i}].tool_calls");
    let list = calls
        .as_array()
        .ok_or_else(|| ApiError::invalid(&field, "`tool_calls` must be a list"))?;
    let mut out = Vec::with_capacity(list.len());
    for c in list {
        let f = c.get("function");
        let name = f.and_then(|f| f.get("name")).and_then(Value::as_str);
        let args = f.and_then(|f| f.get("arguments")).and_then(Value::as_str);
        let (Some(name), Some(args)) = (name, args) else {
            return Err(ApiError::invalid(
                &field,
                "each tool call needs `function.name` and `function.arguments`",
            ));
        };
        let args: Value = serde_json::from_str(args).unwrap_or_else(|_| Value::String(args.into()));
        out.push(format!(r#"{{"name":{},"arguments":{args}}}"#, json!(name)));
    }
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

/// Parses a finished answer: tool calls in OpenAI's shape (ids from `id_base`, arguments as
/// written), or the direct response. A direct response cut short by the token budget is still
/// its text (what was written of the string); `None` when the text is neither (calls cut short).
pub fn parse_answer(text: &str, id_base: &str) -> Option<Answer> {
    match tool_scan::scan(text) {
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
mod tests {
    use super::*;

    fn weather() -> Vec<Value> {
        vec![json!({"type": "function", "function": {
            "name": "get_weather", "description": "Weather in a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                           "required": ["city"], "additionalProperties": false}}})]
    }

    #[test]
    fn choices_shape_the_plan() {
        assert!(plan(None, None, true).unwrap().is_none());
        assert!(
            plan(Some(&weather()), Some(&json!("none")), true)
                .unwrap()
                .is_none()
        );
        let auto = plan(Some(&weather()), None, true).unwrap().unwrap();
        assert!(
            auto.instructions.contains("get_weather") && auto.instructions.contains("response")
        );
        let req = plan(Some(&weather()), Some(&json!("required")), false)
            .unwrap()
            .unwrap();
        assert!(!req.instructions.contains("\"response\""));
        let named = json!({"type": "function", "function": {"name": "get_weather"}});
        assert!(
            plan(Some(&weather()), Some(&named), true)
                .unwrap()
                .is_some()
        );
        let missing = json!({"type": "function", "function": {"name": "nope"}});
        let e = plan(Some(&weather()), Some(&missing), true).err().unwrap();
        assert_eq!(e.param.as_deref(), Some("tool_choice"));
        assert!(plan(Some(&vec![]), None, true).is_err());
        let bad = vec![json!({"type": "function", "function": {"name": "a b"}})];
        assert_eq!(
            plan(Some(&bad), None, true).err().unwrap().param.as_deref(),
            Some("tools[0].function.name")
        );
    }

    #[test]
    fn answers_parse_into_openai_shapes() {
        match parse_answer(
            r#"{"tool_calls":[{"name":"get_weather","arguments":{"city":"Oslo"}}]}"#,
            "x",
        ) {
            Some(Answer::Calls(c)) => {
                assert_eq!(c[0]["function"]["name"], "get_weather");
                assert_eq!(c[0]["function"]["arguments"], r#"{"city":"Oslo"}"#);
                assert_eq!(c[0]["id"], "call_x_0");
            }
            _ => panic!("calls expected"),
        }
        assert!(
            matches!(parse_answer(r#"{"response":"hi"}"#, "x"), Some(Answer::Text(t)) if t == "hi")
        );
        assert!(parse_answer(r#"{"tool_calls":[{"name":"#, "x").is_none());
    }

    #[test]
    fn a_response_cut_by_the_budget_is_its_written_text() {
        let text = |t: &str| match parse_answer(t, "x") {
            Some(Answer::Text(t)) => Some(t),
            _ => None,
        };
        assert_eq!(
            text(r#"{"response": "The weather in Li"#).as_deref(),
            Some("The weather in Li")
        );
        assert_eq!(
            text(r#" { "response" : "a\"b\n"#).as_deref(),
            Some("a\"b\n")
        );
        assert_eq!(
            text(r#"{"response": "caf\u00e9 \u00"#).as_deref(),
            Some("café ")
        );
        assert_eq!(text(r#"{"response": "ends\"#).as_deref(), Some("ends"));
        assert_eq!(text(r#"{"response": "done" "#).as_deref(), Some("done"));
        assert_eq!(text(r#"{"response": ""#).as_deref(), Some(""));
        assert_eq!(text(r#"{"response"#), None);
        assert_eq!(text(r#"{"other": "x"#), None);
        let text = calls_as_text(
            1,
            &json!([{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}]),
        )
        .unwrap();
        assert_eq!(text, r#"{"tool_calls":[{"name":"f","arguments":{"a":1}}]}"#);
    }
}
