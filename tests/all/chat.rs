//! Integration tests: chat. Real `tokenizer.chat_template` texts of popular model families,
//! rendered over the same system+user+assistant+user conversation, against hand-derived strings.

use memoria_model::chat::{CHATML_TEMPLATE, ChatError, ChatMessage, ChatTemplate};

/// meta-llama/Llama-2-7b-chat-hf.
const LLAMA_2_CHAT: &str = r#"{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\n' + system_message + '\n<</SYS>>\n\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}"#;

/// The same logic as [`LLAMA_2_CHAT`] laid out over indented lines, as community templates are:
/// it renders identically only with HF's trim_blocks + lstrip_blocks.
const LLAMA_2_CHAT_MULTILINE: &str = r#"{% if messages[0]['role'] == 'system' %}
    {% set loop_messages = messages[1:] %}
    {% set system_message = messages[0]['content'] %}
{% else %}
    {% set loop_messages = messages %}
    {% set system_message = false %}
{% endif %}
{% for message in loop_messages %}
    {% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
        {{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}
    {% endif %}
    {% if loop.index0 == 0 and system_message != false %}
        {% set content = '<<SYS>>\n' + system_message + '\n<</SYS>>\n\n' + message['content'] %}
    {% else %}
        {% set content = message['content'] %}
    {% endif %}
    {% if message['role'] == 'user' %}
        {{- bos_token + '[INST] ' + content.strip() + ' [/INST]' -}}
    {% elif message['role'] == 'assistant' %}
        {{- ' '  + content.strip() + ' ' + eos_token -}}
    {% endif %}
{% endfor %}
"#;

/// meta-llama/Meta-Llama-3-8B-Instruct (newlines as the JSON string decodes them).
const LLAMA_3_INSTRUCT: &str = "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";

/// Qwen/Qwen2-7B-Instruct: ChatML that injects a default system message.
const QWEN2_CHATML: &str = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

/// mistralai/Mistral-7B-Instruct-v0.1 / Mixtral-8x7B-Instruct-v0.1.
const MISTRAL_INSTRUCT: &str = "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}";

const ALTERNATE: &str = "Conversation roles must alternate user/assistant/user/assistant/...";

/// system + user + assistant + user; the first user turn has surrounding spaces to show which
/// templates strip/trim content.
fn conversation() -> Vec<ChatMessage> {
    vec![
        ChatMessage::system("You are terse."),
        ChatMessage::user(" Hello! "),
        ChatMessage::assistant("Hi."),
        ChatMessage::user("2+2?"),
    ]
}

fn without_system() -> Vec<ChatMessage> {
    conversation().split_off(1)
}

#[test]
fn llama_2_chat_folds_the_system_prompt_into_the_first_instruction() {
    let t = ChatTemplate::new(LLAMA_2_CHAT, "<s>", "</s>").unwrap();
    let expected = "<s>[INST] <<SYS>>\nYou are terse.\n<</SYS>>\n\n Hello! [/INST] Hi. </s><s>[INST] 2+2? [/INST]";
    assert_eq!(t.render(&conversation(), true).unwrap(), expected);
    // The template has no generation prompt.
    assert_eq!(t.render(&conversation(), false).unwrap(), expected);
    assert_eq!(
        t.render(&without_system(), true).unwrap(),
        "<s>[INST] Hello! [/INST] Hi. </s><s>[INST] 2+2? [/INST]"
    );
}

#[test]
fn multiline_templates_render_like_hf_with_trim_and_lstrip_blocks() {
    let one_line = ChatTemplate::new(LLAMA_2_CHAT, "<s>", "</s>").unwrap();
    let multi_line = ChatTemplate::new(LLAMA_2_CHAT_MULTILINE, "<s>", "</s>").unwrap();
    for messages in [conversation(), without_system()] {
        assert_eq!(
            multi_line.render(&messages, true).unwrap(),
            one_line.render(&messages, true).unwrap()
        );
    }
}

#[test]
fn llama_3_instruct_headers_and_generation_prompt() {
    let t = ChatTemplate::new(LLAMA_3_INSTRUCT, "<|begin_of_text|>", "<|eot_id|>").unwrap();
    let body = "<|begin_of_text|>\
                <|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>\
                <|start_header_id|>user<|end_header_id|>\n\nHello!<|eot_id|>\
                <|start_header_id|>assistant<|end_header_id|>\n\nHi.<|eot_id|>\
                <|start_header_id|>user<|end_header_id|>\n\n2+2?<|eot_id|>";
    assert_eq!(t.render(&conversation(), false).unwrap(), body);
    assert_eq!(
        t.render(&conversation(), true).unwrap(),
        format!("{body}<|start_header_id|>assistant<|end_header_id|>\n\n")
    );
}

#[test]
fn qwen2_chatml_keeps_a_given_system_message_and_injects_a_default_otherwise() {
    let t = ChatTemplate::new(QWEN2_CHATML, "", "<|im_end|>").unwrap();
    let turns = "<|im_start|>user\n Hello! <|im_end|>\n\
                 <|im_start|>assistant\nHi.<|im_end|>\n\
                 <|im_start|>user\n2+2?<|im_end|>\n\
                 <|im_start|>assistant\n";
    assert_eq!(
        t.render(&conversation(), true).unwrap(),
        format!("<|im_start|>system\nYou are terse.<|im_end|>\n{turns}")
    );
    assert_eq!(
        t.render(&without_system(), true).unwrap(),
        format!("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{turns}")
    );
}

#[test]
fn chatml_fallback_matches_qwen2_when_a_system_message_is_given() {
    let fallback = ChatTemplate::new(CHATML_TEMPLATE, "", "<|im_end|>").unwrap();
    let qwen = ChatTemplate::new(QWEN2_CHATML, "", "<|im_end|>").unwrap();
    for add_generation_prompt in [false, true] {
        assert_eq!(
            fallback
                .render(&conversation(), add_generation_prompt)
                .unwrap(),
            qwen.render(&conversation(), add_generation_prompt).unwrap()
        );
    }
}

#[test]
fn mistral_instruct_renders_alternating_turns() {
    let t = ChatTemplate::new(MISTRAL_INSTRUCT, "<s>", "</s>").unwrap();
    assert_eq!(
        t.render(&without_system(), true).unwrap(),
        "<s>[INST]  Hello!  [/INST]Hi.</s>[INST] 2+2? [/INST]"
    );
}

#[test]
fn mistral_instruct_raises_on_a_system_message_and_broken_alternation() {
    let t = ChatTemplate::new(MISTRAL_INSTRUCT, "<s>", "</s>").unwrap();
    // A leading system turn breaks user/assistant alternation in this template.
    assert_eq!(
        t.render(&conversation(), true),
        Err(ChatError::Raised(ALTERNATE.into()))
    );
    let two_users = [ChatMessage::user("a"), ChatMessage::user("b")];
    let err = t.render(&two_users, true).unwrap_err();
    assert_eq!(err, ChatError::Raised(ALTERNATE.into()));
    assert!(err.to_string().contains(ALTERNATE), "{err}");
    let tool = [ChatMessage::user("a"), ChatMessage::new("tool", "42")];
    assert_eq!(
        t.render(&tool, true),
        Err(ChatError::Raised(
            "Only user and assistant roles are supported!".into()
        ))
    );
    // Llama 2 raises the same way when roles do not alternate.
    let llama = ChatTemplate::new(LLAMA_2_CHAT, "<s>", "</s>").unwrap();
    assert_eq!(
        llama.render(&two_users, true),
        Err(ChatError::Raised(ALTERNATE.into()))
    );
}

#[test]
fn syntax_errors_are_reported_when_the_template_is_loaded() {
    let err = ChatTemplate::new("{% for message in messages %}{{ message.content }}", "", "")
        .unwrap_err();
    let ChatError::Syntax(message) = &err else {
        panic!("expected a syntax error, got {err:?}");
    };
    assert!(message.contains("syntax error"), "{message}");
    assert!(
        err.to_string().starts_with("chat template syntax error"),
        "{err}"
    );
    assert!(matches!(
        ChatTemplate::new("{{ messages[0]['role' }}", "", ""),
        Err(ChatError::Syntax(_))
    ));
}

/// Gemma 3's file has no template: memoria uses the built-in `gemma`, formatted as llama.cpp's,
/// and its turn markers tokenize to Gemma's control tokens.
#[test]
fn gemma3_without_a_file_template_uses_builtin_gemma() {
    use memoria_model::gguf::GgufFile;
    use memoria_model::tokenizer::Tokenizer;
    let path = crate::shared::real_model("gemma-3-270m-q4_k_m.gguf");
    let f = GgufFile::open(&path).expect("gemma file opens");
    assert!(f.get_str("tokenizer.chat_template").is_none());
    let tok = Tokenizer::from_gguf(&f).expect("tokenizer");
    let t = ChatTemplate::for_model(&f, &tok, None).expect("template");
    assert_eq!(t.builtin_name(), Some("gemma"));
    assert_eq!((t.bos_token(), t.eos_token()), ("<bos>", "<eos>"));
    let text = t
        .render(
            &[ChatMessage::system("Be brief."), ChatMessage::user("Hi")],
            true,
        )
        .unwrap();
    assert_eq!(
        text,
        "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n"
    );
    let ids = tok.encode(&text, true, true);
    let start = tok.find_token("<start_of_turn>").unwrap();
    let end = tok.find_token("<end_of_turn>").unwrap();
    assert_eq!(ids[..2], [2, start]);
    assert!(tok.is_control(start) && ids.contains(&end));
    // SmolLM2 keeps its own (ChatML) template.
    let smol = GgufFile::open(crate::shared::path(
        "models/SmolLM2-135M-Instruct.Q4_1.gguf",
    ))
    .unwrap();
    let smol_tok = Tokenizer::from_gguf(&smol).unwrap();
    let t = ChatTemplate::for_model(&smol, &smol_tok, None).unwrap();
    assert_eq!(t.builtin_name(), None);
    assert!(t.source().contains("<|im_start|>"));
    let t = ChatTemplate::for_model(&smol, &smol_tok, Some("llama3")).unwrap();
    assert_eq!(t.builtin_name(), Some("llama3"));
}
