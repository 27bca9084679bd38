//! Unit tests of the chat-template dialect: HF's whitespace rules, python methods, `tojson`,
//! `raise_exception`, `strftime_now`, syntax errors and the ChatML fallback.

use super::{BUILTIN_NAMES, CHATML_TEMPLATE, ChatError, ChatMessage, ChatTemplate};

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

/// The conversation of llama.cpp's `tests/test-chat-template.cpp`.
fn llama_cpp_conversation() -> Vec<ChatMessage> {
    vec![
        ChatMessage::system("You are a helpful assistant"),
        ChatMessage::user("Hello"),
        ChatMessage::assistant("Hi there"),
        ChatMessage::user("Who are you"),
        ChatMessage::assistant("   I am an assistant   "),
        ChatMessage::user("Another question"),
    ]
}

/// Every built-in renders llama.cpp's conversation (add_ass = true) exactly as llama.cpp's
/// template of that name: the expected strings are those of `test-chat-template.cpp`, or
/// (zephyr, falcon3, llama2-sys, mistral-v7-tekken) follow `llm_chat_apply_template` by hand.
#[test]
fn builtin_templates_format_as_llama_cpp() {
    let cases: &[(&str, &str)] = &[
        (
            "chatml",
            "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nWho are you<|im_end|>\n<|im_start|>assistant\n   I am an assistant   <|im_end|>\n<|im_start|>user\nAnother question<|im_end|>\n<|im_start|>assistant\n",
        ),
        (
            "llama2",
            "[INST] You are a helpful assistant\nHello [/INST]Hi there</s>[INST] Who are you [/INST]   I am an assistant   </s>[INST] Another question [/INST]",
        ),
        (
            "llama2-sys",
            "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s>[INST] Who are you [/INST]   I am an assistant   </s>[INST] Another question [/INST]",
        ),
        (
            "llama2-sys-bos",
            "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s><s>[INST] Who are you [/INST]   I am an assistant   </s><s>[INST] Another question [/INST]",
        ),
        (
            "llama2-sys-strip",
            "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s>[INST] Who are you [/INST]I am an assistant</s>[INST] Another question [/INST]",
        ),
        (
            "mistral-v1",
            " [INST] You are a helpful assistant\n\nHello [/INST] Hi there</s> [INST] Who are you [/INST]    I am an assistant   </s> [INST] Another question [/INST]",
        ),
        (
            "mistral-v3",
            "[INST] You are a helpful assistant\n\nHello[/INST] Hi there</s>[INST] Who are you[/INST] I am an assistant</s>[INST] Another question[/INST]",
        ),
        (
            "mistral-v3-tekken",
            "[INST]You are a helpful assistant\n\nHello[/INST]Hi there</s>[INST]Who are you[/INST]   I am an assistant   </s>[INST]Another question[/INST]",
        ),
        (
            "mistral-v7",
            "[SYSTEM_PROMPT] You are a helpful assistant[/SYSTEM_PROMPT][INST] Hello[/INST] Hi there</s>[INST] Who are you[/INST]    I am an assistant   </s>[INST] Another question[/INST]",
        ),
        (
            "mistral-v7-tekken",
            "[SYSTEM_PROMPT]You are a helpful assistant[/SYSTEM_PROMPT][INST]Hello[/INST]Hi there</s>[INST]Who are you[/INST]   I am an assistant   </s>[INST]Another question[/INST]",
        ),
        (
            "phi3",
            "<|system|>\nYou are a helpful assistant<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\nHi there<|end|>\n<|user|>\nWho are you<|end|>\n<|assistant|>\n   I am an assistant   <|end|>\n<|user|>\nAnother question<|end|>\n<|assistant|>\n",
        ),
        (
            "phi4",
            "<|im_start|>system<|im_sep|>You are a helpful assistant<|im_end|><|im_start|>user<|im_sep|>Hello<|im_end|><|im_start|>assistant<|im_sep|>Hi there<|im_end|><|im_start|>user<|im_sep|>Who are you<|im_end|><|im_start|>assistant<|im_sep|>   I am an assistant   <|im_end|><|im_start|>user<|im_sep|>Another question<|im_end|><|im_start|>assistant<|im_sep|>",
        ),
        (
            "falcon3",
            "<|system|>\nYou are a helpful assistant\n<|user|>\nHello\n<|assistant|>\nHi there\n<|user|>\nWho are you\n<|assistant|>\n   I am an assistant   \n<|user|>\nAnother question\n<|assistant|>\n",
        ),
        (
            "zephyr",
            "<|system|>\nYou are a helpful assistant<|endoftext|>\n<|user|>\nHello<|endoftext|>\n<|assistant|>\nHi there<|endoftext|>\n<|user|>\nWho are you<|endoftext|>\n<|assistant|>\n   I am an assistant   <|endoftext|>\n<|user|>\nAnother question<|endoftext|>\n<|assistant|>\n",
        ),
        (
            "monarch",
            "system\nYou are a helpful assistant</s>\n<s>user\nHello</s>\n<s>assistant\nHi there</s>\n<s>user\nWho are you</s>\n<s>assistant\n   I am an assistant   </s>\n<s>user\nAnother question</s>\n<s>assistant\n",
        ),
        (
            "gemma",
            "<start_of_turn>user\nYou are a helpful assistant\n\nHello<end_of_turn>\n<start_of_turn>model\nHi there<end_of_turn>\n<start_of_turn>user\nWho are you<end_of_turn>\n<start_of_turn>model\nI am an assistant<end_of_turn>\n<start_of_turn>user\nAnother question<end_of_turn>\n<start_of_turn>model\n",
        ),
        (
            "orion",
            "Human: You are a helpful assistant\n\nHello\n\nAssistant: </s>Hi there</s>Human: Who are you\n\nAssistant: </s>   I am an assistant   </s>Human: Another question\n\nAssistant: </s>",
        ),
        (
            "openchat",
            "You are a helpful assistant<|end_of_turn|>GPT4 Correct User: Hello<|end_of_turn|>GPT4 Correct Assistant: Hi there<|end_of_turn|>GPT4 Correct User: Who are you<|end_of_turn|>GPT4 Correct Assistant:    I am an assistant   <|end_of_turn|>GPT4 Correct User: Another question<|end_of_turn|>GPT4 Correct Assistant:",
        ),
        (
            "vicuna",
            "You are a helpful assistant\n\nUSER: Hello\nASSISTANT: Hi there</s>\nUSER: Who are you\nASSISTANT:    I am an assistant   </s>\nUSER: Another question\nASSISTANT:",
        ),
        (
            "vicuna-orca",
            "SYSTEM: You are a helpful assistant\nUSER: Hello\nASSISTANT: Hi there</s>\nUSER: Who are you\nASSISTANT:    I am an assistant   </s>\nUSER: Another question\nASSISTANT:",
        ),
        (
            "deepseek",
            "You are a helpful assistant### Instruction:\nHello\n### Response:\nHi there\n<|EOT|>\n### Instruction:\nWho are you\n### Response:\n   I am an assistant   \n<|EOT|>\n### Instruction:\nAnother question\n### Response:\n",
        ),
        (
            "command-r",
            "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are a helpful assistant<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Hello<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>Hi there<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Who are you<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>I am an assistant<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Another question<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>",
        ),
        (
            "llama3",
            "<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHi there<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWho are you<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nI am an assistant<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nAnother question<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
        ),
        // OLMo 2's own template (not a llama.cpp built-in), as Python jinja2 renders it.
        (
            "olmo2",
            "<s><|system|>\nYou are a helpful assistant\n<|user|>\nHello\n<|assistant|>\nHi there</s>\n<|user|>\nWho are you\n<|assistant|>\n   I am an assistant   </s>\n<|user|>\nAnother question\n<|assistant|>\n",
        ),
    ];
    let names: Vec<&str> = cases.iter().map(|c| c.0).collect();
    assert_eq!(names, BUILTIN_NAMES, "one case per built-in, in order");
    let conv = llama_cpp_conversation();
    for (name, want) in cases {
        let t = ChatTemplate::builtin(name, "<s>", "</s>").unwrap();
        assert_eq!(t.builtin_name(), Some(*name));
        assert_eq!(&t.render(&conv, true).unwrap(), want, "built-in {name}");
    }
}

