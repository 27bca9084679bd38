//! Anthropic's streamed message: named server-sent events (`message_start`, `ping`,
//! `content_block_start`, `content_block_delta` with `text_delta` or `input_json_delta`,
//! `content_block_stop`, `message_delta` with the stop reason and usage, `message_stop`), as
//! the `anthropic` SDK reads them; text streams token by token, a whole message (a tool answer)
//! goes out as the same events at once.

use memoria_sched::StopReason;
use memoria_sched::sampling::TokenLogprobs;
use serde_json::{Value, json};

use super::{CacheUse, text_stop, usage_json};
use crate::error::ApiError;
use crate::openai::run::{End, SseFormat};

/// What every event of one message repeats.
pub(crate) struct Head {
    pub id: String,
    pub model: String,
    /// Prompt tokens.
    pub prompt: usize,
    pub cache: CacheUse,
    pub stop_sequences: Vec<String>,
}

impl Head {
    /// Anthropic's `stop_reason` of a text answer.
    pub fn stop_reason(&self, reason: StopReason) -> &'static str {
        text_stop(reason)
    }

    /// The `stop_sequence` that ended the text, when one did and it is known (one was given).
    pub fn stop_sequence(&self, _reason: StopReason, stop_reason: &str) -> Value {
        match (stop_reason, self.stop_sequences.as_slice()) {
            ("stop_sequence", [only]) => json!(only),
            _ => Value::Null,
        }
    }

    fn start(&self, output: usize) -> Value {
        json!({
            "type": "message_start",
            "message": {
                "id": self.id,
                "type": "message",
                "role": "assistant",
                "model": self.model,
                "content": [],
                "stop_reason": null,
                "stop_sequence": null,
                "usage": usage_json(self.prompt, output, self.cache),
            },
        })
    }
}

/// A text answer streamed as it is generated.
pub(crate) struct MessageEvents {
    head: Head,
}

impl MessageEvents {
    pub fn new(head: Head) -> Self {
        MessageEvents { head }
    }
}

impl SseFormat for MessageEvents {
    fn first(&mut self, _index: usize) -> Option<Value> {
        Some(json!([
            self.head.start(0),
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            {"type": "ping"},
        ]))
    }

    fn delta(
        &mut self,
        _index: usize,
        text: &str,
        _ids: &[u32],
        _lps: &[TokenLogprobs],
    ) -> Option<Value> {
        Some(json!({
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": text},
        }))
    }

    fn finish(&mut self, _index: usize, reason: StopReason, end: Option<&End>) -> Value {
        let stop = self.head.stop_reason(reason);
        let output = end.map_or(0, |e| e.usage.completion_tokens);
        json!([
            {"type": "content_block_stop", "index": 0},
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": self.head.stop_sequence(reason, stop)},
                "usage": usage_json(self.head.prompt, output, self.head.cache),
            },
            {"type": "message_stop"},
        ])
    }

    fn usage(&self, _end: &End) -> Value {
        json!([])
    }

    fn named_events(&self) -> bool {
        true
    }

    fn error_events(&self, e: &ApiError) -> String {
        let body = json!({"type": "error", "error": {"type": "api_error", "message": e.message}});
        format!("event: error\ndata: {body}\n\n")
    }

    fn done_marker(&self) -> bool {
        false
    }
}

/// The events of a whole `message` (its blocks each started, given in one delta, stopped).
pub(crate) fn whole(message: &Value) -> Value {
    let mut start = message.clone();
    start["content"] = json!([]);
    start["stop_reason"] = Value::Null;
    start["stop_sequence"] = Value::Null;
    let mut out = vec![json!({"type": "message_start", "message": start})];
    let blocks = message["content"].as_array().cloned().unwrap_or_default();
    for (i, b) in blocks.iter().enumerate() {
        let (empty, delta) = match b["type"].as_str() {
            Some("tool_use") => {
                let mut e = b.clone();
                e["input"] = json!({});
                (
                    e,
                    json!({"type": "input_json_delta", "partial_json": b["input"].to_string()}),
                )
            }
            _ => (
                json!({"type": "text", "text": ""}),
                json!({"type": "text_delta", "text": b["text"]}),
            ),
        };
        out.push(json!({"type": "content_block_start", "index": i, "content_block": empty}));
        out.push(json!({"type": "content_block_delta", "index": i, "delta": delta}));
        out.push(json!({"type": "content_block_stop", "index": i}));
    }
    out.push(json!({
        "type": "message_delta",
        "delta": {"stop_reason": message["stop_reason"], "stop_sequence": message["stop_sequence"]},
        "usage": message["usage"],
    }));
    out.push(json!({"type": "message_stop"}));
    Value::Array(out)
}
