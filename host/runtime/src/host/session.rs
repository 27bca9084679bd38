//! `memoria:llm/session`: guest sessions as [`SessionRes`] entries of the store's resource
//! table. Each holds a namespace session slot and the engine session id; the id never leaves
//! the host, and every engine call names the store's namespace, so a guest can only reach its
//! own namespace's sessions.
//!
//! Invariant: an engine session is closed exactly once, when its handle is dropped by the guest
//! or, failing that, when the store (the request) ends.

use memoria_sched::StopReason;
use memoria_sched::sampling::SamplingParams;
use memoria_sched::{Event, GenerateParams as EngineParams, OwnedSession, SessionId};
use wasmtime::component::Resource;

use crate::TenantState;
use crate::bindings::memoria::llm::session::{
    FinishReason, GenerateParams, Generation, Host, HostSession,
};
use crate::bindings::{WitError, WitUsage};
use crate::errors::{from_engine, from_named};
use crate::host::pad::GenerationPad;
use crate::host::stream::StreamRes;
use crate::named::check_name;
use crate::namespaces::SessionSlot;

/// Most stop strings per generation.
const MAX_STOPS: usize = 16;

/// A guest's session handle: the engine session (closed when the handle goes) and its slot.
#[derive(Debug)]
pub struct SessionRes {
    pub(crate) id: SessionId,
    session: OwnedSession,
    /// Tokens appended since the last generation (what it will compute, hit or miss).
    pending: usize,
    _slot: SessionSlot,
}

impl SessionRes {
    fn new(session: OwnedSession, pending: usize, slot: SessionSlot) -> SessionRes {
        SessionRes {
            id: session.id(),
            session,
            pending,
            _slot: slot,
        }
    }

    /// Closes the engine session now.
    async fn close(self) {
        self.session.close().await;
    }
}

pub(crate) fn usage(u: memoria_sched::Usage) -> WitUsage {
    WitUsage {
        prompt_tokens: u.prompt_tokens as u32,
        cached_tokens: u.cached_tokens as u32,
        completion_tokens: u.completion_tokens as u32,
    }
}

pub(crate) fn finish(r: StopReason) -> FinishReason {
    match r {
        StopReason::Eog => FinishReason::Eog,
        StopReason::Length => FinishReason::Length,
        StopReason::StopString => FinishReason::StopString,
        StopReason::ContextFull => FinishReason::ContextFull,
    }
}

type R<T> = wasmtime::Result<Result<T, WitError>>;

impl TenantState {
    /// Opens an engine session of this namespace and wraps it as a guest resource.
    async fn open_session(
        &mut self,
        tokens: Option<Vec<u32>>,
    ) -> Result<Resource<SessionRes>, WitError> {
        let limit = self.ns.ns.spec.limits.max_sessions;
        let slot = self.ns.session_slot().ok_or_else(|| {
            WitError::QuotaExceeded(format!(
                "this namespace already has {limit} open sessions (max_sessions)"
            ))
        })?;
        let (ns, engine) = (self.ns.ns.clone(), self.ns.host.engine.clone());
        let pending = tokens.as_ref().map_or(0, Vec::len);
        // Open with the tokens in one round trip (a refused append leaves nothing open).
        let session = OwnedSession::open(&engine, ns.id, tokens.unwrap_or_default())
            .await
            .map_err(from_engine)?;
        self.table
            .push(SessionRes::new(session, pending, slot))
            .map_err(|e| WitError::Unavailable(format!("{e:#}")))
    }

    /// Restores `name` through the engine's durable store (same namespace only).
    async fn restore_durable(&mut self, name: &str) -> Result<Resource<SessionRes>, WitError> {
        check_name(name).map_err(from_named)?;
        let limit = self.ns.ns.spec.limits.max_sessions;
        let slot = self.ns.session_slot().ok_or_else(|| {
            WitError::QuotaExceeded(format!(
                "this namespace already has {limit} open sessions (max_sessions)"
            ))
        })?;
        let (ns, engine) = (self.ns.ns.clone(), self.ns.host.engine.clone());
        let id = engine.restore(ns.id, name).await.map_err(from_engine)?;
        // A restored context is the namespace's own save: nothing to pad for.
        let res = SessionRes::new(OwnedSession::adopt(&engine, ns.id, id), 0, slot);
        self.table
            .push(res)
            .map_err(|e| WitError::Unavailable(format!("{e:#}")))
    }

    pub(crate) fn session_id(&self, s: &Resource<SessionRes>) -> wasmtime::Result<SessionId> {
        Ok(self.table.get(s)?.id)
    }