/// Without a generation prompt the opening of the assistant turn is left out.
#[test]
fn builtin_gemma_and_chatml_without_generation_prompt() {
    let conv = [ChatMessage::user("  Hi  ")];
    let gemma = ChatTemplate::builtin("gemma", "<bos>", "<eos>").unwrap();
    assert_eq!(
        gemma.render(&conv, false).unwrap(),
        "<start_of_turn>user\nHi<end_of_turn>\n"
    );
    // A system prompt with no user turn after it is dropped, as in llama.cpp.
    let sys_only = [ChatMessage::system("S")];
    assert_eq!(
        gemma.render(&sys_only, true).unwrap(),
        "<start_of_turn>model\n"
    );
    let chatml = ChatTemplate::builtin("chatml", "", "").unwrap();
    assert_eq!(
        chatml.render(&conv, false).unwrap(),
        "<|im_start|>user\n  Hi  <|im_end|>\n"
    );
}

/// llama.cpp trims with C `isspace`: ASCII whitespace goes, a no-break space stays.
#[test]
fn builtin_trim_is_c_isspace() {
    let t = ChatTemplate::builtin("llama3", "", "").unwrap();
    let conv = [ChatMessage::user("\u{0B}\u{0C}\r\n\t x \u{A0}")];
    assert_eq!(
        t.render(&conv, false).unwrap(),
        "<|start_header_id|>user<|end_header_id|>\n\nx \u{A0}<|eot_id|>"
    );
}

