//! Requests from callers (tokio tasks, CLI threads) to the engine thread. Every request names its
//! namespace; the engine answers `NotFound` for a session of another namespace, so handles
//! cannot be used across tenants.

use std::time::Duration;

use memoria_kv::{NamespaceId, PinLevel};
use tokio::sync::mpsc;

use super::HandedChain;
pub(crate) use super::reply::Reply;
use crate::EngineError;
use crate::sampling::SamplingParams;
use crate::session::{Event, SessionId, WarmInfo};

/// Parameters of one generation.
#[derive(Clone, Debug)]
pub struct GenerateParams {
    pub sampling: SamplingParams,
    pub max_tokens: usize,
    pub stop: Vec<String>,
    /// Close the session when the generation ends or the client goes away (one-shot requests).
    pub close_when_done: bool,
    /// Keep going past end-of-generation tokens (benchmarks, llama.cpp's `ignore_eos`).
    pub ignore_eos: bool,
    /// Structured output: only tokens this constraint allows are sampled, and the generation
    /// ends when it is complete (`response_format`).
    pub constraint: Option<std::sync::Arc<memoria_constrain::Constraint>>,
    /// Speculative decoding: how the generation drafts (the tokens are the same either way).
    pub speculation: crate::speculation::Speculate,
}

impl GenerateParams {
    /// Greedy decoding of up to `max_tokens` tokens, session kept open.
    pub fn greedy(max_tokens: usize) -> GenerateParams {
        GenerateParams {
            sampling: SamplingParams::greedy(),
            max_tokens,
            stop: Vec::new(),
            close_when_done: false,
            ignore_eos: false,
            constraint: None,
            speculation: crate::speculation::Speculate::AUTO,
        }
    }
}

/// A snapshot of one session.
#[derive(Clone, Debug, PartialEq)]
pub struct SessionInfo {
    /// Tokens in the context (computed + pending).
    pub len: usize,
    /// Of those, tokens not computed yet.
    pub pending: usize,
    /// Whether a generation or warm-up is running.
    pub busy: bool,
    /// Tokens whose K/V the session's first compute took from the shared cache (a fork reports
    /// its source's): what a prefill before forking reused.
    pub cached_tokens: usize,
}

pub(crate) enum Command {
    Open {
        ns: NamespaceId,
        reply: Reply<SessionId>,
    },
    /// Open, then append `tokens`, in one round trip (a failed append closes the session).
    OpenWith {
        ns: NamespaceId,
        tokens: Vec<u32>,
        /// `tokens`' chain, if the caller hashed it (for a remote prefetch).
        chain: Option<HandedChain>,
        reply: Reply<SessionId>,
    },
    /// The chain a caller hashed for the tokens that started `session`'s context (no reply):
    /// the session's first compute takes it instead of hashing them again.
    Chain {
        ns: NamespaceId,
        session: SessionId,
        tokens: Vec<u32>,
        chain: HandedChain,
    },
    Append {
        ns: NamespaceId,
        session: SessionId,
        tokens: Vec<u32>,
        reply: Reply<usize>,
    },
    Generate {
        ns: NamespaceId,
        session: SessionId,
        params: GenerateParams,
        events: mpsc::UnboundedSender<Event>,
    },
    Prefill {
        ns: NamespaceId,
        session: SessionId,
        reply: Reply<Vec<f32>>,
    },
    Score {
        ns: NamespaceId,
        session: SessionId,
        top: usize,
        reply: Reply<Vec<crate::sampling::TokenLogprobs>>,
    },
    ScoreRows {
        ns: NamespaceId,
        session: SessionId,
        from: usize,
        reply: Reply<Vec<f32>>,
    },
    Fork {
        ns: NamespaceId,
        session: SessionId,
        reply: Reply<SessionId>,
    },
    Truncate {
        ns: NamespaceId,
        session: SessionId,
        len: usize,
        reply: Reply<()>,
    },
    Close {
        ns: NamespaceId,
        session: SessionId,
        reply: Reply<()>,
    },
    Info {
        ns: NamespaceId,
        session: SessionId,
        reply: Reply<SessionInfo>,
    },
    Logits {
        ns: NamespaceId,
        session: SessionId,
        reply: Reply<Option<Vec<f32>>>,
    },
    Tokens {
        ns: NamespaceId,
        session: SessionId,
        reply: Reply<Vec<u32>>,
    },
    Warm {
        ns: NamespaceId,
        tokens: Vec<u32>,
        pin: PinLevel,
        ttl: Option<Duration>,
        /// The chain a remote prefetch hashed (see `OpenWith`).
        chain: Option<HandedChain>,
        reply: Reply<WarmInfo>,
    },
    /// A saved hot prefix after a restart: warmed without a pin, then counted as reused
    /// `count` times so hot-prefix warming pins it again.
    Rewarm {
        ns: NamespaceId,
        tokens: Vec<u32>,
        count: f64,
        /// The chain a remote prefetch hashed (see `OpenWith`).
        chain: Option<HandedChain>,
        reply: Reply<WarmInfo>,
    },
    /// The chains hot-prefix warming pins now (at most `max_tokens` tokens each).
    HotPrefixes {
        max_tokens: usize,
        reply: Reply<Vec<memoria_kv::HotChain>>,
    },
    /// The namespace registry was replaced: apply its priorities and block caps.
    Registered,
    /// The public prefixes of `ns`, compiled by the caller (`None`: none).
    SetPublicPrefixes {
        ns: NamespaceId,
        chain: Option<std::sync::Arc<memoria_kv::PublicChain>>,
    },
    /// The embedding of `tokens`, computed in a session of its own whose chunks are batched
    /// into steps with every other session's (its full blocks stay cached under the namespace's salt).
    Embed {
        ns: NamespaceId,
        tokens: Vec<u32>,
        reply: Reply<Vec<f32>>,
    },
    Save {
        ns: NamespaceId,
        session: SessionId,
        name: String,
        reply: Reply<()>,
    },
    /// `record`: the save as the caller fetched it from the remote tier; `None` reads the
    /// disk.
    /// Open a session on a save the caller read (`Ok(None)`: none found; `Err`: the read
    /// failed, reported after the request's own checks).
    Restore {
        ns: NamespaceId,
        name: String,
        record: Result<
            Option<Box<memoria_kv::backing::SavedSession>>,
            memoria_kv::backing::BackingError,
        >,
        /// The chain a remote prefetch of the record's tokens hashed (see `OpenWith`).
        chain: Option<HandedChain>,
        reply: Reply<SessionId>,
    },
    Shutdown,
}