    /// Engine parameters from guest parameters, within this request's token budget.
    pub(crate) fn engine_params(&self, p: GenerateParams) -> Result<EngineParams, WitError> {
        if self.tokens_left == 0 {
            let max = self.ns.ns.spec.limits.max_tokens_per_request;
            return Err(WitError::QuotaExceeded(format!(
                "this request already generated {max} tokens (max_tokens_per_request)"
            )));
        }
        if p.stop.len() > MAX_STOPS {
            return Err(WitError::InvalidArgument(format!(
                "at most {MAX_STOPS} stop strings"
            )));
        }
        let stop_bytes: usize = p.stop.iter().map(String::len).sum();
        if stop_bytes > self.max_call_bytes() {
            return Err(WitError::InvalidArgument(format!(
                "stop strings of {stop_bytes} bytes exceed max_host_call_bytes = {}",
                self.max_call_bytes()
            )));
        }
        let sampling = match p.sampling {
            None => SamplingParams::greedy(),
            Some(s) => SamplingParams {
                temperature: s.temperature,
                top_k: s.top_k as usize,
                top_p: s.top_p,
                min_p: s.min_p,
                repeat_penalty: s.repeat_penalty,
                seed: s.seed,
                ..SamplingParams::default()
            },
        };
        sampling
            .validate()
            .map_err(|e| WitError::InvalidArgument(e.to_string()))?;
        let mut params = EngineParams::greedy((p.max_tokens as usize).min(self.tokens_left));
        params.sampling = sampling;
        params.stop = p.stop;
        let policy = self.ns.ns.spec.draft_policy();
        params.speculation = memoria_sched::Speculate {
            max_draft: policy.max_draft,
            group: policy.group,
        };
        Ok(params)
    }

    async fn append_tokens_to(&mut self, s: Resource<SessionRes>, tokens: Vec<u32>) -> R<u32> {
        if let Err(e) = self.check_tokens(&tokens) {
            return Ok(Err(e));
        }
        let id = self.session_id(&s)?;
        let n = tokens.len();
        let r = self.ns.host.engine.append(self.ns.ns.id, id, tokens).await;
        if r.is_ok() {
            let res = self.table.get_mut(&s)?;
            res.pending = res.pending.saturating_add(n);
        }
        Ok(r.map(|n| n as u32).map_err(from_engine))
    }
}

impl TenantState {
    /// The padding of a generation on `s` now (which takes its pending tokens).
    fn generation_pad(&mut self, s: &Resource<SessionRes>) -> wasmtime::Result<GenerationPad> {
        let pads = self.ns.ns.spec.pads_hits();
        let res = self.table.get_mut(s)?;
        let prompt = std::mem::take(&mut res.pending);
        Ok(GenerationPad::start(
            self.ns.host.hit_pad.clone(),
            pads,
            prompt,
        ))
    }
}

impl Host for TenantState {}

impl HostSession for TenantState {
    async fn open(&mut self) -> R<Resource<SessionRes>> {
        Ok(self.open_session(None).await)
    }

    async fn restore(&mut self, name: String) -> R<Resource<SessionRes>> {
        if self.ns.host.durable {
            return Ok(self.restore_durable(&name).await);
        }
        let tokens = match self.ns.host.named.get(self.ns.ns.id, &name) {
            Ok(t) => t,
            Err(e) => return Ok(Err(from_named(e))),
        };
        Ok(self.open_session(Some(tokens.as_ref().clone())).await)
    }

    async fn append_text(&mut self, s: Resource<SessionRes>, text: String) -> R<u32> {
        let id = self.session_id(&s)?;
        let empty = match self.ns.host.engine.info(self.ns.ns.id, id).await {
            Ok(info) => info.len == 0,
            Err(e) => return Ok(Err(from_engine(e))),
        };
        let tokens = self.ns.host.engine.tokenizer().encode(&text, empty, false);
        self.append_tokens_to(s, tokens).await
    }

    async fn append_tokens(&mut self, s: Resource<SessionRes>, tokens: Vec<u32>) -> R<u32> {
        self.append_tokens_to(s, tokens).await
    }