#[test]
fn unknown_builtin_name_lists_the_known_ones() {
    let e = ChatTemplate::builtin("nope", "", "").unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, ChatError::UnknownBuiltin { .. }), "{msg}");
    assert!(
        msg.contains("nope") && msg.contains("gemma") && msg.contains("chatml"),
        "{msg}"
    );
    assert_eq!(super::default_for_arch("gemma3"), "gemma");
    assert_eq!(super::default_for_arch("llama"), "chatml");
}

/// llama-server's choice: the override (built-in name or Jinja), else the file's template, else
/// the architecture's default; BOS/EOS texts from the vocabulary.
#[test]
fn for_model_prefers_override_then_file_then_arch_default() {
    use crate::gguf::{GgufFile, GgufWriter, MetaArray, MetaValue};
    use crate::tokenizer::Tokenizer;
    let file = |arch: &str, template: Option<&str>| {
        let mut w = GgufWriter::new();
        w.set("general.architecture", MetaValue::String(arch.into()));
        w.set("tokenizer.ggml.model", MetaValue::String("llama".into()));
        let tokens = ["<unk>", "<s>", "</s>", "a"].map(String::from).to_vec();
        w.set(
            "tokenizer.ggml.tokens",
            MetaValue::Array(MetaArray::String(tokens)),
        );
        if let Some(t) = template {
            w.set("tokenizer.chat_template", MetaValue::String(t.into()));
        }
        GgufFile::from_bytes(w.to_bytes()).unwrap()
    };
    let pick = |f: &GgufFile, o: Option<&str>| {
        let tok = Tokenizer::from_gguf(f).unwrap();
        ChatTemplate::for_model(f, &tok, o)
    };
    let own = "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}{{ eos_token }}";
    let with_own = file("llama", Some(own));
    let t = pick(&with_own, None).unwrap();
    assert_eq!((t.builtin_name(), t.source()), (None, own));
    assert_eq!(
        t.render(&[ChatMessage::user("x")], false).unwrap(),
        "<s>x</s>"
    );
    assert_eq!(
        pick(&with_own, Some("gemma")).unwrap().builtin_name(),
        Some("gemma")
    );
    let jinja = "{% for m in messages %}[{{ m.content }}]{% endfor %}";
    assert_eq!(pick(&with_own, Some(jinja)).unwrap().source(), jinja);
    assert!(matches!(
        pick(&with_own, Some("gemmaa")),
        Err(ChatError::UnknownBuiltin { .. })
    ));
    let gemma = file("gemma3", None);
    assert_eq!(pick(&gemma, None).unwrap().builtin_name(), Some("gemma"));
    let llama = file("llama", None);
    assert_eq!(pick(&llama, None).unwrap().builtin_name(), Some("chatml"));
    // A file template that does not compile is an error; the default is the way out.
    let broken = file("gemma3", Some("{% for %}"));
    assert!(matches!(pick(&broken, None), Err(ChatError::Syntax(_))));
    let tok = Tokenizer::from_gguf(&broken).unwrap();
    let t = ChatTemplate::default_for(&broken, &tok).unwrap();
    assert_eq!(t.builtin_name(), Some("gemma"));
    assert_eq!((t.bos_token(), t.eos_token()), ("<s>", "</s>"));
}

