//! The shapes of a Responses API answer: the `response` object, its output items (a `message`
//! with `output_text`, or `function_call` items), and the streamed `response.*` events with
//! their `sequence_number`s, as the `openai` SDK reads them.

use memoria_sched::StopReason;
use memoria_sched::Usage;
use memoria_sched::sampling::TokenLogprobs;
use serde_json::{Map, Value, json};

use super::store::new_id;
use super::{Keeper, echoed, now, status};
use crate::error::ApiError;
use crate::openai::Ctx;
use crate::openai::run::{End, SseFormat};

/// What every event and the final object of one response repeat.
pub(crate) struct Head {
    pub id: String,
    msg_id: String,
    created_at: u64,
    model: String,
    previous: Option<String>,
    instructions: Option<String>,
    store: bool,
    /// Echoed request fields.
    echo: Map<String, Value>,
}

impl Head {
    pub fn new(
        ctx: &Ctx,
        r: &Map<String, Value>,
        previous: Option<String>,
        instructions: Option<String>,
        store: bool,
    ) -> Head {
        let mut echo = Map::new();
        echo.insert("temperature".into(), echoed(r, "temperature", json!(1.0)));
        echo.insert("top_p".into(), echoed(r, "top_p", json!(1.0)));
        echo.insert("tools".into(), echoed(r, "tools", json!([])));
        echo.insert(
            "tool_choice".into(),
            echoed(r, "tool_choice", json!("auto")),
        );
        echo.insert(
            "parallel_tool_calls".into(),
            echoed(r, "parallel_tool_calls", json!(true)),
        );
        echo.insert(
            "max_output_tokens".into(),
            echoed(r, "max_output_tokens", Value::Null),
        );
        echo.insert("metadata".into(), echoed(r, "metadata", json!({})));
        echo.insert(
            "text".into(),
            echoed(r, "text", json!({"format": {"type": "text"}})),
        );
        Head {
            id: new_id("resp"),
            msg_id: new_id("msg"),
            created_at: now(),
            model: ctx.model_id().to_string(),
            previous,
            instructions,
            store,
            echo,
        }
    }

    /// The output items and the chat message of a text answer.
    pub fn text(&self, text: &str) -> (Vec<Value>, Value) {
        (
            vec![self.message(text, "completed")],
            json!({"role": "assistant", "content": text}),
        )
    }

    fn message(&self, text: &str, status: &str) -> Value {
        let content = if status == "in_progress" {
            json!([])
        } else {
            json!([{"type": "output_text", "text": text, "annotations": [], "logprobs": []}])
        };
        json!({
            "id": self.msg_id,
            "type": "message",
            "status": status,
            "role": "assistant",
            "content": content,
        })
    }

    /// The output items and the chat message of tool calls (OpenAI chat-shaped `calls`).
    pub fn calls(&self, calls: &[Value]) -> (Vec<Value>, Value) {
        let items = calls
            .iter()
            .map(|c| {
                json!({
                    "type": "function_call",
                    "id": new_id("fc"),
                    "call_id": c["id"],
                    "name": c["function"]["name"],
                    "arguments": c["function"]["arguments"],
                    "status": "completed",
                })
            })
            .collect();
        (
            items,
            json!({"role": "assistant", "content": null, "tool_calls": calls}),
        )
    }

    /// The `response` object; `usage` None while in progress.
    pub fn response(&self, output: &[Value], usage: Option<&Usage>, reason: StopReason) -> Value {
        let (status, incomplete) = match usage {
            Some(_) => status(reason),
            None => ("in_progress", Value::Null),
        };
        let mut r = json!({
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "error": null,
            "incomplete_details": incomplete,
            "instructions": self.instructions,
            "model": self.model,
            "output": output,
            "previous_response_id": self.previous,
            "store": self.store,
            "usage": usage.map(|u| json!({
                "input_tokens": u.prompt_tokens,
                "input_tokens_details": {"cached_tokens": u.cached_tokens},
                "output_tokens": u.completion_tokens,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": u.prompt_tokens + u.completion_tokens,
            })),
        });
        if let Some(obj) = r.as_object_mut() {
            obj.extend(self.echo.clone());
        }
        r
    }
}

/// A text answer streamed as it is generated; the response is kept when it ends.
pub(crate) struct ResponseEvents {
    head: Head,
    keeper: Option<Keeper>,
    text: String,
    tokens: Vec<u32>,
    seq: u64,
}

impl ResponseEvents {
    pub fn new(head: Head, keeper: Keeper) -> Self {
        ResponseEvents {
            head,
            keeper: Some(keeper),
            text: String::new(),
            tokens: Vec::new(),
            seq: 0,
        }
    }

    /// Numbers `events` (one or a list) in stream order.
    fn numbered(&mut self, events: Value) -> Value {
        let mut list = match events {
            Value::Array(v) => v,
            v => vec![v],
        };
        for e in &mut list {
            e["sequence_number"] = json!(self.seq);
            self.seq += 1;
        }
        Value::Array(list)
    }
}