impl Command {
    /// The command's name, as errors and logs name it.
    pub fn name(&self) -> &'static str {
        match self {
            Command::Open { .. } => "open",
            Command::OpenWith { .. } => "open_with",
            Command::Chain { .. } => "chain",
            Command::Append { .. } => "append",
            Command::Generate { .. } => "generate",
            Command::Prefill { .. } => "prefill",
            Command::Score { .. } => "score",
            Command::ScoreRows { .. } => "score_rows",
            Command::Fork { .. } => "fork",
            Command::Truncate { .. } => "truncate",
            Command::Close { .. } => "close",
            Command::Info { .. } => "info",
            Command::Logits { .. } => "logits",
            Command::Tokens { .. } => "tokens",
            Command::Warm { .. } => "warm",
            Command::Rewarm { .. } => "rewarm",
            Command::HotPrefixes { .. } => "hot_prefixes",
            Command::Registered => "registered",
            Command::SetPublicPrefixes { .. } => "set_public_prefixes",
            Command::Embed { .. } => "embed",
            Command::Save { .. } => "save",
            Command::Restore { .. } => "restore",
            Command::Shutdown => "shutdown",
        }
    }

    /// The existing session the command acts on, if any.
    pub fn session(&self) -> Option<SessionId> {
        match self {
            Command::Append { session, .. }
            | Command::Generate { session, .. }
            | Command::Prefill { session, .. }
            | Command::Score { session, .. }
            | Command::ScoreRows { session, .. }
            | Command::Fork { session, .. }
            | Command::Truncate { session, .. }
            | Command::Close { session, .. }
            | Command::Info { session, .. }
            | Command::Logits { session, .. }
            | Command::Tokens { session, .. }
            | Command::Save { session, .. }
            | Command::Chain { session, .. } => Some(*session),
            Command::Open { .. }
            | Command::OpenWith { .. }
            | Command::Warm { .. }
            | Command::Embed { .. }
            | Command::Rewarm { .. }
            | Command::HotPrefixes { .. }
            | Command::Registered
            | Command::SetPublicPrefixes { .. }
            | Command::Restore { .. }
            | Command::Shutdown => None,
        }
    }

    /// A generation's event channel (to report a failure before the job exists).
    pub fn events(&self) -> Option<&mpsc::UnboundedSender<Event>> {
        match self {
            Command::Generate { events, .. } => Some(events),
            _ => None,
        }
    }

    /// Answers the command with `err` without running it.
    pub fn refuse(self, err: EngineError) {
        let _ = match self {
            Command::Open { reply, .. }
            | Command::OpenWith { reply, .. }
            | Command::Fork { reply, .. } => reply.send(Err(err)),
            Command::Restore { reply, .. } => reply.send(Err(err)),
            Command::Append { reply, .. } => reply.send(Err(err)),
            Command::Generate { events, .. } => events.send(Event::Error(err.to_string())).is_ok(),
            Command::Prefill { reply, .. }
            | Command::Embed { reply, .. }
            | Command::ScoreRows { reply, .. } => reply.send(Err(err)),
            Command::Score { reply, .. } => reply.send(Err(err)),
            Command::Truncate { reply, .. }
            | Command::Close { reply, .. }
            | Command::Save { reply, .. } => reply.send(Err(err)),
            Command::Info { reply, .. } => reply.send(Err(err)),
            Command::Logits { reply, .. } => reply.send(Err(err)),
            Command::Tokens { reply, .. } => reply.send(Err(err)),
            Command::Warm { reply, .. } | Command::Rewarm { reply, .. } => reply.send(Err(err)),
            Command::HotPrefixes { reply, .. } => reply.send(Err(err)),
            Command::Registered
            | Command::SetPublicPrefixes { .. }
            | Command::Chain { .. }
            | Command::Shutdown => false,
        };
    }
}
