//! Running the generations of an OpenAI request: for each prompt, open a one-shot session and
//! append the prompt; with one choice, generate; with `n` > 1, compute the prompt once, fork the
//! session `n - 1` times (the forks share its K/V blocks, nothing is copied or recomputed) and
//! generate on every session, choice `j` seeded with `seed + j`. Choices are numbered
//! prompt-major (`prompt * n + j`), as OpenAI numbers them. Events of every choice are merged in
//! arrival order, then collected or streamed as SSE.
//! Invariants: every session is closed on every path (the engine closes one-shot sessions when
//! the generation ends or its stream is dropped; a request dropped before generating closes them
//! itself); a streaming response holds its admission slot until the last byte is queued; a client
//! that goes away drops the merged stream, whose forwarders then drop the engine streams, which
//! cancels the generations and frees their blocks.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use bytes::Bytes;
use http::{HeaderValue, StatusCode, header};
use memoria_sched::StopReason;
use memoria_sched::sampling::TokenLogprobs;
use memoria_sched::{Event, GenerateParams, GenerationStream, OwnedSession, Speculate, Usage};
use serde_json::Value;
use tokio::sync::mpsc;

use super::Ctx;
use crate::admission::Permit;
use crate::body::{ChannelBody, Response};
use crate::error::ApiError;
use crate::metrics::NsMetrics;

mod sse;
use crate::sessions::{SessionEntry, SessionGuard};
pub(crate) use sse::event_stream;
pub use sse::{End, SseFormat, events};

/// What one request generates.
pub struct Plan {
    /// Token ids of each prompt (each < the vocabulary, non-empty) and its completion budget.
    pub prompts: Vec<(Vec<u32>, usize)>,
    /// Choices per prompt (≥ 1).
    pub n: usize,
    /// Parameters of choice 0 (but the prompt's `max_tokens`); choice `j` gets `seed + j`.
    pub params: GenerateParams,
    /// Prompt log-probs with this many alternatives (`echo` with `logprobs`): each prompt is
    /// computed whole, nothing taken from the cache.
    pub score: Option<usize>,
    /// The request's `speculation` field.
    pub speculation: Option<super::params::SpeculationField>,
}

/// One merged event: the choice it belongs to and the event (None: the engine stopped sending).
type Tagged = (usize, Option<Event>);

/// Generations that have started.
pub struct Running {
    /// Each prompt's log-probs (token 2 onwards) when the plan asked for them.
    pub prompt_logprobs: Vec<Vec<TokenLogprobs>>,
    rx: mpsc::UnboundedReceiver<Tagged>,
    _registered: Vec<SessionGuard>,
    nsm: Arc<NsMetrics>,
    started: Instant,
    choices: usize,
    prompt_tokens: usize,
    /// Cached tokens of prompts computed before forking (their choices' usage reports none).
    cached_before_fork: usize,
    /// Whether a choice's own usage counts its prompt's cached tokens (its prompt was not forked).
    own_prompt: Vec<bool>,
    last: Vec<Option<Instant>>,
    seen_first: bool,
    /// The shared state (its hit-timing estimate) and whether this namespace pads first tokens.
    state: Arc<crate::state::AppState>,
    /// The route and namespace, for the generation's log line.
    route: &'static str,
    ns_name: String,
    pads: bool,
    /// When the first output was ready (before any padding).
    first_ready: Option<Instant>,
    /// The engine's own time to the first token of the first choice that finished (events may
    /// reach this task in a burst, so their arrival times understate generation).
    engine_ttft: Option<std::time::Duration>,
}

/// What a request's generation took, in llama-server's `timings` shape.
#[derive(Clone, Copy, Debug, Default)]
pub struct Timings {
    /// Prompt tokens whose K/V came from the cache.
    pub cached: usize,
    /// Prompt tokens computed.
    pub prompt_n: usize,
    /// From the request's arrival to its first output.
    pub prompt: std::time::Duration,
    /// Tokens generated.
    pub predicted_n: usize,
    /// From the first output to the last.
    pub predicted: std::time::Duration,
    /// Draft tokens verified and accepted (speculative decoding).
    pub draft: (usize, usize),
}

