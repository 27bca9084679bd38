//! Vectors one engine step fills and the next reuses: the plan, the batch, the sequences whose
//! block tables the model reads, and the sessions a step involves. Kept across steps so a warm
//! decode step allocates nothing.

use std::time::Instant;

use memoria_kv::SeqId;
use memoria_model::llama::BatchToken;

use crate::session::SessionId;

/// One session's share of a step.
pub(crate) struct Planned {
    pub id: SessionId,
    pub n: usize,
    /// Position of the chunk's first token.
    pub start: usize,
    /// Logits after the chunk's last token (it ends the pending tokens).
    pub logits: bool,
    /// Logits after every token (prompt log-probs).
    pub every_row: bool,
    /// Draft tokens after a decoding session's last token (speculative decoding: every row
    /// has logits and is verified).
    pub draft: usize,
}

#[derive(Default)]
pub(crate) struct StepBuffers {
    pub decoders: Vec<SessionId>,
    /// Sessions to prefill: embeddings (bulk work, `true`) after the rest, each in arrival order.
    pub prefills: Vec<(bool, Instant, SessionId)>,
    pub plan: Vec<Planned>,
    /// `seqs[i]` is batch sequence `i`'s pool sequence (its block table stays in the pool).
    pub seqs: Vec<SeqId>,
    pub batch: Vec<BatchToken>,
    /// Sessions with work when the step began (failed together if it panics).
    pub involved: Vec<SessionId>,
    /// Generations whose client went away.
    pub gone: Vec<SessionId>,
}