const QWEN_TOOLS: &str = include_str!("../../../../tests/data/templates/qwen2.5-tools.jinja");
const LLAMA31_TOOLS: &str = include_str!("../../../../tests/data/templates/llama3.1-tools.jinja");

fn weather_tool() -> super::ChatTool {
    super::ChatTool {
        name: "get_weather".into(),
        description: Some("Weather in a city".into()),
        parameters: serde_json::json!({"type": "object", "properties": {"city": {"type": "string"}}}),
    }
}

/// A user question, the assistant's call, the tool's answer.
fn tool_history() -> Vec<ChatMessage> {
    let mut call = ChatMessage::assistant("");
    call.tool_calls = vec![super::ChatToolCall {
        id: "call_1".into(),
        kind: "function".into(),
        function: super::ChatFunctionCall {
            name: "get_weather".into(),
            arguments: serde_json::json!({"city": "Oslo"}),
        },
    }];
    let mut answer = ChatMessage::new("tool", "{\"temp\": 21}");
    answer.tool_call_id = Some("call_1".into());
    answer.name = Some("get_weather".into());
    vec![ChatMessage::user("Weather in Oslo?"), call, answer]
}

#[test]
fn tools_and_tool_turns_render_through_a_qwen_template() {
    let t = ChatTemplate::new(QWEN_TOOLS, "", "<|im_end|>").unwrap();
    assert!(t.uses_tools());
    let out = t
        .render_with_tools(&tool_history(), Some(&[weather_tool()]), true)
        .unwrap();
    assert!(
        out.contains(r#"{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city", "parameters": {"#),
        "{out}"
    );
    assert!(
        out.contains("<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call><|im_end|>\n"),
        "{out}"
    );
    assert!(
        out.contains(
            "<|im_start|>user\n<tool_response>\n{\"temp\": 21}\n</tool_response><|im_end|>\n"
        ),
        "{out}"
    );
    assert!(out.ends_with("<|im_start|>assistant\n"));
    // Without tools the template takes its plain branch.
    let plain = t.render(&[ChatMessage::user("Hi")], false).unwrap();
    assert!(!plain.contains("<tools>") && plain.contains("<|im_start|>user\nHi<|im_end|>"));
}

#[test]
fn tools_and_tool_turns_render_through_a_llama31_template() {
    let t = ChatTemplate::new(LLAMA31_TOOLS, "<|begin_of_text|>", "<|eot_id|>").unwrap();
    assert!(t.uses_tools());
    let out = t
        .render_with_tools(&tool_history(), Some(&[weather_tool()]), true)
        .unwrap();
    assert!(
        out.starts_with(
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\n"
        ),
        "{out}"
    );
    assert!(out.contains("\"name\": \"get_weather\""), "{out}");
    assert!(out.contains("Weather in Oslo?<|eot_id|>"), "{out}");
    assert!(
        out.contains("<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}<|eot_id|>"),
        "{out}"
    );
    assert!(
        out.contains("<|start_header_id|>ipython<|end_header_id|>\n\n"),
        "{out}"
    );
    assert!(out.contains("21"), "{out}");
    assert!(out.ends_with("<|start_header_id|>assistant<|end_header_id|>\n\n"));
    // A plain turn has no `tool_calls` key at all (the template tests `'tool_calls' in message`).
    let plain = t
        .render(
            &[ChatMessage::user("Hi"), ChatMessage::assistant("Hello")],
            false,
        )
        .unwrap();
    assert!(
        plain.contains("<|start_header_id|>assistant<|end_header_id|>\n\nHello<|eot_id|>"),
        "{plain}"
    );
}