impl Timings {
    /// llama-server's `timings` object.
    pub fn to_json(self) -> Value {
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        let per_token = |d, n: usize| if n > 0 { ms(d) / n as f64 } else { 0.0 };
        let decode_steps = self.predicted_n.saturating_sub(1);
        let mut t = serde_json::json!({
            "cache_n": self.cached,
            "prompt_n": self.prompt_n,
            "prompt_ms": ms(self.prompt),
            "prompt_per_token_ms": per_token(self.prompt, self.prompt_n),
            "prompt_per_second": crate::access_log::per_second(self.prompt_n, self.prompt),
            "predicted_n": self.predicted_n,
            "predicted_ms": ms(self.predicted),
            // The first token comes with the prompt's last pass: the generation's time covers
            // the other `predicted_n - 1` (llama-server's rates are over those too).
            "predicted_per_token_ms": per_token(self.predicted, decode_steps),
            "predicted_per_second": crate::access_log::per_second(decode_steps, self.predicted),
        });
        // As llama-server, only when the generation drafted.
        if self.draft.0 > 0 {
            t["draft_n"] = self.draft.0.into();
            t["draft_n_accepted"] = self.draft.1.into();
        }
        t
    }
}

/// How one choice ended.
pub struct Finished {
    pub text: String,
    /// The generated token ids.
    pub tokens: Vec<u32>,
    pub reason: StopReason,
    /// Per generated token, when the sampling params asked for log-probs.
    pub logprobs: Vec<TokenLogprobs>,
    /// Sum of the sampled tokens' log-probs (0 without log-probs).
    pub cumulative_logprob: f64,
}

/// Forwards one choice's events into the merged channel until its generation ends or the
/// merged stream is dropped (then dropping `stream` cancels the generation).
fn forward(index: usize, mut stream: GenerationStream, tx: mpsc::UnboundedSender<Tagged>) {
    tokio::spawn(async move {
        loop {
            let ev = tokio::select! {
                ev = stream.next() => ev,
                () = tx.closed() => return,
            };
            let last = !matches!(ev, Some(Event::Token { .. }));
            if tx.send((index, ev)).is_err() || last {
                return;
            }
        }
    });
}

