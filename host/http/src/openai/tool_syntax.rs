//! The tool-call syntax a chat template teaches its model, detected from the template text as
//! llama.cpp's `--jinja` server does: Hermes 2 Pro / Qwen 2.5 (`<tool_call>\n{"name": ...,
//! "arguments": {...}}\n</tool_call>`, several calls one after another; Qwen3, Granite 4), Llama
//! 3.x (one bare `{"name": ..., "parameters": {...}}` after the assistant header), Granite 3.x
//! (`<|tool_call|>` then a JSON list of `{"name", "arguments"}`), gpt-oss's harmony
//! (`<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{args}`, read by
//! `harmony_scan`), or, for any other template, memoria's generic JSON form (tools described in
//! the system message).

use memoria_model::chat::ChatTemplate;

/// How a model writes tool calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolSyntax {
    /// `{"tool_calls": [...]}` / `{"response": ...}`, tools described in the system message.
    Generic,
    /// `<tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>` (Hermes 2 Pro, Qwen 2.5).
    Hermes,
    /// A bare `{"name": ..., "parameters": ...}` (Llama 3.1, 3.2, 3.3).
    Llama3,
    /// `<|tool_call|>[{"name": ..., "arguments": ...}, ...]` (Granite 3.x).
    Granite,
    /// A harmony `commentary` message to `functions.NAME` whose body is the arguments (gpt-oss).
    Harmony,
}

/// The literal texts of a native syntax.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wrapping {
    /// Before each call's JSON.
    pub open: &'static str,
    /// After each call's JSON.
    pub close: &'static str,
    /// Between calls.
    pub separator: &'static str,
    /// The key of the arguments object.
    pub arguments_key: &'static str,
    /// What an answer starts with when it calls (an answer not starting so is prose).
    pub trigger: &'static str,
    /// Whether an answer may hold several calls.
    pub parallel: bool,
    /// Whether the calls are one JSON list after `open` (then `close` and `separator` are
    /// empty) rather than each wrapped on its own.
    pub list: bool,
}

const HERMES: Wrapping = Wrapping {
    open: "<tool_call>\n",
    close: "\n</tool_call>",
    separator: "\n",
    arguments_key: "arguments",
    trigger: "<tool_call>",
    parallel: true,
    list: false,
};

const LLAMA3: Wrapping = Wrapping {
    open: "",
    close: "",
    separator: "",
    arguments_key: "parameters",
    trigger: "{",
    parallel: false,
    list: false,
};

const GRANITE: Wrapping = Wrapping {
    open: "<|tool_call|>",
    close: "",
    separator: "",
    arguments_key: "arguments",
    trigger: "<|tool_call|>",
    parallel: true,
    list: true,
};

impl ToolSyntax {
    /// The syntax `template` uses: native only when the template reads `tools`.
    pub fn detect(template: &ChatTemplate) -> ToolSyntax {
        ToolSyntax::detect_source(template.source(), template.uses_tools())
    }

    /// Detection over a template's text.
    pub fn detect_source(source: &str, uses_tools: bool) -> ToolSyntax {
        if !uses_tools {
            ToolSyntax::Generic
        } else if source.contains("<|channel|>") && source.contains("functions.") {
            ToolSyntax::Harmony
        } else if source.contains("<|tool_call|>") {
            ToolSyntax::Granite
        } else if source.contains("<tool_call>") {
            ToolSyntax::Hermes
        } else if source.contains("<|start_header_id|>")
            && (source.contains("ipython") || source.contains("\"parameters\""))
        {
            ToolSyntax::Llama3
        } else {
            ToolSyntax::Generic
        }
    }

    /// The wrapping of a syntax whose calls are JSON objects between literal texts (`None` for
    /// the generic form and harmony).
    pub fn wrapping(self) -> Option<&'static Wrapping> {
        match self {
            ToolSyntax::Generic | ToolSyntax::Harmony => None,
            ToolSyntax::Hermes => Some(&HERMES),
            ToolSyntax::Llama3 => Some(&LLAMA3),
            ToolSyntax::Granite => Some(&GRANITE),
        }
    }

    /// Whether tools go through the chat template (its `tools` variable, structured
    /// `tool_calls`) rather than into the system message as text.
    pub fn is_native(self) -> bool {
        self != ToolSyntax::Generic
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const QWEN: &str = include_str!("../../../../tests/data/templates/qwen2.5-tools.jinja");
    const LLAMA31: &str = include_str!("../../../../tests/data/templates/llama3.1-tools.jinja");
    const DIR: &str = "../../tests/data/templates";

    #[test]
    fn family_templates_name_their_syntax() {
        for (file, want) in [
            ("Qwen-Qwen3-0.6B.jinja", ToolSyntax::Hermes),
            ("ibm-granite-granite-4.0.jinja", ToolSyntax::Hermes),
            (
                "ibm-granite-granite-3.3-2B-Instruct.jinja",
                ToolSyntax::Granite,
            ),
            ("openai-gpt-oss-120b.jinja", ToolSyntax::Harmony),
            // These templates do not read `tools`: the generic form.
            ("HuggingFaceTB-SmolLM3-3B.jinja", ToolSyntax::Generic),
            ("microsoft-Phi-3.5-mini-instruct.jinja", ToolSyntax::Generic),
            ("google-gemma-2-2b-it.jinja", ToolSyntax::Generic),
            ("olmo2.jinja", ToolSyntax::Generic),
        ] {
            let src = std::fs::read_to_string(format!("{DIR}/{file}")).unwrap();
            let t = ChatTemplate::new(&src, "", "").unwrap();
            assert_eq!(ToolSyntax::detect(&t), want, "{file}");
        }
        assert!(ToolSyntax::Granite.wrapping().unwrap().list);
        assert!(ToolSyntax::Harmony.wrapping().is_none());
        assert!(ToolSyntax::Harmony.is_native());
    }

    #[test]
    fn syntaxes_are_detected_from_the_template_text() {
        let t = |src: &str| ChatTemplate::new(src, "", "").unwrap();
        assert_eq!(ToolSyntax::detect(&t(QWEN)), ToolSyntax::Hermes);
        assert_eq!(ToolSyntax::detect(&t(LLAMA31)), ToolSyntax::Llama3);
        let chatml = ChatTemplate::builtin("chatml", "", "").unwrap();
        assert_eq!(ToolSyntax::detect(&chatml), ToolSyntax::Generic);
        let llama3 = ChatTemplate::builtin("llama3", "", "").unwrap();
        assert_eq!(ToolSyntax::detect(&llama3), ToolSyntax::Generic);
        // Tools read, but in a syntax not known here: the generic form.
        assert_eq!(
            ToolSyntax::detect_source("{{ tools }}[TOOL_CALLS]", true),
            ToolSyntax::Generic
        );
        // A `<tool_call>` mention without reading tools is not a tool template.
        assert_eq!(
            ToolSyntax::detect_source("<tool_call>", false),
            ToolSyntax::Generic
        );
        assert!(ToolSyntax::Hermes.wrapping().unwrap().parallel);
        assert!(!ToolSyntax::Llama3.wrapping().unwrap().parallel);
        assert!(ToolSyntax::Generic.wrapping().is_none());
    }
}
