//! Streaming a chat answer whose model reasons first: each choice's text is split as it grows
//! (`reasoning`); the reasoning's growth goes out as `delta.reasoning_content`, the content's
//! growth through the inner format (plain content, or a tool answer read by `tool_stream`), as
//! llama-server streams with `--reasoning-format deepseek`. What a split held back (a tag's
//! possible start) is sent with the finish chunk.

use serde_json::{Value, json};

use super::chat::ChatChunks;
use super::reasoning::ReasoningSyntax;
use super::run::{End, SseFormat};
use memoria_sched::StopReason;
use memoria_sched::sampling::TokenLogprobs;

/// What one choice has written and sent.
#[derive(Default)]
struct Sent {
    text: String,
    reasoning: usize,
    content: usize,
}

/// The chunks of a streamed chat completion with reasoning split off.
pub struct ReasoningChunks {
    inner: Box<dyn SseFormat>,
    chat: ChatChunks,
    syntax: ReasoningSyntax,
    choices: Vec<Sent>,
}

impl ReasoningChunks {
    /// `inner` formats the content; `chat` builds chunks carrying only reasoning.
    pub fn new(
        inner: Box<dyn SseFormat>,
        chat: ChatChunks,
        choices: usize,
        syntax: ReasoningSyntax,
    ) -> Self {
        Self {
            inner,
            chat,
            syntax,
            choices: (0..choices).map(|_| Sent::default()).collect(),
        }
    }

    /// The new reasoning and content since the last chunk (`done`: the text is finished).
    fn growth(&mut self, index: usize, done: bool) -> Option<(String, String)> {
        let sent = self.choices.get_mut(index)?;
        let split = self.syntax.split(&sent.text, done);
        let reasoning = split
            .reasoning
            .get(sent.reasoning..)
            .unwrap_or("")
            .to_owned();
        let content = split.content.get(sent.content..).unwrap_or("").to_owned();
        sent.reasoning = sent.reasoning.max(split.reasoning.len());
        sent.content = sent.content.max(split.content.len());
        Some((reasoning, content))
    }
}

/// Adds `reasoning` in front of what `chunk`'s delta says.
fn with_reasoning(mut chunk: Value, reasoning: &str) -> Value {
    if !reasoning.is_empty()
        && let Some(delta) = chunk["choices"][0]["delta"].as_object_mut()
    {
        let before = delta
            .get("reasoning_content")
            .and_then(Value::as_str)
            .unwrap_or("");
        let joined = format!("{reasoning}{before}");
        delta.insert("reasoning_content".into(), json!(joined));
    }
    chunk
}

/// `earlier`'s delta put in front of `later`'s (texts joined, tool-call pieces kept in order).
fn merge(earlier: &Value, mut later: Value) -> Value {
    let (Some(from), Some(into)) = (
        earlier["choices"][0]["delta"].as_object(),
        later["choices"][0]["delta"].as_object_mut(),
    ) else {
        return later;
    };
    for (k, v) in from {
        let joined = match (v, into.get(k)) {
            (Value::String(a), Some(Value::String(b))) => json!(format!("{a}{b}")),
            (Value::Array(a), Some(Value::Array(b))) => {
                Value::Array(a.iter().chain(b.iter()).cloned().collect())
            }
            (v, _) => v.clone(),
        };
        into.insert(k.clone(), joined);
    }
    later
}

impl SseFormat for ReasoningChunks {
    fn first(&mut self, index: usize) -> Option<Value> {
        self.inner.first(index)
    }

    fn delta(
        &mut self,
        index: usize,
        text: &str,
        ids: &[u32],
        logprobs: &[TokenLogprobs],
    ) -> Option<Value> {
        self.choices.get_mut(index)?.text.push_str(text);
        let (reasoning, content) = self.growth(index, false)?;
        let inner = if content.is_empty() {
            None
        } else {
            self.inner.delta(index, &content, ids, logprobs)
        };
        match inner {
            Some(chunk) => Some(with_reasoning(chunk, &reasoning)),
            None if reasoning.is_empty() => None,
            None => Some(self.chat.chunk(
                index,
                json!({"reasoning_content": reasoning}),
                Value::Null,
                Value::Null,
            )),
        }
    }

    fn finish(&mut self, index: usize, reason: StopReason, end: Option<&End>) -> Value {
        let Some((reasoning, content)) = self.growth(index, true) else {
            return self.inner.finish(index, reason, end);
        };
        let flushed = if content.is_empty() {
            None
        } else {
            self.inner.delta(index, &content, &[], &[])
        };
        let fin = self.inner.finish(index, reason, end);
        let fin = match flushed {
            Some(chunk) => merge(&chunk, fin),
            None => fin,
        };
        with_reasoning(fin, &reasoning)
    }

