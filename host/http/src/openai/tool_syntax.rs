//! The tool-call syntax a chat template teaches its model, detected from the template text as
//! llama.cpp's `--jinja` server does: Hermes 2 Pro / Qwen 2.5 (`<tool_call>\n{"name": ...,
//! "arguments": {...}}\n</tool_call>`, several calls one after another), Llama 3.x (one bare
//! `{"name": ..., "parameters": {...}}` after the assistant header), or, for any other template,
//! memoria's generic JSON form (tools described in the system message).

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
}

const HERMES: Wrapping = Wrapping {
    open: "<tool_call>\n",
    close: "\n</tool_call>",
    separator: "\n",
    arguments_key: "arguments",
    trigger: "<tool_call>",
    parallel: true,
};

const LLAMA3: Wrapping = Wrapping {
    open: "",
    close: "",
    separator: "",
    arguments_key: "parameters",
    trigger: "{",
    parallel: false,
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

    /// The wrapping of a native syntax (`None` for the generic form).
    pub fn wrapping(self) -> Option<&'static Wrapping> {
        match self {
            ToolSyntax::Generic => None,
            ToolSyntax::Hermes => Some(&HERMES),
            ToolSyntax::Llama3 => Some(&LLAMA3),
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
