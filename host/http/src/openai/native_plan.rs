//! The tool plan for a template with a tool syntax of its own: every tool goes to the template's
//! `tools` variable and the answer is constrained to the offered tools' calls in that syntax
//! (or, when it may answer, to prose not starting as a call): each call's JSON between the
//! syntax's literal texts (Hermes, Llama 3.x), one JSON list of calls after `<|tool_call|>`
//! (Granite 3.x), or for harmony the arguments after a `commentary` header naming the function.
//! A harmony header names one function, so a harmony answer is constrained only when one tool
//! is offered; with several the model writes its calls freely and they are parsed all the same.

use memoria_constrain::{Json, ResponseFormat, Wrapped};
use memoria_model::chat::ChatTool;
use serde_json::json;

use super::tool_syntax::{ToolSyntax, Wrapping};
use super::tools::{MAX_CALLS, Tool, ToolPlan};
use crate::error::ApiError;

/// What starts a harmony call on the commentary channel (before the function's name).
pub(super) const HARMONY_TRIGGER: &str = "<|channel|>commentary";

/// The plan for `syntax` (a native one).
pub(super) fn plan(
    tools: &[Tool],
    offered: &[&Tool],
    may_answer: bool,
    parallel: bool,
    syntax: ToolSyntax,
) -> Result<ToolPlan, ApiError> {
    let format = match syntax.wrapping() {
        Some(w) if w.list => list_format(offered, may_answer, parallel, w)?,
        Some(w) => wrapped_format(offered, may_answer, parallel, w)?,
        None => harmony_format(offered, may_answer)?,
    };
    let template_tools = tools
        .iter()
        .map(|t| ChatTool {
            name: t.name.clone(),
            description: (!t.description.is_empty()).then(|| t.description.clone()),
            parameters: t.parameters.clone(),
        })
        .collect();
    Ok(ToolPlan {
        instructions: None,
        format,
        template_tools: Some(template_tools),
    })
}

fn schema(text: &str) -> Result<Json, ApiError> {
    Json::parse(text).map_err(|e| ApiError::invalid("tools", format!("a tool's `parameters`: {e}")))
}

/// One call's object schema: `{"name": <const>, <arguments key>: <parameters>}`.
fn call_schema(t: &Tool, arguments_key: &str) -> String {
    format!(
        r#"{{"type":"object","properties":{{"name":{{"const":{}}},{}:{}}},"required":["name",{}],"additionalProperties":false}}"#,
        json!(t.name),
        json!(arguments_key),
        t.parameters,
        json!(arguments_key)
    )
}

