//! Built-in chat templates by name, as llama.cpp's `--chat-template NAME` knows them
//! (`src/llama-chat.cpp`): our own minijinja sources that give exactly llama.cpp's formatting,
//! BOS excluded (llama.cpp adds it when tokenizing the prompt). `c_trim` is C `isspace` trimming,
//! the `trim` llama.cpp applies. Besides llama.cpp's names, `olmo2`: OLMo 2's own (Tülu-style)
//! template, verbatim, for OLMo 2 files that carry none.

/// The names, in llama.cpp's order, then memoria's own.
pub const BUILTIN_NAMES: &[&str] = &[
    "chatml",
    "llama2",
    "llama2-sys",
    "llama2-sys-bos",
    "llama2-sys-strip",
    "mistral-v1",
    "mistral-v3",
    "mistral-v3-tekken",
    "mistral-v7",
    "mistral-v7-tekken",
    "phi3",
    "phi4",
    "falcon3",
    "zephyr",
    "monarch",
    "gemma",
    "orion",
    "openchat",
    "vicuna",
    "vicuna-orca",
    "deepseek",
    "command-r",
    "llama3",
    "olmo2",
];

/// ChatML, the template llama.cpp falls back to when a model ships none.
pub const CHATML: &str = r#"{%- for m in messages -%}
{{- '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}{%- endif -%}"#;

const LLAMA2: &str = r#"{%- set ns = namespace(inside=true) -%}
{{- '[INST] ' -}}
{%- for m in messages -%}
{%- set content = (m['content'] | c_trim) if strip else m['content'] -%}
{%- if not ns.inside -%}
{%- set ns.inside = true -%}
{{- '<s>[INST] ' if bos_inside else '[INST] ' -}}
{%- endif -%}
{%- if m['role'] == 'system' -%}
{{- ('<<SYS>>\n' + content + '\n<</SYS>>\n\n') if sys else (content + '\n') -}}
{%- elif m['role'] == 'user' -%}
{{- content + ' [/INST]' -}}
{%- else -%}
{{- content + '</s>' -}}
{%- set ns.inside = false -%}
{%- endif -%}
{%- endfor -%}"#;

const MISTRAL_V1_V3: &str = r#"{%- set ns = namespace(inside=false) -%}
{%- for m in messages -%}
{%- if not ns.inside -%}
{{- lead + '[INST]' + trail -}}
{%- set ns.inside = true -%}
{%- endif -%}
{%- if m['role'] == 'system' -%}
{{- m['content'] + '\n\n' -}}
{%- elif m['role'] == 'user' -%}
{{- m['content'] + lead + '[/INST]' -}}
{%- else -%}
{{- trail + ((m['content'] | c_trim) if trim_assistant else m['content']) + '</s>' -}}
{%- set ns.inside = false -%}
{%- endif -%}
{%- endfor -%}"#;

const MISTRAL_V7: &str = r#"{%- for m in messages -%}
{%- if m['role'] == 'system' -%}
{{- '[SYSTEM_PROMPT]' + trail + m['content'] + '[/SYSTEM_PROMPT]' -}}
{%- elif m['role'] == 'user' -%}
{{- '[INST]' + trail + m['content'] + '[/INST]' -}}
{%- else -%}
{{- trail + m['content'] + '</s>' -}}
{%- endif -%}
{%- endfor -%}"#;

const PHI3: &str = r#"{%- for m in messages -%}
{{- '<|' + m['role'] + '|>\n' + m['content'] + '<|end|>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|assistant|>\n' -}}{%- endif -%}"#;

const PHI4: &str = r#"{%- for m in messages -%}
{{- '<|im_start|>' + m['role'] + '<|im_sep|>' + m['content'] + '<|im_end|>' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|im_start|>assistant<|im_sep|>' -}}{%- endif -%}"#;

const FALCON3: &str = r#"{%- for m in messages -%}
{{- '<|' + m['role'] + '|>\n' + m['content'] + '\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|assistant|>\n' -}}{%- endif -%}"#;

const ZEPHYR: &str = r#"{%- for m in messages -%}
{{- '<|' + m['role'] + '|>\n' + m['content'] + '<|endoftext|>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|assistant|>\n' -}}{%- endif -%}"#;

const MONARCH: &str = r#"{%- for m in messages -%}
{{- ('' if loop.first else '<s>') + m['role'] + '\n' + m['content'] + '</s>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<s>assistant\n' -}}{%- endif -%}"#;

const GEMMA: &str = r#"{%- set ns = namespace(sys='') -%}
{%- for m in messages -%}
{%- if m['role'] == 'system' -%}
{%- set ns.sys = ns.sys + (m['content'] | c_trim) -%}
{%- else -%}
{%- set role = 'model' if m['role'] == 'assistant' else m['role'] -%}
{{- '<start_of_turn>' + role + '\n' -}}
{%- if ns.sys and role != 'model' -%}
{{- ns.sys + '\n\n' -}}
{%- set ns.sys = '' -%}
{%- endif -%}
{{- (m['content'] | c_trim) + '<end_of_turn>\n' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<start_of_turn>model\n' -}}{%- endif -%}"#;

const ORION: &str = r#"{%- set ns = namespace(sys='') -%}
{%- for m in messages -%}
{%- if m['role'] == 'system' -%}
{%- set ns.sys = ns.sys + m['content'] -%}
{%- elif m['role'] == 'user' -%}
{{- 'Human: ' -}}
{%- if ns.sys -%}
{{- ns.sys + '\n\n' -}}
{%- set ns.sys = '' -%}
{%- endif -%}
{{- m['content'] + '\n\nAssistant: </s>' -}}
{%- else -%}
{{- m['content'] + '</s>' -}}
{%- endif -%}
{%- endfor -%}"#;

const OPENCHAT: &str = r#"{%- for m in messages -%}
{%- if m['role'] == 'system' -%}
{{- m['content'] + '<|end_of_turn|>' -}}
{%- else -%}
{{- 'GPT4 Correct ' + (m['role'][:1] | upper) + m['role'][1:] + ': ' + m['content'] + '<|end_of_turn|>' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- 'GPT4 Correct Assistant:' -}}{%- endif -%}"#;

const VICUNA: &str = r#"{%- for m in messages -%}
{%- if m['role'] == 'system' -%}
{{- ('SYSTEM: ' + m['content'] + '\n') if orca else (m['content'] + '\n\n') -}}
{%- elif m['role'] == 'user' -%}
{{- 'USER: ' + m['content'] + '\n' -}}
{%- elif m['role'] == 'assistant' -%}
{{- 'ASSISTANT: ' + m['content'] + '</s>\n' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- 'ASSISTANT:' -}}{%- endif -%}"#;

const DEEPSEEK: &str = r#"{%- for m in messages -%}
{%- if m['role'] == 'system' -%}
{{- m['content'] -}}
{%- elif m['role'] == 'user' -%}
{{- '### Instruction:\n' + m['content'] + '\n' -}}
{%- elif m['role'] == 'assistant' -%}
{{- '### Response:\n' + m['content'] + '\n<|EOT|>\n' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '### Response:\n' -}}{%- endif -%}"#;

const LLAMA3: &str = r#"{%- for m in messages -%}
{{- '<|start_header_id|>' + m['role'] + '<|end_header_id|>\n\n' + (m['content'] | c_trim) + '<|eot_id|>' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}{%- endif -%}"#;

/// OLMo 2 Instruct's template as its tokenizer config ships it (BOS written by the template).
pub(crate) const OLMO2: &str = "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'system' %}{{ '<|system|>\n' + message['content'] + '\n' }}{% elif message['role'] == 'user' %}{{ '<|user|>\n' + message['content'] + '\n' }}{% elif message['role'] == 'assistant' %}{% if not loop.last %}{{ '<|assistant|>\n'  + message['content'] + eos_token + '\n' }}{% else %}{{ '<|assistant|>\n'  + message['content'] + eos_token }}{% endif %}{% endif %}{% if loop.last and add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}{% endfor %}";

/// Cohere's Command R(+): turns in `<|START_OF_TURN_TOKEN|>` with a role token, contents trimmed.
const COMMAND_R: &str = r#"{%- for m in messages -%}
{%- set role = {'system': '<|SYSTEM_TOKEN|>', 'user': '<|USER_TOKEN|>', 'assistant': '<|CHATBOT_TOKEN|>'}.get(m['role']) -%}
{%- if role -%}
{{- '<|START_OF_TURN_TOKEN|>' + role + (m['content'] | c_trim) + '<|END_OF_TURN_TOKEN|>' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>' -}}{%- endif -%}"#;

/// The minijinja source of the built-in template `name` (one of [`BUILTIN_NAMES`]).
pub fn source(name: &str) -> Option<String> {
    let with = |sets: &[(&str, &str)], body: &str| {
        let mut s: String = sets
            .iter()
            .map(|(k, v)| format!("{{%- set {k} = {v} -%}}\n"))
            .collect();
        s.push_str(body);
        s
    };
    let llama2 = |sys, bos_inside, strip| {
        with(
            &[("sys", sys), ("bos_inside", bos_inside), ("strip", strip)],
            LLAMA2,
        )
    };
    let mistral = |lead, trail, trim| {
        with(
            &[("lead", lead), ("trail", trail), ("trim_assistant", trim)],
            MISTRAL_V1_V3,
        )
    };
    Some(match name {
        "chatml" => CHATML.to_owned(),
        "llama2" => llama2("false", "false", "false"),
        "llama2-sys" => llama2("true", "false", "false"),
        "llama2-sys-bos" => llama2("true", "true", "false"),
        "llama2-sys-strip" => llama2("true", "false", "true"),
        "mistral-v1" => mistral("' '", "' '", "false"),
        "mistral-v3" => mistral("''", "' '", "true"),
        "mistral-v3-tekken" => mistral("''", "''", "false"),
        "mistral-v7" => with(&[("trail", "' '")], MISTRAL_V7),
        "mistral-v7-tekken" => with(&[("trail", "''")], MISTRAL_V7),
        "phi3" => PHI3.to_owned(),
        "phi4" => PHI4.to_owned(),
        "falcon3" => FALCON3.to_owned(),
        "zephyr" => ZEPHYR.to_owned(),
        "monarch" => MONARCH.to_owned(),
        "gemma" => GEMMA.to_owned(),
        "orion" => ORION.to_owned(),
        "openchat" => OPENCHAT.to_owned(),
        "vicuna" => with(&[("orca", "false")], VICUNA),
        "vicuna-orca" => with(&[("orca", "true")], VICUNA),
        "deepseek" => DEEPSEEK.to_owned(),
        "command-r" => COMMAND_R.to_owned(),
        "llama3" => LLAMA3.to_owned(),
        "olmo2" => OLMO2.to_owned(),
        _ => return None,
    })
}

/// The built-in template used for an architecture whose file has no template: `gemma` for the
/// Gemma family, `olmo2` for OLMo 2, ChatML otherwise (llama.cpp's fallback).
pub fn default_for_arch(arch: &str) -> &'static str {
    match arch {
        "gemma" | "gemma2" | "gemma3" | "gemma3n" => "gemma",
        "olmo2" => "olmo2",
        _ => "chatml",
    }
}
