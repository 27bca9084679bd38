//! Unit tests of the chat-template dialect: HF's whitespace rules, python methods, `tojson`,
//! `raise_exception`, `strftime_now`, syntax errors and the ChatML fallback.

use super::{CHATML_TEMPLATE, ChatError, ChatMessage, ChatTemplate};

fn render(source: &str, messages: &[ChatMessage]) -> Result<String, ChatError> {
    ChatTemplate::new(source, "<s>", "</s>")?.render(messages, false)
}

fn conversation() -> Vec<ChatMessage> {
    vec![
        ChatMessage::system("Be brief."),
        ChatMessage::user("Hi"),
        ChatMessage::assistant("Hello."),
        ChatMessage::user("Bye"),
    ]
}

#[test]
fn chatml_fallback_with_and_without_generation_prompt() {
    let t = ChatTemplate::new(CHATML_TEMPLATE, "", "<|im_end|>").unwrap();
    let body = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n\
                <|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n";
    assert_eq!(t.render(&conversation(), false).unwrap(), body);
    assert_eq!(
        t.render(&conversation(), true).unwrap(),
        format!("{body}<|im_start|>assistant\n")
    );
    assert_eq!(t.source(), CHATML_TEMPLATE);
}

#[test]
fn trim_blocks_and_lstrip_blocks_like_hf() {
    let source = "{% for message in messages %}\n    {% if message.role == 'user' %}\n  U: {{ message.content }}\n    {% elif message.role == 'assistant' %}\nA: {{ message.content }}\n    {% endif %}\n{% endfor %}\n";
    let out = render(source, &conversation()).unwrap();
    assert_eq!(out, "  U: Hi\nA: Hello.\n  U: Bye\n");
}

#[test]
fn a_single_trailing_newline_is_dropped() {
    assert_eq!(render("{{ bos_token }}\n", &[]).unwrap(), "<s>");
    assert_eq!(render("{{ eos_token }}\n\n", &[]).unwrap(), "</s>\n");
}

#[test]
fn python_string_dict_and_list_methods() {
    let source = "{{ '  x  '.strip() }}|{{ 'xay'.lstrip('x').rstrip('y') }}|\
                  {% if 'abc'.startswith('a') and 'abc'.endswith('bc') %}yes{% endif %}|\
                  {{ 'a,b'.split(',') | join('+') }}|{{ 'Hi'.upper() }}{{ 'Hi'.lower() }}|\
                  {{ {'k': 1}.get('k') }}{{ {'k': 1}.get('z', 7) }}|\
                  {% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}|\
                  {{ 'a-b'.replace('-', '_') }}|{{ 'hello world'.title() }}";
    assert_eq!(
        render(source, &[]).unwrap(),
        "x|a|yes|a+b|HIhi|17|a=1;b=2;|a_b|Hello World"
    );
}

#[test]
fn message_fields_by_attribute_and_by_index() {
    let source = "{% for m in messages %}{{ m.role }}:{{ m['content'] }};{% endfor %}";
    assert_eq!(
        render(source, &conversation()).unwrap(),
        "system:Be brief.;user:Hi;assistant:Hello.;user:Bye;"
    );
}

#[test]
fn tojson_formats_like_python_json_dumps() {
    let source = r#"{{ {'b': 1, 'a': [1.5, 2.0, 'é"
', none, true]} | tojson }}"#;
    assert_eq!(
        render(source, &[]).unwrap(),
        r#"{"b": 1, "a": [1.5, 2.0, "é\"\n", null, true]}"#
    );
}

#[test]
fn tojson_indent_sort_keys_and_ensure_ascii() {
    assert_eq!(
        render(
            "{{ [1, {'b': 2, 'a': []}] | tojson(indent=2, sort_keys=true) }}",
            &[]
        )
        .unwrap(),
        "[\n  1,\n  {\n    \"a\": [],\n    \"b\": 2\n  }\n]"
    );
    assert_eq!(
        render("{{ 'é😀' | tojson(ensure_ascii=true) }}", &[]).unwrap(),
        r#""\u00e9\ud83d\ude00""#
    );
    assert_eq!(
        render("{{ {'a': 1} | tojson(separators=(',', ':')) }}", &[]).unwrap(),
        r#"{"a":1}"#
    );
}

#[test]
fn raise_exception_names_the_message() {
    let err = render(
        "{% if messages[0].role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}",
        &conversation(),
    )
    .unwrap_err();
    assert_eq!(err, ChatError::Raised("System role not supported".into()));
    assert!(err.to_string().contains("System role not supported"));
}

#[test]
fn syntax_errors_surface_at_construction_with_the_line() {
    let err = ChatTemplate::new("{% for m in messages %}\n{{ m.role }", "", "").unwrap_err();
    let ChatError::Syntax(message) = &err else {
        panic!("expected a syntax error, got {err:?}");
    };
    assert!(message.contains("syntax error"), "{message}");
    assert!(message.contains(":2"), "line missing: {message}");
}

#[test]
fn runtime_errors_are_render_errors() {
    let err = render(
        "{{ messages[0].role.nonexistent_method() }}",
        &conversation(),
    )
    .unwrap_err();
    assert!(matches!(err, ChatError::Render(_)), "{err:?}");
}

#[test]
fn strftime_now_and_undefined_variables() {
    let out = render("{{ strftime_now('%Y') }}", &[]).unwrap();
    assert!(out.len() == 4 && out.as_str() >= "2024", "{out}");
    let out = render(
        "[{{ tools }}]{% if tools is defined %}tools{% endif %}",
        &[],
    )
    .unwrap();
    assert_eq!(out, "[]");
}

#[test]
fn loop_controls_and_namespace() {
    let source = "{% set ns = namespace(n=0) %}{% for m in messages %}{% if loop.index0 == 2 %}{% break %}{% endif %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.n }}";
    assert_eq!(render(source, &conversation()).unwrap(), "2");
}

#[test]
fn chat_message_serde_round_trip() {
    let json = r#"[{"role":"user","content":"hi"}]"#;
    let messages: Vec<ChatMessage> = serde_json::from_str(json).unwrap();
    assert_eq!(messages, vec![ChatMessage::user("hi")]);
    assert_eq!(serde_json::to_string(&messages).unwrap(), json);
}