fn any_call(offered: &[&Tool], arguments_key: &str) -> String {
    let calls: Vec<String> = offered
        .iter()
        .map(|t| call_schema(t, arguments_key))
        .collect();
    match calls.as_slice() {
        [one] => one.clone(),
        many => format!(r#"{{"anyOf":[{}]}}"#, many.join(",")),
    }
}

/// Each call wrapped on its own, repeated.
fn wrapped_format(
    offered: &[&Tool],
    may_answer: bool,
    parallel: bool,
    w: &Wrapping,
) -> Result<ResponseFormat, ApiError> {
    Ok(ResponseFormat::Wrapped(Wrapped {
        open: w.open.to_owned(),
        schema: schema(&any_call(offered, w.arguments_key))?,
        close: w.close.to_owned(),
        separator: w.separator.to_owned(),
        max_items: if parallel && w.parallel { MAX_CALLS } else { 1 },
        free_text_unless: may_answer.then(|| w.trigger.to_owned()),
    }))
}

/// One list of calls after the opening text.
fn list_format(
    offered: &[&Tool],
    may_answer: bool,
    parallel: bool,
    w: &Wrapping,
) -> Result<ResponseFormat, ApiError> {
    let max = if parallel && w.parallel { MAX_CALLS } else { 1 };
    let list = format!(
        r#"{{"type":"array","items":{},"minItems":1,"maxItems":{max}}}"#,
        any_call(offered, w.arguments_key)
    );
    Ok(ResponseFormat::Wrapped(Wrapped {
        open: w.open.to_owned(),
        schema: schema(&list)?,
        close: String::new(),
        separator: String::new(),
        max_items: 1,
        free_text_unless: may_answer.then(|| w.trigger.to_owned()),
    }))
}

/// Harmony: with one offered tool, its header then its arguments; otherwise unconstrained.
fn harmony_format(offered: &[&Tool], may_answer: bool) -> Result<ResponseFormat, ApiError> {
    let [tool] = offered else {
        return Ok(ResponseFormat::Text);
    };
    Ok(ResponseFormat::Wrapped(Wrapped {
        open: format!(
            "{HARMONY_TRIGGER} to=functions.{} <|constrain|>json<|message|>",
            tool.name
        ),
        schema: schema(&tool.parameters.to_string())?,
        close: String::new(),
        separator: String::new(),
        max_items: 1,
        free_text_unless: may_answer.then(|| HARMONY_TRIGGER.to_owned()),
    }))
}

#[cfg(test)]
mod tests {
    use super::super::tools::{Answer, parse_answer, plan as tool_plan};
    use super::*;
    use serde_json::Value;

    fn two() -> Vec<Value> {
        vec![
            json!({"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}),
            json!({"type": "function", "function": {"name": "get_time"}}),
        ]
    }

    fn wrapped(f: &ResponseFormat) -> &Wrapped {
        match f {
            ResponseFormat::Wrapped(w) => w,
            other => panic!("wrapped format expected, got {other:?}"),
        }
    }

    #[test]
    fn granite_constrains_one_list_of_calls() {
        let p = tool_plan(Some(&two()), None, true, ToolSyntax::Granite)
            .unwrap()
            .unwrap();
        let w = wrapped(&p.format);
        assert_eq!((w.open.as_str(), w.max_items), ("<|tool_call|>", 1));
        assert_eq!(w.free_text_unless.as_deref(), Some("<|tool_call|>"));
        let s = w.schema.to_compact();
        assert!(
            s.contains("\"type\":\"array\"") && s.contains("\"maxItems\":4"),
            "{s}"
        );
        assert!(s.contains("get_weather") && s.contains("get_time"));
        let one = tool_plan(
            Some(&two()),
            Some(&json!("required")),
            false,
            ToolSyntax::Granite,
        )
        .unwrap()
        .unwrap();
        let w = wrapped(&one.format);
        assert!(w.schema.to_compact().contains("\"maxItems\":1"));
        assert_eq!(w.free_text_unless, None);
        assert_eq!(one.template_tools.unwrap().len(), 2);
        let text = "<|tool_call|>[{\"name\": \"get_time\", \"arguments\": {}}]";
        assert!(matches!(
            parse_answer(text, "x", ToolSyntax::Granite),
            Some(Answer::Calls(c)) if c[0]["function"]["name"] == "get_time"
        ));
    }

    #[test]
    fn harmony_constrains_a_single_offered_tool() {
        let named = json!({"type": "function", "function": {"name": "get_weather"}});
        let p = tool_plan(Some(&two()), Some(&named), true, ToolSyntax::Harmony)
            .unwrap()
            .unwrap();
        let w = wrapped(&p.format);
        assert_eq!(
            w.open,
            "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
        );
        assert_eq!(w.free_text_unless, None);
        assert!(w.schema.to_compact().contains("\"city\""));
        assert_eq!(p.template_tools.as_ref().unwrap().len(), 2);
        let auto = tool_plan(Some(&two()), None, true, ToolSyntax::Harmony)
            .unwrap()
            .unwrap();
        assert_eq!(auto.format, ResponseFormat::Text);
        assert!(auto.instructions.is_none());
        let text = "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Oslo\"}";
        match parse_answer(text, "x", ToolSyntax::Harmony) {
            Some(Answer::Calls(c)) => {
                assert_eq!(c[0]["function"]["name"], "get_weather");
                assert_eq!(c[0]["function"]["arguments"], r#"{"city": "Oslo"}"#);
            }
            _ => panic!("calls expected"),
        }
    }
}
