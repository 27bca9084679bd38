//! Streaming a request's generations as server-sent events: each choice's tokens as chunks in
//! the endpoint's format ([`SseFormat`]), log-probs with the chunk that releases their text,
//! then the finish, the usage and `[DONE]`.

use super::*;

impl Running {
    /// How many choices are generating.
    pub fn choices(&self) -> usize {
        self.choices
    }

    /// Streams the generations as server-sent events formatted by `fmt`, ending with
    /// `data: [DONE]`. The admission `permit` is released when the stream ends. Log-probs of
    /// tokens whose text is held back (an incomplete character, a possible stop string) go with
    /// the next chunk of their choice.
    pub fn sse(
        mut self,
        mut fmt: Box<dyn SseFormat>,
        include_usage: bool,
        permit: Permit,
    ) -> Response {
        let (tx, body) = ChannelBody::channel(64);
        tokio::spawn(async move {
            let _permit = permit;
            let named = fmt.named_events();
            let send = |v: Value| Bytes::from(events(named, v));
            let mut head = String::new();
            for i in 0..self.choices {
                if let Some(first) = fmt.first(i) {
                    head.push_str(&events(named, first));
                }
            }
            if !head.is_empty() && tx.send(Bytes::from(head)).await.is_err() {
                self.nsm.disconnects.fetch_add(1, Relaxed);
                return;
            }
            let mut pending: Vec<Vec<TokenLogprobs>> = vec![Vec::new(); self.choices];
            let mut ids: Vec<Vec<u32>> = vec![Vec::new(); self.choices];
            let mut totals = Totals::default();
            let mut left = self.choices;
            loop {
                let next = tokio::select! {
                    ev = self.next() => ev,
                    () = tx.closed() => {
                        self.nsm.disconnects.fetch_add(1, Relaxed);
                        return;
                    }
                };
                let Some((i, ev)) = next else { return };
                let (Some(held), Some(held_ids)) = (pending.get_mut(i), ids.get_mut(i)) else {
                    continue;
                };
                let chunk = match ev {
                    Some(Event::Token {
                        id, text, logprobs, ..
                    }) => {
                        held.extend(logprobs);
                        held_ids.push(id);
                        if text.is_empty() {
                            continue;
                        }
                        let Some(c) = fmt.delta(i, &text, held_ids, held) else {
                            continue;
                        };
                        held.clear();
                        held_ids.clear();
                        send(c)
                    }
                    Some(Event::Done {
                        reason,
                        text_tail,
                        usage,
                        ..
                    }) => {
                        self.add(&mut totals, i, &usage);
                        left -= 1;
                        let mut out = String::new();
                        if !text_tail.is_empty() || !held.is_empty() {
                            if let Some(c) = fmt.delta(i, &text_tail, held_ids, held) {
                                out.push_str(&events(named, c));
                            }
                            held.clear();
                            held_ids.clear();
                        }
                        let end = (left == 0).then(|| {
                            let usage = self.usage(&totals);
                            let timings = self.timings(&usage);
                            End { usage, timings }
                        });
                        let last = fmt.finish(i, reason, end.as_ref());
                        out.push_str(&events(named, last));
                        if let Some(end) = &end {
                            if include_usage {
                                out.push_str(&events(named, fmt.usage(end)));
                            }
                            if fmt.done_marker() {
                                out.push_str("data: [DONE]\n\n");
                            }
                        }
                        let _ = tx.send(Bytes::from(out)).await;
                        if left == 0 {
                            return;
                        }
                        continue;
                    }
                    Some(Event::Error(m)) => {
                        let e = ApiError::internal(format!("generation failed: {m}"));
                        let out = fmt.error_events(&e);
                        let _ = tx.send(Bytes::from(out)).await;
                        return;
                    }
                    None => return,
                };
                if tx.send(chunk).await.is_err() {
                    self.nsm.disconnects.fetch_add(1, Relaxed);
                    return;
                }
            }
        });
        event_stream(body)
    }
}

/// Server-sent events of `v`: one per element when it is a list; with `named`, each with
/// `event: TYPE` from its `type` member.
pub fn events(named: bool, v: Value) -> String {
    let one = |v: &Value| match (named, v.get("type").and_then(Value::as_str)) {
        (true, Some(t)) => format!("event: {t}\ndata: {v}\n\n"),
        _ => format!("data: {v}\n\n"),
    };
    match &v {
        Value::Array(items) => items.iter().map(one).collect(),
        v => one(v),
    }
}

/// A 200 `text/event-stream` response over `body`.
pub(crate) fn event_stream(body: memoria_runtime::HttpBody) -> Response {
    let mut resp = hyper::Response::new(body);
    *resp.status_mut() = StatusCode::OK;
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    resp
}

/// How a streamed request ended: its usage and timings (given with its last choice's end).
pub struct End {
    pub usage: Usage,
    pub timings: Timings,
}

/// Formats the chunks of one streaming response; `index` is the choice's.
pub trait SseFormat: Send + 'static {
    /// A chunk sent before any token (chat: the assistant role; completions: the echo).
    fn first(&mut self, index: usize) -> Option<Value>;
    /// A chunk carrying text and the ids and log-probs of the tokens it completes; `None` when
    /// the text shows nothing yet (a tool answer's JSON before a name or argument is
    /// readable): the ids and log-probs then wait for the next chunk.
    fn delta(
        &mut self,
        index: usize,
        text: &str,
        ids: &[u32],
        logprobs: &[TokenLogprobs],
    ) -> Option<Value>;
    /// The chunk that ends choice `index`; `end` is given with the request's last one (llama-server
    /// puts its `timings` there).
    fn finish(&mut self, index: usize, reason: StopReason, end: Option<&End>) -> Value;
    /// The usage chunk (`stream_options.include_usage`).
    fn usage(&self, end: &End) -> Value;
    /// Whether every event carries `event: TYPE` (its `type` member), as Anthropic's stream does.
    fn named_events(&self) -> bool {
        false
    }
    /// The events that end a stream whose generation failed.
    fn error_events(&self, e: &ApiError) -> String {
        format!("data: {}\n\ndata: [DONE]\n\n", e.to_json())
    }
    /// Whether the stream ends with `data: [DONE]` (OpenAI's; llama-server's native stream
    /// does not).
    fn done_marker(&self) -> bool {
        true
    }
}
