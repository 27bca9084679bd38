//! Streaming a tool answer as it is generated: each chunk carries what the new tokens made
//! readable (`tool_scan`): a call's header (`index`, `id`, `type`, `function.name`) once its name
//! is complete, then its `function.arguments` text piece by piece, as OpenAI streams
//! `delta.tool_calls`; or, for a direct answer, the response string's text as `content`. The
//! finish chunk says `tool_calls` when calls were made.

use serde_json::{Value, json};

use super::chat::ChatChunks;
use super::run::{End, SseFormat};
use super::tool_scan::{Scan, scan_as};
use super::tool_syntax::ToolSyntax;
use super::tools::call_json;
use memoria_sched::StopReason;
use memoria_sched::sampling::TokenLogprobs;

/// What one choice has written and sent.
#[derive(Default)]
struct Sent {
    /// The answer so far.
    text: String,
    /// Per call started in the stream: bytes of its arguments sent.
    arguments: Vec<usize>,
    /// Bytes of the direct response's text (or of an unreadable answer) sent.
    content: usize,
    /// Whether the answer made calls and closed them.
    called: bool,
}

/// The chunks of a streamed chat completion under a tool plan.
pub struct ToolChunks {
    chat: ChatChunks,
    /// Calls of choice `i` are numbered from `{id_base}_{i}`.
    id_base: String,
    choices: Vec<Sent>,
    /// The syntax the answers are written in.
    syntax: ToolSyntax,
}

impl ToolChunks {
    pub fn new(chat: ChatChunks, choices: usize, syntax: ToolSyntax) -> Self {
        let id_base = chat.id.trim_start_matches("chatcmpl-").to_string();
        Self {
            chat,
            id_base,
            choices: (0..choices).map(|_| Sent::default()).collect(),
            syntax,
        }
    }

    /// The delta the answer's growth since the last chunk makes, if any.
    fn growth(&mut self, index: usize) -> Option<Value> {
        let base = format!("{}_{index}", self.id_base);
        let syntax = self.syntax;
        let sent = self.choices.get_mut(index)?;
        match scan_as(syntax, &sent.text) {
            Scan::Undecided => None,
            Scan::Response { text, .. } => {
                let new = text.get(sent.content..).filter(|n| !n.is_empty())?;
                sent.content = text.len();
                Some(json!({"content": new}))
            }
            Scan::Calls { calls, closed } => {
                sent.called = closed;
                let mut deltas = Vec::new();
                for (k, call) in calls.iter().enumerate() {
                    let args = call.arguments;
                    match sent.arguments.get_mut(k) {
                        None => {
                            let name = call.name.as_deref().unwrap_or("");
                            let mut d = call_json(&base, k, name, args);
                            d["index"] = json!(k);
                            deltas.push(d);
                            sent.arguments.push(args.len());
                        }
                        Some(done) if args.len() > *done => {
                            let piece = args.get(*done..).unwrap_or("");
                            deltas.push(json!({"index": k, "function": {"arguments": piece}}));
                            *done = args.len();
                        }
                        Some(_) => {}
                    }
                }
                (!deltas.is_empty()).then(|| json!({"tool_calls": deltas}))
            }
            Scan::Other => {
                let new = sent.text.get(sent.content..).filter(|n| !n.is_empty())?;
                let delta = json!({"content": new});
                sent.content = sent.text.len();
                Some(delta)
            }
        }
    }
}

impl SseFormat for ToolChunks {
    fn first(&mut self, index: usize) -> Option<Value> {
        self.chat.first(index)
    }

    fn delta(
        &mut self,
        index: usize,
        text: &str,
        _ids: &[u32],
        _lps: &[TokenLogprobs],
    ) -> Option<Value> {
        self.choices.get_mut(index)?.text.push_str(text);
        let delta = self.growth(index)?;
        Some(self.chat.chunk(index, delta, Value::Null, Value::Null))
    }

    fn finish(&mut self, index: usize, reason: StopReason, end: Option<&End>) -> Value {
        let Some(sent) = self.choices.get_mut(index) else {
            return self.chat.finish(index, reason, end);
        };
        if sent.called {
            let mut c = self
                .chat
                .chunk(index, json!({}), Value::Null, json!("tool_calls"));
            ChatChunks::add_timings(&mut c, end);
            return c;
        }
        // An answer cut before its form was readable goes out as the text it is.
        let unsent = match scan_as(self.syntax, &sent.text) {
            Scan::Undecided => sent.text.clone(),
            _ => String::new(),
        };
        let delta = if unsent.is_empty() {
            json!({})
        } else {
            json!({"content": unsent})
        };
        let mut c = self
            .chat
            .chunk(index, delta, Value::Null, json!(reason.as_str()));
        ChatChunks::add_timings(&mut c, end);
        c
    }