    async fn generate(&mut self, s: Resource<SessionRes>, params: GenerateParams) -> R<Generation> {
        let id = self.session_id(&s)?;
        let params = match self.engine_params(params) {
            Ok(p) => p,
            Err(e) => return Ok(Err(e)),
        };
        let mut pad = self.generation_pad(&s)?;
        let mut stream = match self.ns.host.engine.generate(self.ns.ns.id, id, params) {
            Ok(st) => st,
            Err(e) => return Ok(Err(from_engine(e))),
        };
        let (mut text, mut tokens) = (String::new(), Vec::new());
        // The first output's padding, served after the end (see `pad`).
        let mut hold = std::time::Duration::ZERO;
        while let Some(ev) = stream.next().await {
            if matches!(ev, Event::Token { .. } | Event::Done { .. }) {
                hold += pad.first_output();
            }
            match ev {
                Event::Token {
                    id, text: piece, ..
                } => {
                    tokens.push(id);
                    text.push_str(&piece);
                    self.tokens_left = self.tokens_left.saturating_sub(1);
                }
                Event::Done {
                    reason,
                    text_tail,
                    usage: u,
                    ..
                } => {
                    text.push_str(&text_tail);
                    let u = pad.finish(u);
                    if !hold.is_zero() {
                        tokio::time::sleep(hold).await;
                    }
                    return Ok(Ok(Generation {
                        text,
                        tokens,
                        usage: usage(u),
                        finish: finish(reason),
                    }));
                }
                Event::Error(msg) => return Ok(Err(WitError::Unavailable(msg))),
            }
        }
        Ok(Err(WitError::Unavailable(
            "the engine ended the generation without a result".into(),
        )))
    }

    async fn stream(
        &mut self,
        s: Resource<SessionRes>,
        params: GenerateParams,
    ) -> R<Resource<StreamRes>> {
        let id = self.session_id(&s)?;
        let params = match self.engine_params(params) {
            Ok(p) => p,
            Err(e) => return Ok(Err(e)),
        };
        let pad = self.generation_pad(&s)?;
        let stream = match self.ns.host.engine.generate(self.ns.ns.id, id, params) {
            Ok(st) => st,
            Err(e) => return Ok(Err(from_engine(e))),
        };
        Ok(Ok(self.table.push(StreamRes::new(stream, pad))?))
    }

    async fn fork(&mut self, s: Resource<SessionRes>) -> R<Resource<SessionRes>> {
        let id = self.session_id(&s)?;
        let limit = self.ns.ns.spec.limits.max_sessions;
        let Some(slot) = self.ns.session_slot() else {
            return Ok(Err(WitError::QuotaExceeded(format!(
                "this namespace already has {limit} open sessions (max_sessions)"
            ))));
        };
        let (ns, engine) = (self.ns.ns.id, self.ns.host.engine.clone());
        let child = match engine.fork(ns, id).await {
            Ok(c) => c,
            Err(e) => return Ok(Err(from_engine(e))),
        };
        // A fork shares its parent's computed context; only what it appends is its own.
        let res = SessionRes::new(OwnedSession::adopt(&engine, ns, child), 0, slot);
        Ok(Ok(self.table.push(res)?))
    }

    async fn truncate(&mut self, s: Resource<SessionRes>, len: u32) -> R<()> {
        let id = self.session_id(&s)?;
        let r = self
            .ns
            .host
            .engine
            .truncate(self.ns.ns.id, id, len as usize)
            .await;
        Ok(r.map_err(from_engine))
    }

    async fn len(&mut self, s: Resource<SessionRes>) -> R<u32> {
        let id = self.session_id(&s)?;
        let r = self.ns.host.engine.info(self.ns.ns.id, id).await;
        Ok(r.map(|i| i.len as u32).map_err(from_engine))
    }

    async fn tokens(&mut self, s: Resource<SessionRes>) -> R<Vec<u32>> {
        let id = self.session_id(&s)?;
        let r = self.ns.host.engine.tokens(self.ns.ns.id, id).await;
        Ok(r.map_err(from_engine))
    }

    async fn save(&mut self, s: Resource<SessionRes>, name: String) -> R<()> {
        let id = self.session_id(&s)?;
        if let Err(e) = check_name(&name) {
            return Ok(Err(from_named(e)));
        }
        let (ns, engine) = (self.ns.ns.id, self.ns.host.engine.clone());
        if self.ns.host.durable {
            return Ok(engine.save(ns, id, &name).await.map_err(from_engine));
        }
        let tokens = match engine.tokens(ns, id).await {
            Ok(t) => t,
            Err(e) => return Ok(Err(from_engine(e))),
        };
        let cap = self.ns.ns.spec.limits.max_sessions;
        Ok(self
            .ns
            .host
            .named
            .save(ns, &name, tokens, cap)
            .map_err(from_named))
    }

    async fn drop(&mut self, s: Resource<SessionRes>) -> wasmtime::Result<()> {
        let res = self.table.delete(s)?;
        res.close().await;
        Ok(())
    }
}