impl SseFormat for ResponseEvents {
    fn first(&mut self, _index: usize) -> Option<Value> {
        let h = &self.head;
        let start = json!([
            {"type": "response.created", "response": h.response(&[], None, StopReason::Eog)},
            {"type": "response.in_progress", "response": h.response(&[], None, StopReason::Eog)},
            {"type": "response.output_item.added", "output_index": 0, "item": h.message("", "in_progress")},
            {"type": "response.content_part.added", "item_id": h.msg_id, "output_index": 0, "content_index": 0,
             "part": {"type": "output_text", "text": "", "annotations": []}},
        ]);
        Some(self.numbered(start))
    }

    fn delta(
        &mut self,
        _index: usize,
        text: &str,
        ids: &[u32],
        _lps: &[TokenLogprobs],
    ) -> Option<Value> {
        self.text.push_str(text);
        self.tokens.extend_from_slice(ids);
        let e = json!({
            "type": "response.output_text.delta", "item_id": self.head.msg_id, "output_index": 0,
            "content_index": 0, "delta": text, "logprobs": [],
        });
        Some(self.numbered(e))
    }

    fn finish(&mut self, _index: usize, reason: StopReason, end: Option<&End>) -> Value {
        let (output, assistant) = self.head.text(&self.text);
        let done = self.head.response(&output, end.map(|e| &e.usage), reason);
        let h = &self.head;
        let events = json!([
            {"type": "response.output_text.done", "item_id": h.msg_id, "output_index": 0, "content_index": 0,
             "text": self.text, "logprobs": []},
            {"type": "response.content_part.done", "item_id": h.msg_id, "output_index": 0, "content_index": 0,
             "part": {"type": "output_text", "text": self.text, "annotations": []}},
            {"type": "response.output_item.done", "output_index": 0, "item": output.first().cloned().unwrap_or(Value::Null)},
            {"type": if done["status"] == "completed" { "response.completed" } else { "response.incomplete" },
             "response": done},
        ]);
        if let Some(k) = self.keeper.take() {
            let tokens = std::mem::take(&mut self.tokens);
            tokio::spawn(async move { k.keep(assistant, &tokens).await });
        }
        self.numbered(events)
    }

    fn usage(&self, _end: &End) -> Value {
        json!([])
    }

    fn named_events(&self) -> bool {
        true
    }

    fn error_events(&self, e: &ApiError) -> String {
        let body = json!({"type": "error", "code": e.code, "message": e.message, "param": e.param,
                          "sequence_number": self.seq});
        format!("event: error\ndata: {body}\n\n")
    }

    fn done_marker(&self) -> bool {
        false
    }
}

/// The events of a whole response (a tool answer, known at its end), numbered.
pub(crate) fn whole(head: &Head, response: &Value) -> Value {
    let mut start = response.clone();
    start["status"] = json!("in_progress");
    start["output"] = json!([]);
    start["usage"] = Value::Null;
    let mut out = vec![
        json!({"type": "response.created", "response": start.clone()}),
        json!({"type": "response.in_progress", "response": start}),
    ];
    let items = response["output"].as_array().cloned().unwrap_or_default();
    for (i, item) in items.iter().enumerate() {
        let mut added = item.clone();
        added["status"] = json!("in_progress");
        if item["type"] == "function_call" {
            added["arguments"] = json!("");
            out.push(
                json!({"type": "response.output_item.added", "output_index": i, "item": added}),
            );
            out.push(
                json!({"type": "response.function_call_arguments.delta", "item_id": item["id"],
                            "output_index": i, "delta": item["arguments"]}),
            );
            out.push(
                json!({"type": "response.function_call_arguments.done", "item_id": item["id"],
                            "output_index": i, "arguments": item["arguments"]}),
            );
        } else {
            added["content"] = json!([]);
            let text = item["content"][0]["text"].clone();
            out.push(
                json!({"type": "response.output_item.added", "output_index": i, "item": added}),
            );
            out.push(json!({"type": "response.content_part.added", "item_id": item["id"], "output_index": i,
                            "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}}));
            out.push(json!({"type": "response.output_text.delta", "item_id": item["id"], "output_index": i,
                            "content_index": 0, "delta": text, "logprobs": []}));
            out.push(json!({"type": "response.output_text.done", "item_id": item["id"], "output_index": i,
                            "content_index": 0, "text": text, "logprobs": []}));
            out.push(json!({"type": "response.content_part.done", "item_id": item["id"], "output_index": i,
                            "content_index": 0, "part": item["content"][0]}));
        }
        out.push(json!({"type": "response.output_item.done", "output_index": i, "item": item}));
    }
    let kind = if response["status"] == "completed" {
        "response.completed"
    } else {
        "response.incomplete"
    };
    out.push(json!({"type": kind, "response": response}));
    let _ = head;
    for (n, e) in out.iter_mut().enumerate() {
        e["sequence_number"] = json!(n);
    }
    Value::Array(out)
}
