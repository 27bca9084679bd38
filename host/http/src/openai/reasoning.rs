//! Splits a chat answer into its reasoning and its content, as llama-server's default
//! `--reasoning-format deepseek` does, for the two reasoning forms templates teach: a leading
//! `<think>…</think>` (Qwen3, SmolLM3, R1-style models; reasoning stripped of surrounding
//! whitespace, content after the close tag with leading whitespace dropped) and gpt-oss's
//! harmony messages (`<|channel|>analysis<|message|>…<|end|>` is reasoning; a `final` message's
//! body is content; a `commentary` message, a tool call, is left raw for the tool syntax to read).
//! Invariant: for a growing text, what a partial split shows only grows, and the split of the
//! finished text extends it, so streamed pieces assemble to the whole answer's fields.

use memoria_model::chat::ChatTemplate;

/// How a template's model writes its reasoning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReasoningSyntax {
    /// No reasoning form: the whole answer is content.
    None,
    /// A leading `<think>…</think>`.
    Think,
    /// gpt-oss's harmony channels.
    Harmony,
}

const THINK_OPEN: &str = "<think>";
const THINK_CLOSE: &str = "</think>";
const CHANNEL: &str = "<|channel|>";
const ANALYSIS: &str = "<|channel|>analysis<|message|>";
const FINAL: &str = "<|channel|>final<|message|>";
const END: &str = "<|end|>";
const START: &str = "<|start|>assistant";

/// An answer's reasoning and content as far as known.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Split {
    pub reasoning: String,
    pub content: String,
}

impl ReasoningSyntax {
    /// The form `template` teaches, from its text (`<think>` or harmony's `<|channel|>`).
    pub fn detect(template: &ChatTemplate) -> ReasoningSyntax {
        ReasoningSyntax::detect_source(template.source())
    }

    /// Detection over a template's text.
    pub fn detect_source(source: &str) -> ReasoningSyntax {
        if source.contains(CHANNEL) && source.contains("analysis") {
            ReasoningSyntax::Harmony
        } else if source.contains(THINK_OPEN) && source.contains(THINK_CLOSE) {
            ReasoningSyntax::Think
        } else {
            ReasoningSyntax::None
        }
    }

    /// The split of `text`; with `done` false the text may still grow, so a tag's possible
    /// beginning (and reasoning's trailing whitespace) is held back.
    pub fn split(self, text: &str, done: bool) -> Split {
        match self {
            ReasoningSyntax::None => Split {
                reasoning: String::new(),
                content: text.to_owned(),
            },
            ReasoningSyntax::Think => think(text, done),
            ReasoningSyntax::Harmony => harmony(text, done),
        }
    }
}

/// `s` without a tail that may be the start of `tag` (when the text may grow).
fn hold_partial<'a>(s: &'a str, tag: &str, done: bool) -> &'a str {
    if done {
        return s;
    }
    for k in (1..tag.len().min(s.len() + 1)).rev() {
        if s.is_char_boundary(s.len() - k) && tag.starts_with(&s[s.len() - k..]) {
            return &s[..s.len() - k];
        }
    }
    s
}

fn think(text: &str, done: bool) -> Split {
    let lead = text.trim_start();
    if !lead.starts_with(THINK_OPEN) {
        if !done && THINK_OPEN.starts_with(lead) {
            return Split::default();
        }
        return Split {
            reasoning: String::new(),
            content: text.to_owned(),
        };
    }
    let body = &lead[THINK_OPEN.len()..];
    match body.find(THINK_CLOSE) {
        Some(end) => Split {
            reasoning: body[..end].trim().to_owned(),
            content: body[end + THINK_CLOSE.len()..].trim_start().to_owned(),
        },
        None => Split {
            reasoning: hold_partial(body, THINK_CLOSE, done).trim().to_owned(),
            content: String::new(),
        },
    }
}