    fn usage(&self, end: &End) -> Value {
        self.chat.usage(end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn chunks() -> ToolChunks {
        chunks_in(ToolSyntax::Generic)
    }

    fn chunks_in(syntax: ToolSyntax) -> ToolChunks {
        let bytes = memoria_model::synth::demo::demo_gguf_bytes().unwrap();
        let gguf = memoria_model::gguf::GgufFile::from_bytes(bytes).unwrap();
        let tok = memoria_model::tokenizer::Tokenizer::from_gguf(&gguf).unwrap();
        ToolChunks::new(
            ChatChunks::new("chatcmpl-abc", 1, "m", Arc::new(tok), None),
            2,
            syntax,
        )
    }

    /// Feeds `text` one byte-piece at a time and assembles the stream as a client does.
    fn assemble(
        f: &mut ToolChunks,
        index: usize,
        text: &str,
    ) -> (Vec<(String, String, String)>, String, Value) {
        let mut calls: Vec<(String, String, String)> = Vec::new();
        let mut content = String::new();
        let mut feed = |v: Option<Value>, calls: &mut Vec<(String, String, String)>| {
            let Some(v) = v else { return };
            let d = &v["choices"][0]["delta"];
            if let Some(c) = d["content"].as_str() {
                content.push_str(c);
            }
            for t in d["tool_calls"].as_array().into_iter().flatten() {
                let k = t["index"].as_u64().unwrap() as usize;
                if k == calls.len() {
                    calls.push((
                        t["id"].as_str().unwrap().into(),
                        String::new(),
                        String::new(),
                    ));
                }
                calls[k]
                    .1
                    .push_str(t["function"]["name"].as_str().unwrap_or(""));
                calls[k]
                    .2
                    .push_str(t["function"]["arguments"].as_str().unwrap_or(""));
            }
        };
        let mut at = 0;
        while at < text.len() {
            let mut end = (at + 3).min(text.len());
            while !text.is_char_boundary(end) {
                end += 1;
            }
            feed(f.delta(index, &text[at..end], &[], &[]), &mut calls);
            at = end;
        }
        let fin = f.finish(index, StopReason::Eog, None);
        feed(Some(fin.clone()), &mut calls);
        (calls, content, fin["choices"][0]["finish_reason"].clone())
    }

    #[test]
    fn streamed_calls_assemble_to_the_whole_answer() {
        let text = r#"{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}, {"name": "get_time", "arguments": {"tz": "CET"}}]}"#;
        let mut f = chunks();
        let (calls, content, finish) = assemble(&mut f, 1, text);
        let Some(super::super::tools::Answer::Calls(whole)) =
            super::super::tools::parse_answer(text, "abc_1", ToolSyntax::Generic)
        else {
            panic!("calls expected");
        };
        assert_eq!(calls.len(), 2);
        for (k, (id, name, args)) in calls.iter().enumerate() {
            assert_eq!(whole[k]["id"], id.as_str());
            assert_eq!(whole[k]["function"]["name"], name.as_str());
            assert_eq!(whole[k]["function"]["arguments"], args.as_str());
        }
        assert_eq!(content, "");
        assert_eq!(finish, "tool_calls");
    }

    #[test]
    fn a_direct_answer_streams_as_content() {
        let mut f = chunks();
        let (calls, content, finish) =
            assemble(&mut f, 0, r#"{"response": "It is \"sunny\" in Lima."}"#);
        assert!(calls.is_empty());
        assert_eq!(content, "It is \"sunny\" in Lima.");
        assert_eq!(finish, "stop");
        // Cut before the form was readable: the text as it is.
        let mut f = chunks();
        let (_, content, _) = assemble(&mut f, 0, r#"{"tool_"#);
        assert_eq!(content, r#"{"tool_"#);
    }

    /// Streams `text` in `syntax` and checks the pieces assemble to the whole answer's calls.
    fn streams_like_the_whole(syntax: ToolSyntax, text: &str, n_calls: usize) {
        let mut f = chunks_in(syntax);
        let (calls, content, finish) = assemble(&mut f, 1, text);
        let Some(super::super::tools::Answer::Calls(whole)) =
            super::super::tools::parse_answer(text, "abc_1", syntax)
        else {
            panic!("calls expected in {text:?}");
        };
        assert_eq!(calls.len(), n_calls);
        assert_eq!(whole.len(), n_calls);
        for (k, (id, name, args)) in calls.iter().enumerate() {
            assert_eq!(whole[k]["id"], id.as_str());
            assert_eq!(whole[k]["function"]["name"], name.as_str());
            assert_eq!(whole[k]["function"]["arguments"], args.as_str());
            assert!(serde_json::from_str::<Value>(args).is_ok(), "{args}");
        }
        assert_eq!(content, "");
        assert_eq!(finish, "tool_calls");
    }

    #[test]
    fn native_syntaxes_stream_their_calls() {
        streams_like_the_whole(
            ToolSyntax::Hermes,
            "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>\n<tool_call>\n{\"name\":\"get_time\",\"arguments\":{\"tz\":\"CET\"}}\n</tool_call>",
            2,
        );
        streams_like_the_whole(
            ToolSyntax::Llama3,
            r#"{"name": "get_weather", "parameters": {"city": "Oslo"}}"#,
            1,
        );
    }

    #[test]
    fn native_prose_and_damaged_calls_stream_as_content() {
        for syntax in [ToolSyntax::Hermes, ToolSyntax::Llama3] {
            let mut f = chunks_in(syntax);
            let (calls, content, finish) = assemble(&mut f, 0, "It is sunny <3.");
            assert!(calls.is_empty());
            assert_eq!(content, "It is sunny <3.");
            assert_eq!(finish, "stop");
        }
        // A prefix of the trigger held back, then sent as text at the end.
        let mut f = chunks_in(ToolSyntax::Hermes);
        let (_, content, _) = assemble(&mut f, 0, "<tool_c");
        assert_eq!(content, "<tool_c");
        // Calls that go wrong fall back to the raw text.
        let bad = "<tool_call>\nnot json</tool_call>";
        let mut f = chunks_in(ToolSyntax::Hermes);
        let (calls, content, finish) = assemble(&mut f, 0, bad);
        assert!(calls.is_empty());
        assert_eq!(content, bad);
        assert_eq!(finish, "stop");
        assert!(super::super::tools::parse_answer(bad, "x", ToolSyntax::Hermes).is_none());
    }
}