/// Opens the sessions of `plan` and starts generating.
pub async fn start(
    ctx: &Ctx,
    route: &'static str,
    plan: Plan,
    stream: bool,
) -> Result<Running, ApiError> {
    let engine = &ctx.state.engine;
    let ns = &ctx.ns;
    let n = plan.n.max(1);
    let (tx, rx) = mpsc::unbounded_channel();
    let mut registered = Vec::new();
    let mut prompt_tokens = 0;
    let mut cached_before_fork = 0;
    let mut own_prompt = Vec::new();
    let base_seed = plan.params.sampling.seed;
    let policy = ctx.ns.spec.draft_policy();
    let speculation = match plan.speculation {
        Some(super::params::SpeculationField::Off) => Speculate::OFF,
        _ => Speculate {
            max_draft: policy.max_draft,
            group: policy.group,
        },
    };
    let mut prompt_logprobs = Vec::new();
    for (i, (prompt, max_tokens)) in plan.prompts.into_iter().enumerate() {
        let len = prompt.len();
        prompt_tokens += len;
        // Open with the prompt in one round trip; every session closes if this request is
        // dropped before its generation owns it. The first prompt's tokens and chain go to the
        // host's prompt observer, where one watches.
        let first = match ctx.served.as_ref().filter(|_| i == 0) {
            Some(slot) => {
                let tokens = Arc::<[u32]>::from(prompt.as_slice());
                let first = OwnedSession::open_keeping_chain(engine, ns.id, prompt).await?;
                if let Some(chain) = first.pool_chain() {
                    slot.offer(crate::observe::ServedPrompt {
                        tokens,
                        pool_chain: chain.clone(),
                    });
                }
                first
            }
            None => OwnedSession::open(engine, ns.id, prompt).await?,
        };
        if let Some(k) = plan.score {
            prompt_logprobs.push(engine.score(ns.id, first.id(), k).await?);
        }
        let mut sessions = Vec::with_capacity(n);
        if n > 1 {
            if plan.score.is_none() {
                engine.prefill(ns.id, first.id()).await?;
            }
            cached_before_fork += engine.info(ns.id, first.id()).await?.cached_tokens;
            let mut forks = Vec::with_capacity(n - 1);
            for _ in 1..n {
                let id = engine.fork(ns.id, first.id()).await?;
                forks.push(OwnedSession::adopt(engine, ns.id, id));
            }
            sessions.push(first);
            sessions.extend(forks);
        } else {
            sessions.push(first);
        }
        for (j, s) in sessions.into_iter().enumerate() {
            let mut params = plan.params.clone();
            params.max_tokens = max_tokens;
            params.sampling.seed = base_seed.wrapping_add(j as u64);
            params.speculation = speculation;
            let gen_stream = engine.generate(ns.id, s.id(), params)?;
            let id = s.hand_over();
            registered.push(
                ctx.state
                    .sessions
                    .register(id, SessionEntry::new(&ns.name, ns.id, route, len, stream)),
            );
            forward(own_prompt.len(), gen_stream, tx.clone());
            own_prompt.push(n == 1);
        }
    }
    let choices = own_prompt.len();
    Ok(Running {
        prompt_logprobs,
        rx,
        _registered: registered,
        nsm: ctx.nsm.clone(),
        started: ctx.started,
        choices,
        prompt_tokens,
        cached_before_fork,
        own_prompt,
        last: vec![None; choices],
        seen_first: false,
        state: ctx.state.clone(),
        route,
        ns_name: ctx.ns.name.clone(),
        pads: ctx.ns.spec.pads_hits(),
        first_ready: None,
        engine_ttft: None,
    })
}

/// The request's usage so far: prompts counted once, completions summed over choices.
#[derive(Default)]
struct Totals {
    cached: usize,
    completion: usize,
    drafted: usize,
    draft_accepted: usize,
}

impl Running {
    /// The next event of any choice, recording latency figures. In a padded namespace the
    /// first output waits here for its release time (see [`memoria_tenant::HitPad`]).
    async fn next(&mut self) -> Option<Tagged> {
        let (i, ev) = self.rx.recv().await?;
        if self.first_ready.is_none()
            && matches!(ev, Some(Event::Token { .. } | Event::Done { .. }))
        {
            let ready = Instant::now();
            self.first_ready = Some(ready);
            if self.pads {
                let at = self
                    .state
                    .hit_pad
                    .release_at(self.started, self.prompt_tokens, ready);
                tokio::time::sleep_until(at.into()).await;
            }
        }
        if let Some(Event::Done { ttft_ms, .. }) = &ev
            && self.engine_ttft.is_none()
            && ttft_ms.is_finite()
            && *ttft_ms >= 0.0
        {
            self.engine_ttft = Some(std::time::Duration::from_secs_f64(ttft_ms / 1e3));
        }
        if let Some(Event::Token { .. }) = &ev {
            let now = Instant::now();
            if !self.seen_first {
                self.seen_first = true;
                self.nsm.ttft.observe((now - self.started).as_secs_f64());
            } else if let Some(t) = self.last.get(i).copied().flatten() {
                self.nsm.token_latency.observe((now - t).as_secs_f64());
            }
            if let Some(l) = self.last.get_mut(i) {
                *l = Some(now);
            }
        }
        Some((i, ev))
    }

    fn add(&self, totals: &mut Totals, choice: usize, u: &Usage) {
        if self.own_prompt.get(choice).copied().unwrap_or(false) {
            totals.cached += u.cached_tokens;
        }
        totals.completion += u.completion_tokens;
        totals.drafted += u.drafted;
        totals.draft_accepted += u.draft_accepted;
    }

