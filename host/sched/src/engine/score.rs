//! Scoring: a session's pending tokens computed with logits after every token, none taken from
//! the cache (a cached token has no logits), for prompt log-probs (OpenAI's `echo` with
//! `logprobs`: each row scores the token after it) or as raw logits rows (teacher forcing:
//! `memoria perplexity` and `memoria logprobs`). The rows come from the same batched forward
//! pass as everyone's, so the figures do not depend on the batch. After the reply the session
//! holds the prompt and the last token's logits, as after a prefill: a generation or fork
//! follows.

use std::time::Instant;

use memoria_kv::NamespaceId;

use super::{Engine, Reply};
use crate::EngineError;
use crate::sampling::{TokenLogprobs, logprobs};
use crate::session::{Job, Scoring, Session, SessionId};

impl Engine {
    /// Starts scoring a new session's appended tokens with `top` alternatives each.
    pub(super) fn start_score(
        &mut self,
        ns: NamespaceId,
        id: SessionId,
        top: usize,
        reply: Reply<Vec<TokenLogprobs>>,
    ) {
        let out = Vec::new();
        self.start_scoring(ns, id, Scoring::Logprobs { top, out, reply });
    }

    /// Starts computing a new session's appended tokens, keeping the logits rows of positions
    /// `from..`.
    pub(super) fn start_rows(
        &mut self,
        ns: NamespaceId,
        id: SessionId,
        from: usize,
        reply: Reply<Vec<f32>>,
    ) {
        let job = Scoring::Rows {
            from,
            done: 0,
            rows: Vec::new(),
            reply,
        };
        self.start_scoring(ns, id, job);
    }

    fn start_scoring(&mut self, ns: NamespaceId, id: SessionId, job: Scoring) {
        // Only a new session: a computed token has no logits left to score.
        let checked = self.idle_session(ns, id).and_then(|s| {
            let computed = self.pool.seq_len(s.seq).map_or(true, |n| n > 0);
            if computed || s.pending.is_empty() {
                Err(EngineError::InvalidArgument(
                    "prompt log-probs need a new session with appended tokens".into(),
                ))
            } else {
                Ok(())
            }
        });
        let s = match checked.and_then(|()| self.session(ns, id)) {
            Ok(s) => s,
            Err(e) => {
                job.fail(e);
                return;
            }
        };
        // Not fresh: the first compute takes nothing from the cache.
        s.fresh = false;
        let mut job = job;
        let n = s.pending.len();
        match &mut job {
            Scoring::Logprobs { out, .. } => out.reserve(n.saturating_sub(1)),
            Scoring::Rows { .. } => {}
        }
        s.job = Some(Job::Score(Box::new(job)));
        s.queued_at = Instant::now();
    }

    /// Scores the tokens after each of `rows` (one logits row of `n_vocab` per computed token,
    /// from the first pending one; the tokenizer's `vocab` ids are the ones that count).
    pub(super) fn score_rows(s: &mut Session, rows: &[f32], n_vocab: usize, vocab: usize) {
        let Some(Job::Score(sc)) = &mut s.job else {
            return;
        };
        match &mut **sc {
            Scoring::Logprobs { top, out, .. } => {
                let width = vocab.min(n_vocab);
                for (j, row) in rows.chunks_exact(n_vocab.max(1)).enumerate() {
                    let Some(&next) = s.pending.get(j + 1) else {
                        break;
                    };
                    if let Some(lp) = logprobs(&row[..width], next, *top) {
                        out.push(lp);
                    }
                }
            }
            Scoring::Rows {
                from,
                done,
                rows: kept,
                ..
            } => {
                for row in rows.chunks_exact(n_vocab.max(1)) {
                    if *done >= *from {
                        kept.extend_from_slice(row);
                    }
                    *done += 1;
                }
            }
        }
    }
}