    fn usage(&self, end: &End) -> Value {
        self.inner.usage(end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openai::tool_stream::ToolChunks;
    use crate::openai::tool_syntax::ToolSyntax;
    use std::sync::Arc;

    fn chat() -> ChatChunks {
        let bytes = memoria_model::synth::demo::demo_gguf_bytes().unwrap();
        let gguf = memoria_model::gguf::GgufFile::from_bytes(bytes).unwrap();
        let tok = memoria_model::tokenizer::Tokenizer::from_gguf(&gguf).unwrap();
        ChatChunks::new("chatcmpl-abc", 1, "m", Arc::new(tok), None)
    }

    /// Streams `text` split at `step`-byte pieces; what a client assembles:
    /// (reasoning, content, [(name, arguments)], finish reason).
    fn assemble(
        f: &mut dyn SseFormat,
        text: &str,
        step: usize,
    ) -> (String, String, Vec<(String, String)>, String) {
        let (mut r, mut c, mut calls) = (String::new(), String::new(), Vec::new());
        let mut take = |v: &Value, calls: &mut Vec<(String, String)>| {
            let d = &v["choices"][0]["delta"];
            r.push_str(d["reasoning_content"].as_str().unwrap_or(""));
            c.push_str(d["content"].as_str().unwrap_or(""));
            for t in d["tool_calls"].as_array().into_iter().flatten() {
                let k = t["index"].as_u64().unwrap() as usize;
                if k == calls.len() {
                    calls.push((String::new(), String::new()));
                }
                calls[k]
                    .0
                    .push_str(t["function"]["name"].as_str().unwrap_or(""));
                calls[k]
                    .1
                    .push_str(t["function"]["arguments"].as_str().unwrap_or(""));
            }
        };
        let mut at = 0;
        while at < text.len() {
            let mut end = (at + step).min(text.len());
            while !text.is_char_boundary(end) {
                end += 1;
            }
            if let Some(v) = f.delta(0, &text[at..end], &[], &[]) {
                take(&v, &mut calls);
            }
            at = end;
        }
        let fin = f.finish(0, StopReason::Eog, None);
        take(&fin, &mut calls);
        let reason = fin["choices"][0]["finish_reason"]
            .as_str()
            .unwrap()
            .to_owned();
        (r, c, calls, reason)
    }

    #[test]
    fn reasoning_and_content_stream_apart_at_every_split() {
        let cases = [
            (
                ReasoningSyntax::Think,
                "<think>\nIs 2+2 <4? No.\n</think>\n\nIt is 4.",
            ),
            (ReasoningSyntax::Think, "<think>\ncut </thin"),
            (
                ReasoningSyntax::Harmony,
                "<|channel|>analysis<|message|>Greet <|en back.<|end|><|start|>assistant<|channel|>final<|message|>Hello!",
            ),
        ];
        for (syntax, text) in cases {
            let want = syntax.split(text, true);
            for step in 1..=text.len() {
                let inner = Box::new(chat());
                let mut f = ReasoningChunks::new(inner, chat(), 1, syntax);
                let (r, c, calls, reason) = assemble(&mut f, text, step);
                assert_eq!((r, c), (want.reasoning.clone(), want.content.clone()));
                assert!(calls.is_empty());
                assert_eq!(reason, "stop");
            }
        }
    }

    #[test]
    fn tool_calls_after_reasoning_stream_at_every_split() {
        let cases = [
            (
                ReasoningSyntax::Think,
                ToolSyntax::Hermes,
                "<think>\nNeed weather.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>",
                "get_weather",
                "{\"city\": \"Oslo\"}",
            ),
            (
                ReasoningSyntax::Harmony,
                ToolSyntax::Harmony,
                "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Oslo\"}",
                "get_weather",
                "{\"city\": \"Oslo\"}",
            ),
        ];
        for (rs, ts, text, name, args) in cases {
            for step in 1..=text.len() {
                let inner = Box::new(ToolChunks::new(chat(), 1, ts));
                let mut f = ReasoningChunks::new(inner, chat(), 1, rs);
                let (r, c, calls, reason) = assemble(&mut f, text, step);
                assert_eq!(r, "Need weather.", "{rs:?} step {step}");
                assert_eq!(c, "");
                assert_eq!(calls, [(name.to_owned(), args.to_owned())]);
                assert_eq!(reason, "tool_calls");
            }
        }
    }
}
