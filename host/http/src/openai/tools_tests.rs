use super::*;
use memoria_constrain::Wrapped;

const G: ToolSyntax = ToolSyntax::Generic;

#[test]
fn an_empty_tools_list_is_no_tools() {
    assert!(
        plan(Some(&Vec::new()), None, true, G)
            .expect("accepted")
            .is_none()
    );
    let auto = Value::String("auto".into());
    assert!(
        plan(Some(&Vec::new()), Some(&auto), true, G)
            .expect("accepted")
            .is_none()
    );
}

fn weather() -> Vec<Value> {
    vec![json!({"type": "function", "function": {
        "name": "get_weather", "description": "Weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"], "additionalProperties": false}}})]
}

#[test]
fn choices_shape_the_plan() {
    assert!(plan(None, None, true, G).unwrap().is_none());
    assert!(
        plan(Some(&weather()), Some(&json!("none")), true, G)
            .unwrap()
            .is_none()
    );
    let auto = plan(Some(&weather()), None, true, G).unwrap().unwrap();
    let auto_text = auto.instructions.unwrap();
    assert!(auto_text.contains("get_weather") && auto_text.contains("response"));
    let req = plan(Some(&weather()), Some(&json!("required")), false, G)
        .unwrap()
        .unwrap();
    assert!(!req.instructions.unwrap().contains("\"response\""));
    let named = json!({"type": "function", "function": {"name": "get_weather"}});
    assert!(
        plan(Some(&weather()), Some(&named), true, G)
            .unwrap()
            .is_some()
    );
    let missing = json!({"type": "function", "function": {"name": "nope"}});
    let e = plan(Some(&weather()), Some(&missing), true, G)
        .err()
        .unwrap();
    assert_eq!(e.param.as_deref(), Some("tool_choice"));
    let bad = vec![json!({"type": "function", "function": {"name": "a b"}})];
    assert_eq!(
        plan(Some(&bad), None, true, G)
            .err()
            .unwrap()
            .param
            .as_deref(),
        Some("tools[0].function.name")
    );
}

#[test]
fn answers_parse_into_openai_shapes() {
    match parse_answer(
        r#"{"tool_calls":[{"name":"get_weather","arguments":{"city":"Oslo"}}]}"#,
        "x",
        G,
    ) {
        Some(Answer::Calls(c)) => {
            assert_eq!(c[0]["function"]["name"], "get_weather");
            assert_eq!(c[0]["function"]["arguments"], r#"{"city":"Oslo"}"#);
            assert_eq!(c[0]["id"], "call_x_0");
        }
        _ => panic!("calls expected"),
    }
    assert!(
        matches!(parse_answer(r#"{"response":"hi"}"#, "x", G), Some(Answer::Text(t)) if t == "hi")
    );
    assert!(parse_answer(r#"{"tool_calls":[{"name":"#, "x", G).is_none());
}

#[test]
fn a_response_cut_by_the_budget_is_its_written_text() {
    let text = |t: &str| match parse_answer(t, "x", G) {
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

fn wrapped(p: &ToolPlan) -> &Wrapped {
    match &p.format {
        ResponseFormat::Wrapped(w) => w,
        other => panic!("wrapped format expected, got {other:?}"),
    }
}

#[test]
fn native_syntaxes_constrain_to_their_wrapping() {
    let two = {
        let mut t = weather();
        t.push(json!({"type": "function", "function": {"name": "get_time"}}));
        t
    };
    let h = ToolSyntax::Hermes;
    let auto = plan(Some(&two), None, true, h).unwrap().unwrap();
    assert!(auto.instructions.is_none());
    let w = wrapped(&auto);
    assert_eq!(w.open, "<tool_call>\n");
    assert_eq!(w.free_text_unless.as_deref(), Some("<tool_call>"));
    assert_eq!(w.max_items, MAX_CALLS);
    let tools = auto.template_tools.as_ref().unwrap();
    assert_eq!(tools.len(), 2);
    assert_eq!(tools[1].description, None);
    let required = plan(Some(&two), Some(&json!("required")), false, h)
        .unwrap()
        .unwrap();
    assert_eq!(wrapped(&required).free_text_unless, None);
    assert_eq!(wrapped(&required).max_items, 1);
    let schema = wrapped(&required).schema.to_compact();
    assert!(schema.contains("get_weather") && schema.contains("get_time"));
    // A named function: only its calls, but every tool still goes to the template.
    let named = json!({"type": "function", "function": {"name": "get_time"}});
    let named = plan(Some(&two), Some(&named), true, h).unwrap().unwrap();
    let schema = wrapped(&named).schema.to_compact();
    assert!(!schema.contains("get_weather") && schema.contains("\"arguments\""));
    assert_eq!(named.template_tools.as_ref().unwrap().len(), 2);
    // Llama 3.x: one bare call keyed `parameters`; prose must not start with `{`.
    let l = plan(Some(&two), None, true, ToolSyntax::Llama3)
        .unwrap()
        .unwrap();
    let w = wrapped(&l);
    assert_eq!((w.open.as_str(), w.max_items), ("", 1));
    assert_eq!(w.free_text_unless.as_deref(), Some("{"));
    assert!(w.schema.to_compact().contains("\"parameters\""));
    assert!(
        plan(Some(&two), Some(&json!("none")), true, h)
            .unwrap()
            .is_none()
    );
}

#[test]
fn native_answers_parse_into_openai_shapes() {
    let text = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>";
    match parse_answer(text, "x", ToolSyntax::Hermes) {
        Some(Answer::Calls(c)) => {
            assert_eq!(c[0]["function"]["name"], "get_weather");
            assert_eq!(c[0]["function"]["arguments"], r#"{"city": "Oslo"}"#);
            assert_eq!(c[0]["id"], "call_x_0");
        }
        _ => panic!("calls expected"),
    }
    assert!(matches!(
        parse_answer("Hello there", "x", ToolSyntax::Hermes),
        Some(Answer::Text(t)) if t == "Hello there"
    ));
    assert!(matches!(
        parse_answer(r#"{"name": "f", "parameters": {}}"#, "x", ToolSyntax::Llama3),
        Some(Answer::Calls(c)) if c.len() == 1 && c[0]["function"]["arguments"] == "{}"
    ));
    // Cut short or damaged: no parse (the caller answers the raw text).
    assert!(
        parse_answer(
            "<tool_call>\n{\"name\": \"f\", \"argu",
            "x",
            ToolSyntax::Hermes
        )
        .is_none()
    );
    assert!(parse_answer(r#"{"name": 1}"#, "x", ToolSyntax::Llama3).is_none());
    // Earlier calls reach a native template structured, arguments as JSON.
    let calls = calls_of(
        2,
        &json!([{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}},
                {"type": "function", "function": {"name": "g", "arguments": "not json"}}]),
    )
    .unwrap();
    assert_eq!(calls[0].id, "c1");
    assert_eq!(calls[0].function.arguments, json!({"a": 1}));
    assert_eq!(calls[1].id, "call_2_1");
    assert_eq!(calls[1].function.arguments, json!("not json"));
    assert_eq!(
        calls_of(2, &json!({})).err().unwrap().param.as_deref(),
        Some("messages[2].tool_calls")
    );
}
