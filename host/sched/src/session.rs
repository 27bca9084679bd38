//! Engine-side session state: the pool sequence holding its computed K/V, tokens appended but not
//! yet computed (prefill is lazy), the logits of its last computed token, and the job it runs
//! (a generation streaming to a client, a warm-up that pins its prefix, a prefill, an embedding).

use std::time::{Duration, Instant};

use memoria_kv::{BlockHash, NamespaceId, PinLevel, SeqId};
use memoria_model::tokenizer::Utf8Buf;
use tokio::sync::mpsc;

use crate::sampling::Sampler;
use crate::stop::StopMatcher;

/// A session handle: unique for the engine's lifetime, valid only with its namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionId(pub u64);

/// Token counts of one generation, OpenAI-style.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Tokens that had to be in the context before generating (appended since the last job).
    pub prompt_tokens: usize,
    /// Of those, tokens whose K/V came from the shared cache instead of being computed.
    pub cached_tokens: usize,
    pub completion_tokens: usize,
    /// Draft tokens verified (speculative decoding; llama.cpp's `draft_n`).
    pub drafted: usize,
    /// Of those, tokens the model confirmed (`draft_n_accepted`).
    pub draft_accepted: usize,
}

/// Why a generation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// An end-of-generation token was sampled (not included in the output).
    Eog,
    /// `max_tokens` were generated.
    Length,
    /// A stop string matched (the text ends before it).
    StopString,
    /// The context is full.
    ContextFull,
}

impl StopReason {
    /// OpenAI-style `finish_reason`.
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Eog | StopReason::StopString => "stop",
            StopReason::Length | StopReason::ContextFull => "length",
        }
    }
}

/// What a generation sends to its client, in order: tokens, then exactly one `Done` or `Error`.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    Token {
        id: u32,
        /// The text this token releases (short pieces are stored inline, not on the heap).
        text: compact_str::CompactString,
        /// The token's log-probability and alternatives, when the sampling params ask for them.
        logprobs: Option<crate::sampling::TokenLogprobs>,
    },
    Done {
        reason: StopReason,
        text_tail: String,
        usage: Usage,
        ttft_ms: f64,
    },
    Error(String),
}

/// A running generation.
pub(crate) struct Generation {
    pub sampler: Sampler,
    pub stops: StopMatcher,
    pub utf8: Utf8Buf,
    /// The decoded text of the token being emitted, then what of it the stop strings release;
    /// both reused from token to token.
    pub text: String,
    pub emit: String,
    pub events: mpsc::UnboundedSender<Event>,
    pub max_tokens: usize,
    pub produced: usize,
    pub started: Instant,
    pub first_token: Option<Instant>,
    pub usage: Usage,
    /// Close the session when the generation ends or its client goes away.
    pub ephemeral: bool,
    /// Do not stop on end-of-generation tokens.
    pub ignore_eos: bool,
    /// Structured output: where the text stands in its constraint.
    pub matcher: Option<memoria_constrain::Matcher>,
    /// Speculative decoding's state, when the generation drafts.
    pub spec: Option<Box<crate::speculation::Speculation>>,
}

/// A warm-up: compute the prefix, pin its blocks, report, close.
pub(crate) struct Warm {
    /// `None`: no explicit pin (a re-warmed hot prefix, pinned by `hot` instead).
    pub pin: Option<PinLevel>,
    /// A saved hot prefix's reuse count, seeded into hot-prefix warming when it is warm.
    pub hot: Option<f64>,
    pub ttl: Option<Duration>,
    pub reply: crate::engine::Reply<WarmInfo>,
    pub cached_tokens: usize,
}

/// Result of warming a prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WarmInfo {
    pub tokens: usize,
    pub cached_tokens: usize,
    pub blocks_pinned: usize,
}

pub(crate) enum Job {
    Generate(Box<Generation>),
    Warm(Warm),
    /// Compute every pending token and reply with the last token's logits.
    Prefill(crate::engine::Reply<Vec<f32>>),
    /// Compute every pending token (none taken from the cache: each one's final hidden state
    /// is pooled) and reply with the embedding.
    Embed(Box<Embedding>),
    /// Compute every pending token (none taken from the cache) with logits and reply with the
    /// log-probs of each token after the first (the prompt's log-probs).
    Score(Box<Scoring>),
}