    /// The usage a response reports, after counting the real one. A padded namespace reports
    /// no cached tokens: the count would tell a client what the padding hides (its hits still
    /// show in `/stats` and `/metrics`, which only the operator reads).
    fn usage(&self, totals: &Totals) -> Usage {
        let mut u = Usage {
            prompt_tokens: self.prompt_tokens,
            cached_tokens: (totals.cached + self.cached_before_fork).min(self.prompt_tokens),
            completion_tokens: totals.completion,
            drafted: totals.drafted,
            draft_accepted: totals.draft_accepted,
        };
        self.nsm.add_usage(&u);
        if let Some(ready) = self.first_ready {
            self.state.hit_pad.observe(
                u.prompt_tokens,
                u.prompt_tokens - u.cached_tokens,
                ready.saturating_duration_since(self.started),
            );
        }
        if self.pads {
            u.cached_tokens = 0;
        }
        u
    }

    /// Waits for every choice; they come back in index order, with the request's usage and
    /// timings.
    pub async fn collect(mut self) -> Result<(Vec<Finished>, Usage, Timings), ApiError> {
        let mut out: Vec<Finished> = (0..self.choices)
            .map(|_| Finished {
                text: String::new(),
                tokens: Vec::new(),
                reason: StopReason::Length,
                logprobs: Vec::new(),
                cumulative_logprob: 0.0,
            })
            .collect();
        let mut totals = Totals::default();
        let mut left = self.choices;
        while left > 0 {
            let Some((i, ev)) = self.next().await else {
                return Err(ApiError::unavailable("the engine stopped"));
            };
            let Some(f) = out.get_mut(i) else { continue };
            match ev {
                Some(Event::Token {
                    id, text, logprobs, ..
                }) => {
                    f.text.push_str(&text);
                    f.tokens.push(id);
                    if let Some(lp) = logprobs {
                        f.cumulative_logprob += f64::from(lp.sampled.logprob);
                        f.logprobs.push(lp);
                    }
                }
                Some(Event::Done {
                    reason,
                    text_tail,
                    usage,
                    ..
                }) => {
                    f.text.push_str(&text_tail);
                    f.reason = reason;
                    self.add(&mut totals, i, &usage);
                    left -= 1;
                }
                Some(Event::Error(m)) => {
                    return Err(ApiError::internal(format!("generation failed: {m}")));
                }
                None => return Err(ApiError::unavailable("the engine stopped")),
            }
        }
        let usage = self.usage(&totals);
        let timings = self.timings(&usage);
        Ok((out, usage, timings))
    }

    /// The request's timings, now that its last choice finished (logged at `info`).
    fn timings(&self, usage: &Usage) -> Timings {
        let total = self.started.elapsed();
        let first = self
            .first_ready
            .map_or(total, |f| f.saturating_duration_since(self.started));
        // The prompt's time is the engine's time to its first token, when known (events may
        // arrive here in a burst); generation is the rest of the request's time.
        let prompt = self.engine_ttft.map_or(first, |t| t.min(total));
        let t = Timings {
            cached: usage.cached_tokens,
            prompt_n: usage.prompt_tokens.saturating_sub(usage.cached_tokens),
            prompt,
            predicted_n: usage.completion_tokens,
            predicted: total.saturating_sub(prompt),
            draft: (usage.drafted, usage.draft_accepted),
        };
        self.state.metrics.llama.add(
            (t.prompt_n, t.cached, t.prompt),
            (t.predicted_n, t.predicted),
        );
        crate::access_log::generation(
            &self.state,
            &crate::access_log::GenerationTimes {
                route: self.route,
                namespace: self.ns_name.clone(),
                prompt_tokens: usage.prompt_tokens,
                cached_tokens: usage.cached_tokens,
                completion_tokens: usage.completion_tokens,
                prompt: t.prompt,
                generation: t.predicted,
            },
        );
        t
    }
}
