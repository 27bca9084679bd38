//! Running one generation for an OpenAI request: open a one-shot session in the caller's
//! namespace, append the prompt, generate, then either collect the text or stream it as SSE.
//! Invariants: the session is closed on every path (the engine closes one-shot sessions when the
//! generation ends or its stream is dropped; a request dropped before generating closes it
//! itself); a streaming response holds its admission slot until the last byte is queued; a client
//! that goes away drops the engine stream, which cancels the generation and frees its blocks.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use bytes::Bytes;
use http::{HeaderValue, StatusCode, header};
use memoria_kv::NamespaceId;
use memoria_sched::generate::StopReason;
use memoria_sched::{EngineHandle, Event, GenerateParams, GenerationStream, SessionId, Usage};
use serde_json::Value;

use super::Ctx;
use crate::admission::Permit;
use crate::body::{ChannelBody, Response};
use crate::error::ApiError;
use crate::metrics::NsMetrics;
use crate::sessions::{SessionEntry, SessionGuard};

/// A generation that has started.
pub struct Running {
    stream: GenerationStream,
    _registered: SessionGuard,
    nsm: Arc<NsMetrics>,
    started: Instant,
    prompt_tokens: usize,
}

/// How a finished generation ended.
pub struct Finished {
    pub text: String,
    pub reason: StopReason,
    pub usage: Usage,
}

/// Closes a session unless disarmed (for requests dropped between open and generate).
struct CloseOnDrop {
    engine: EngineHandle,
    ns: NamespaceId,
    id: SessionId,
    armed: bool,
}

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        if self.armed
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            let (engine, ns, id) = (self.engine.clone(), self.ns, self.id);
            rt.spawn(async move {
                let _ = engine.close(ns, id).await;
            });
        }
    }
}

/// Opens a session with `prompt` and starts generating.
pub async fn start(
    ctx: &Ctx,
    route: &'static str,
    prompt: Vec<u32>,
    params: GenerateParams,
    stream: bool,
) -> Result<Running, ApiError> {
    let engine = &ctx.state.engine;
    let ns = &ctx.ns;
    let id = engine.open(ns.id, ns.salt).await?;
    let mut closer = CloseOnDrop {
        engine: engine.clone(),
        ns: ns.id,
        id,
        armed: true,
    };
    let prompt_tokens = prompt.len();
    engine.append(ns.id, id, prompt).await?;
    let gen_stream = engine.generate(ns.id, id, params)?;
    closer.armed = false;
    let registered = ctx.state.sessions.register(
        id,
        SessionEntry::new(&ns.name, ns.id, route, prompt_tokens, stream),
    );
    Ok(Running {
        stream: gen_stream,
        _registered: registered,
        nsm: ctx.nsm.clone(),
        started: ctx.started,
        prompt_tokens,
    })
}

impl Running {
    /// The next event, recording latency figures.
    async fn next(&mut self, last: &mut Option<Instant>) -> Option<Event> {
        let ev = self.stream.next().await;
        if let Some(Event::Token { .. }) = &ev {
            let now = Instant::now();
            match last {
                None => self.nsm.ttft.observe((now - self.started).as_secs_f64()),
                Some(t) => self.nsm.token_latency.observe((now - *t).as_secs_f64()),
            }
            *last = Some(now);
        }
        ev
    }

    fn usage(&self, engine_usage: Usage) -> Usage {
        let u = Usage {
            prompt_tokens: self.prompt_tokens,
            cached_tokens: engine_usage.cached_tokens,
            completion_tokens: engine_usage.completion_tokens,
        };
        self.nsm.add_usage(&u);
        u
    }

    /// Waits for the whole text.
    pub async fn collect(mut self) -> Result<Finished, ApiError> {
        let mut text = String::new();
        let mut last = None;
        loop {
            match self.next(&mut last).await {
                Some(Event::Token { text: t, .. }) => text.push_str(&t),
                Some(Event::Done {
                    reason,
                    text_tail,
                    usage,
                    ..
                }) => {
                    text.push_str(&text_tail);
                    let usage = self.usage(usage);
                    return Ok(Finished {
                        text,
                        reason,
                        usage,
                    });
                }
                Some(Event::Error(m)) => {
                    return Err(ApiError::internal(format!("generation failed: {m}")));
                }
                None => return Err(ApiError::unavailable("the engine stopped")),
            }
        }
    }

    /// Streams the generation as server-sent events formatted by `fmt`, ending with
    /// `data: [DONE]`. The admission `permit` is released when the stream ends.
    pub fn sse(mut self, fmt: Box<dyn SseFormat>, include_usage: bool, permit: Permit) -> Response {
        let (tx, body) = ChannelBody::channel(64);
        tokio::spawn(async move {
            let _permit = permit;
            let send = |v: Value| Bytes::from(format!("data: {v}\n\n"));
            if let Some(first) = fmt.first()
                && tx.send(send(first)).await.is_err()
            {
                self.nsm.disconnects.fetch_add(1, Relaxed);
                return;
            }
            let mut last = None;
            loop {
                let ev = tokio::select! {
                    ev = self.next(&mut last) => ev,
                    () = tx.closed() => {
                        self.nsm.disconnects.fetch_add(1, Relaxed);
                        return;
                    }
                };
                let chunk = match ev {
                    Some(Event::Token { text, .. }) if text.is_empty() => continue,
                    Some(Event::Token { text, .. }) => send(fmt.delta(&text)),
                    Some(Event::Done {
                        reason,
                        text_tail,
                        usage,
                        ..
                    }) => {
                        let usage = self.usage(usage);
                        let mut out = String::new();
                        if !text_tail.is_empty() {
                            out.push_str(&format!("data: {}\n\n", fmt.delta(&text_tail)));
                        }
                        out.push_str(&format!("data: {}\n\n", fmt.finish(reason.as_str())));
                        if include_usage {
                            out.push_str(&format!("data: {}\n\n", fmt.usage(&usage)));
                        }
                        out.push_str("data: [DONE]\n\n");
                        let _ = tx.send(Bytes::from(out)).await;
                        return;
                    }
                    Some(Event::Error(m)) => {
                        let e = ApiError::internal(format!("generation failed: {m}"));
                        let out = format!("data: {}\n\ndata: [DONE]\n\n", e.to_json());
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
}

/// Formats the chunks of one streaming response.
pub trait SseFormat: Send + 'static {
    /// A chunk sent before any token (chat: the assistant role).
    fn first(&self) -> Option<Value>;
    /// A chunk carrying text.
    fn delta(&self, text: &str) -> Value;
    /// The chunk with `finish_reason`.
    fn finish(&self, reason: &str) -> Value;
    /// The usage chunk (`stream_options.include_usage`).
    fn usage(&self, usage: &Usage) -> Value;
}