/// A scoring job in progress: what the tokens computed so far gave and where it goes.
pub(crate) enum Scoring {
    /// The log-probs of each token after the first, with `top` alternatives each.
    Logprobs {
        top: usize,
        out: Vec<crate::sampling::TokenLogprobs>,
        reply: crate::engine::Reply<Vec<crate::sampling::TokenLogprobs>>,
    },
    /// The raw logits row (the model's whole vocabulary) after each position from `from` on;
    /// `done` positions are computed so far.
    Rows {
        from: usize,
        done: usize,
        rows: Vec<f32>,
        reply: crate::engine::Reply<Vec<f32>>,
    },
}

impl Scoring {
    /// Answers the caller with `err`.
    pub fn fail(self, err: crate::EngineError) {
        match self {
            Scoring::Logprobs { reply, .. } => {
                let _ = reply.send(Err(err));
            }
            Scoring::Rows { reply, .. } => {
                let _ = reply.send(Err(err));
            }
        }
    }

    /// Answers the caller once every token is computed (`last`: the last one's logits).
    pub fn finish(self, last: &[f32]) {
        match self {
            Scoring::Logprobs { out, reply, .. } => {
                let _ = reply.send(Ok(out));
            }
            Scoring::Rows {
                from,
                done,
                mut rows,
                reply,
            } => {
                if done >= from {
                    rows.extend_from_slice(last);
                }
                let _ = reply.send(Ok(rows));
            }
        }
    }
}

/// An embedding in progress: the pooled rows so far and where the vector goes.
pub(crate) struct Embedding {
    pub pool: memoria_model::llama::MeanPool,
    pub reply: crate::engine::Reply<Vec<f32>>,
}

pub(crate) struct Session {
    pub ns: NamespaceId,
    /// Root of the session's block hash chain (model fingerprint, K/V type, namespace salt).
    pub root: BlockHash,
    pub seq: SeqId,
    /// Appended tokens whose K/V are not computed yet, in order.
    pub pending: Vec<u32>,
    /// No K/V computed or matched yet: the first compute tries the shared prefix cache.
    pub fresh: bool,
    /// Logits after the last computed token, when it was computed with logits.
    pub last_logits: Option<Vec<f32>>,
    pub job: Option<Job>,
    pub last_used: Instant,
    /// When the current job was queued (prefill order is first come, first served).
    pub queued_at: Instant,
    /// Chain hash of the first full block of the tokens this session started computing: a fresh
    /// session whose first block another session is computing waits and then shares it.
    pub first_block: Option<BlockHash>,
    /// Tokens its first compute took from the shared cache (a fork inherits its source's).
    pub cached_tokens: usize,
    /// Its first compute's blocks from the tiers, read off the engine thread.
    pub stage: crate::engine::Stage,
    /// Its first compute's chain, hashed once for staging, matching and sealing.
    pub chain: Option<Box<crate::engine::PromptChain>>,
    /// Leading whole blocks of its context already handed to the store (matched from the
    /// cache or written through): write-through hands over only the blocks after them.
    pub stored_blocks: usize,
}

impl Session {
    pub fn new(ns: NamespaceId, root: BlockHash, seq: SeqId, now: Instant) -> Session {
        Session {
            ns,
            root,
            seq,
            pending: Vec::new(),
            fresh: true,
            last_logits: None,
            job: None,
            last_used: now,
            queued_at: now,
            first_block: None,
            cached_tokens: 0,
            stage: crate::engine::Stage::Idle,
            chain: None,
            stored_blocks: 0,
        }
    }

    /// Whether the session's job is an embedding (bulk work, pooled hidden states, no logits).
    pub fn embedding(&self) -> bool {
        matches!(self.job, Some(Job::Embed(_)))
    }

    /// Whether the session has tokens to compute for a job.
    pub fn runnable(&self) -> bool {
        self.job.is_some() && !self.pending.is_empty()
    }
}