fn harmony(text: &str, done: bool) -> Split {
    let mut reasoning = String::new();
    let mut rest = text;
    loop {
        // A message may open with its role (the prompt already wrote the first one's).
        if let Some(r) = rest.strip_prefix(START) {
            rest = r;
        } else if !done && !rest.is_empty() && START.starts_with(rest) {
            return Split {
                reasoning,
                content: String::new(),
            };
        }
        if let Some(body) = rest.strip_prefix(ANALYSIS) {
            match body.find(END) {
                Some(end) => {
                    reasoning.push_str(&body[..end]);
                    rest = &body[end + END.len()..];
                    continue;
                }
                None => {
                    reasoning.push_str(hold_partial(body, END, done));
                    return Split {
                        reasoning,
                        content: String::new(),
                    };
                }
            }
        }
        if let Some(body) = rest.strip_prefix(FINAL) {
            let body = match body.find(END) {
                Some(end) => &body[..end],
                None => hold_partial(body, END, done),
            };
            return Split {
                reasoning,
                content: body.to_owned(),
            };
        }
        // Still possibly a header we know: wait for it.
        let maybe_header = [ANALYSIS, FINAL, "<|channel|>commentary"]
            .iter()
            .any(|h| h.starts_with(rest));
        if !done && maybe_header {
            return Split {
                reasoning,
                content: String::new(),
            };
        }
        return Split {
            reasoning,
            content: rest.to_owned(),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn whole(s: ReasoningSyntax, text: &str) -> (String, String) {
        let x = s.split(text, true);
        (x.reasoning, x.content)
    }

    #[test]
    fn think_blocks_split_as_llama_server() {
        let t = ReasoningSyntax::Think;
        assert_eq!(
            whole(t, "<think>\nAdd them.\n</think>\n\nIt is 4."),
            ("Add them.".into(), "It is 4.".into())
        );
        assert_eq!(whole(t, "It is 4."), (String::new(), "It is 4.".into()));
        // Empty reasoning (Qwen3 with thinking off writes it in the prompt, a model may too).
        assert_eq!(
            whole(t, "<think>\n\n</think>\n\nHi"),
            (String::new(), "Hi".into())
        );
        // Cut inside the reasoning: all of it is reasoning.
        assert_eq!(
            whole(t, "<think>\nStill thinking </thi"),
            ("Still thinking </thi".into(), String::new())
        );
        assert_eq!(whole(t, "<thi"), (String::new(), "<thi".into()));
    }

    #[test]
    fn harmony_channels_split() {
        let h = ReasoningSyntax::Harmony;
        assert_eq!(
            whole(
                h,
                "<|channel|>analysis<|message|>Greet back.<|end|><|start|>assistant<|channel|>final<|message|>Hello!"
            ),
            ("Greet back.".into(), "Hello!".into())
        );
        assert_eq!(
            whole(h, "<|channel|>final<|message|>Hi<|end|>"),
            (String::new(), "Hi".into())
        );
        // A tool call after the analysis stays raw for the tool syntax.
        let call = "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}";
        assert_eq!(
            whole(
                h,
                &format!("<|channel|>analysis<|message|>Use f.<|end|><|start|>assistant{call}")
            ),
            ("Use f.".into(), call.into())
        );
        // Text in no channel is content as written.
        assert_eq!(whole(h, "plain"), (String::new(), "plain".into()));
    }

    #[test]
    fn detection_from_the_template_text() {
        let src = |p: &str| std::fs::read_to_string(format!("../../tests/data/templates/{p}"));
        let qwen3 = src("Qwen-Qwen3-0.6B.jinja").unwrap();
        let smol = src("HuggingFaceTB-SmolLM3-3B.jinja").unwrap();
        let oss = src("openai-gpt-oss-120b.jinja").unwrap();
        let phi = src("microsoft-Phi-3.5-mini-instruct.jinja").unwrap();
        assert_eq!(
            ReasoningSyntax::detect_source(&qwen3),
            ReasoningSyntax::Think
        );
        assert_eq!(
            ReasoningSyntax::detect_source(&smol),
            ReasoningSyntax::Think
        );
        assert_eq!(
            ReasoningSyntax::detect_source(&oss),
            ReasoningSyntax::Harmony
        );
        assert_eq!(ReasoningSyntax::detect_source(&phi), ReasoningSyntax::None);
    }

    /// Every byte-prefix's split is a prefix of the next one's and of the whole answer's.
    fn grows(s: ReasoningSyntax, text: &str) {
        let final_ = s.split(text, true);
        let mut last = Split::default();
        for end in (0..=text.len()).filter(|&e| text.is_char_boundary(e)) {
            let now = s.split(&text[..end], false);
            assert!(
                now.reasoning.starts_with(&last.reasoning)
                    && now.content.starts_with(&last.content),
                "{s:?} at {end}: {last:?} then {now:?}"
            );
            assert!(
                final_.reasoning.starts_with(&now.reasoning)
                    && final_.content.starts_with(&now.content),
                "{s:?} at {end}: {now:?} vs whole {final_:?}"
            );
            last = now;
        }
    }

    #[test]
    fn partial_splits_only_grow() {
        for text in [
            "<think>\nA < b, so </think>x.\n</think>\n\nIt is <b>4</b>.",
            "  <think>é  \n</think>\n",
            "no reasoning <think> here",
            "<think>cut short </th",
        ] {
            grows(ReasoningSyntax::Think, text);
        }
        for text in [
            "<|channel|>analysis<|message|>Think <|e.<|end|><|start|>assistant<|channel|>final<|message|>Done <|end|> x<|end|>",
            "<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>analysis<|message|>b<|end|><|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\": 1}",
            "plain text",
            "<|channel|>analysis<|message|>cut",
        ] {
            grows(ReasoningSyntax::Harmony, text);
        }
    }
}
