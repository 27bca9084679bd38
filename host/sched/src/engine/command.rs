//! Requests from callers (tokio tasks, CLI threads) to the engine thread. Every request names its
//! namespace; the engine answers `NotFound` for a session of another namespace, so handles
//! cannot be used across tenants.

use std::time::Duration;

use memoria_kv::{NamespaceId, NamespaceSalt, PinLevel};
use tokio::sync::{mpsc, oneshot};

use crate::EngineError;
use crate::sampling::SamplingParams;
use crate::session::{Event, SessionId, WarmInfo};

pub(crate) type Reply<T> = oneshot::Sender<Result<T, EngineError>>;

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
}

pub(crate) enum Command {
    Open {
        ns: NamespaceId,
        salt: NamespaceSalt,
        reply: Reply<SessionId>,
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
        salt: NamespaceSalt,
        tokens: Vec<u32>,
        pin: PinLevel,
        ttl: Option<Duration>,
        reply: Reply<WarmInfo>,
    },
    SetNamespacePolicy {
        ns: NamespaceId,
        priority: i32,
        max_blocks: Option<usize>,
    },
    Save {
        ns: NamespaceId,
        session: SessionId,
        name: String,
        reply: Reply<()>,
    },
    Restore {
        ns: NamespaceId,
        salt: NamespaceSalt,
        name: String,
        reply: Reply<SessionId>,
    },
    Shutdown,
}
