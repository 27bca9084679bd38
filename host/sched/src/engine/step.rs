//! One engine step: plan (every decoding session's next token first, with its draft when it
//! speculates, rotated for fairness, then chunks of pending prefills in arrival order, within a
//! token budget; embeddings, bulk work, come after the other prefills and take at most
//! `embed_step_tokens` of the budget while sessions decode), reserve K/V slots in the pool, run
//! one forward pass for the whole batch, commit, then sample (and verify drafts) and stream.

use std::collections::HashSet;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use memoria_kv::{BlockHash, BlockPool};
use memoria_model::llama::BatchToken;

use super::buffers::{Planned, StepBuffers};
use super::{Engine, Persist, PromptChain, Stage};
use crate::EngineError;
use crate::paged::PagedKv;
use crate::session::{Event, Job, Scoring, Session, SessionId, StopReason};

/// Tokens per step of a session computing prompt log-probs (each keeps a row of logits).
const SCORE_CHUNK: usize = 64;

impl Engine {
    pub(crate) fn step(&mut self) {
        // Taken out while in use (a panic loses them; the next step starts empty).
        let mut buf = std::mem::take(&mut self.buffers);
        self.reap_cancelled(&mut buf.gone);
        self.step_with(&mut buf);
        self.buffers = buf;
    }

    fn step_with(&mut self, buf: &mut StepBuffers) {
        self.plan(buf);
        if buf.plan.is_empty() {
            return;
        }
        buf.seqs.clear();
        buf.batch.clear();
        for (i, p) in buf.plan.iter().enumerate() {
            let s = &self.sessions[&p.id];
            buf.seqs.push(s.seq);
            buf.batch.extend(
                s.pending[..p.n]
                    .iter()
                    .enumerate()
                    .map(|(j, &token)| BatchToken {
                        token,
                        pos: p.start + j,
                        seq: i,
                        logits: p.every_row || p.draft > 0 || (p.logits && j + 1 == p.n),
                    }),
            );
        }
        let started = Instant::now();
        let n_vocab = self.model.hparams().n_vocab;
        // The logits live in the model's scratch, taken out so sampling can borrow the engine.
        let mut scratch = std::mem::take(&mut self.scratch);
        let result = {
            let mut kv = PagedKv::new(&mut self.pool, &buf.seqs, self.cfg.max_context);
            // Only the length is kept, so the hidden states can be read beside the logits.
            self.model
                .forward(&buf.batch, &mut kv, &mut scratch)
                .map(<[f32]>::len)
        };
        let logits = match result {
            Ok(len) => &scratch.logits()[..len],
            Err(e) => {
                for p in &buf.plan {
                    let _ = self.pool.truncate(self.sessions[&p.id].seq, p.start);
                    self.fail_job(p.id, EngineError::Internal(e.to_string()));
                }
                self.scratch = scratch;
                return;
            }
        };
        self.row_cost.observe(buf.batch.len(), started.elapsed());
        self.stats.speculation.set_row_cost(self.row_cost.get());
        self.stats.record_step(
            buf.batch.len(),
            buf.plan
                .iter()
                .filter(|p| p.n == 1 || p.draft > 0)
                .map(|p| p.n)
                .sum(),
            started.elapsed(),
        );
        let mut row = 0;
        let mut first = 0;
        for p in &buf.plan {
            let rows = first..first + p.n;
            first += p.n;
            let Some(s) = self.sessions.get_mut(&p.id) else {
                continue;
            };
            let seq = s.seq;
            let embedding = s.embedding();
            if p.every_row {
                // Each row but the prompt's last scores the token after it.
                let scored = p.n - usize::from(p.logits);
                let rows = &logits[row * n_vocab..(row + scored) * n_vocab];
                row += scored;
                Self::score_rows(s, rows, n_vocab, self.tok.n_vocab());
            }
            if p.draft > 0 {
                let rows = &logits[row * n_vocab..(row + p.n) * n_vocab];
                row += p.n;
                self.verify(p.id, rows);
                if let Some(s) = self.sessions.get_mut(&p.id) {
                    let stored = &mut s.stored_blocks;
                    self.persist
                        .write_through(&self.pool, s.ns, seq, stored, false);
                }
                continue;
            }
            let committed = self.pool.commit(seq, &s.pending[..p.n]);
            s.pending.drain(..p.n);
            if let Err(e) = committed {
                self.fail_job(p.id, e.into());
                continue;
            }
            self.persist
                .write_through(&self.pool, s.ns, seq, &mut s.stored_blocks, false);
            if embedding {
                self.absorb_hidden(p.id, &scratch, rows);
                continue;
            }
            if p.logits {
                let l = &logits[row * n_vocab..(row + 1) * n_vocab];
                row += 1;
                self.on_logits(p.id, l);
                if let Some(s) = self.sessions.get_mut(&p.id) {
                    let kept = s.last_logits.get_or_insert_with(Vec::new);
                    kept.clear();
                    kept.extend_from_slice(l);
                }
            } else if let Some(s) = self.sessions.get_mut(&p.id) {
                s.last_logits = None;
            }
        }
        self.scratch = scratch;
    }

    /// Chooses this step's work into `buf.plan` and reserves its K/V slots.
    fn plan(&mut self, buf: &mut StepBuffers) {
        let StepBuffers {
            decoders,
            prefills,
            plan,
            ..
        } = buf;
        decoders.clear();
        prefills.clear();
        plan.clear();
        for (id, s) in &self.sessions {
            if !s.runnable() {
                continue;
            }
            let decoding =
                matches!(&s.job, Some(Job::Generate(g)) if g.produced > 0) && s.pending.len() == 1;
            if decoding {
                decoders.push(*id);
            } else {
                prefills.push((s.embedding(), s.queued_at, *id));
            }
        }
        prefills.sort_unstable();
        self.stats
            .queue_depth
            .store((decoders.len() + prefills.len()) as u64, Relaxed);
        if !decoders.is_empty() {
            let k = self.round_robin % decoders.len();
            decoders.rotate_left(k);
            self.round_robin = self.round_robin.wrapping_add(1);
        }
        let mut budget = self.cfg.step_tokens.max(1);
        let mut embed_budget = if decoders.is_empty() {
            budget
        } else {
            self.cfg.embed_step_tokens.max(1)
        };
        // Each decoder's share of what is left after one token each, halved while prompts wait.
        let draft_room = match decoders.len() {
            0 => 0,
            d => budget.saturating_sub(d) / d / if prefills.is_empty() { 1 } else { 2 },
        };
        let mut inflight = self.prefixes_in_flight();
        for id in decoders
            .iter()
            .copied()
            .chain(prefills.iter().map(|&(_, _, id)| id))
        {
            if budget == 0 {
                break;
            }
            if self.waits_for_shared_prefix(id, &mut inflight) {
                continue;
            }
            match self.match_cached_prefix(id) {
                Ok(true) => {}
                Ok(false) => continue,
                Err(e) => {
                    self.fail_job(id, e);
                    continue;
                }
            }
            let s = &self.sessions[&id];
            let decoding =
                matches!(&s.job, Some(Job::Generate(g)) if g.produced > 0) && s.pending.len() == 1;
            let draft = if decoding {
                self.draft(id, draft_room.min(budget - 1))
            } else {
                0
            };
            let s = &self.sessions[&id];
            let embedding = s.embedding();
            let n = if embedding {
                let n = s.pending.len().min(budget).min(embed_budget);
                if n == 0 {
                    continue;
                }
                embed_budget -= n;
                n
            } else if let Some(Job::Score(sc)) = &s.job {
                // Every row keeps a logits row: chunks stay small so the step's logits buffer
                // (kept across steps) does too, except for teacher forcing (the CLI's own
                // engine), which takes the whole pass as llama.cpp's tools do.
                let cap = match **sc {
                    Scoring::Rows { .. } => budget,
                    Scoring::Logprobs { .. } => SCORE_CHUNK,
                };
                s.pending.len().min(budget).min(cap)
            } else {
                s.pending.len().min(budget)
            };
            // An embedding pools hidden states and needs no logits; prompt log-probs need
            // every row's.
            let logits = n == s.pending.len() && !embedding;
            let every_row = matches!(s.job, Some(Job::Score(_)));
            let seq = s.seq;
            let mut reserved = self.pool.reserve_positions(seq, n);
            let (mut n, mut draft) = (n, draft);
            if reserved.is_err() && draft > 0 {
                // No room for the draft: decode the one token.
                self.drop_draft(id, draft);
                (n, draft) = (1, 0);
                reserved = self.pool.reserve_positions(seq, 1);
            }
            match reserved {
                Ok(start) => {
                    budget -= n;
                    plan.push(Planned {
                        id,
                        n,
                        start,
                        logits,
                        every_row,
                        draft,
                    });
                }
                Err(e) => self.fail_job(id, e.into()),
            }
        }
    }

    /// First-block hashes of sessions still prefilling (not yet decoding).
    fn prefixes_in_flight(&self) -> HashSet<BlockHash> {
        self.sessions
            .values()
            .filter(|s| !s.fresh && s.job.is_some() && !s.pending.is_empty())
            .filter(|s| !matches!(&s.job, Some(Job::Generate(g)) if g.produced > 0))
            .filter_map(|s| s.first_block)
            .collect()
    }

    /// Whether a fresh session should wait because another session is computing the same first
    /// block: it then shares the whole computed prefix instead of computing it again. Otherwise
    /// records the session's first block as in flight.
    fn waits_for_shared_prefix(
        &mut self,
        id: SessionId,
        inflight: &mut HashSet<BlockHash>,
    ) -> bool {
        let b = self.pool.layout().block_tokens;
        let Some(s) = self.sessions.get_mut(&id) else {
            return false;
        };
        if !s.fresh || s.pending.len() <= b {
            return false;
        }
        let Some(first) = prompt_chain(&self.persist, &self.pool, s).first() else {
            return false;
        };
        if inflight.contains(&first) {
            return true;
        }
        s.first_block = Some(first);
        inflight.insert(first);
        false
    }

    /// On a session's first compute, attaches the longest cached prefix of its pending tokens.
    /// Blocks the hot pool lacks are staged first, off this thread: until they are, the
    /// session is left out of the step (false).
    fn match_cached_prefix(&mut self, id: SessionId) -> Result<bool, EngineError> {
        let s = self
            .sessions
            .get_mut(&id)
            .ok_or(EngineError::NotFound(id))?;
        if !s.fresh {
            return Ok(true);
        }
        let staged = match std::mem::take(&mut s.stage) {
            Stage::Waiting => {
                s.stage = Stage::Waiting;
                return Ok(false);
            }
            Stage::Ready(staged) => Some(staged),
            Stage::Idle => {
                // Hashed once: staging, the match and the blocks' sealing share it.
                let root = s.root;
                prompt_chain(&self.persist, &self.pool, s);
                let req = s.chain.as_deref().and_then(|chain| {
                    self.persist
                        .stage_request(&self.pool, root, chain, &s.pending)
                });
                if let Some(mut req) = req {
                    // Staged straight into pool blocks (one more for a tail) where the pool
                    // has them free.
                    let n = req.wanted.len() + usize::from(req.tail.is_some());
                    req.loan = self.pool.lend(s.ns, n);
                    if self.persist.send_stage(id, req) {
                        s.stage = Stage::Waiting;
                        return Ok(false);
                    }
                }
                None
            }
        };
        s.fresh = false;
        let chain = s.chain.take();
        let hit = self.persist.match_prefix(
            &mut self.pool,
            &mut s.stored_blocks,
            s.seq,
            &s.pending,
            staged,
            chain,
        )?;
        // The staged set's loan is over: its blocks not linked go back to the free list.
        self.pool.reclaim_loans();
        s.pending.drain(..hit);
        s.cached_tokens += hit;
        match &mut s.job {
            Some(Job::Generate(g)) => g.usage.cached_tokens += hit,
            Some(Job::Warm(w)) => w.cached_tokens += hit,
            Some(Job::Prefill(_) | Job::Embed(_) | Job::Score(_)) | None => {}
        }
        Ok(true)
    }

    /// Takes the staging thread's answers in (waiting up to `limit` for the first): each goes
    /// to its session if it still waits with a job, and is dropped otherwise.
    pub(crate) fn take_staged(&mut self, limit: std::time::Duration) {
        // Blocks of loans dropped since (an answer no session took, a session closed).
        self.pool.reclaim_loans();
        let mut wait = limit;
        while let Some((id, staged)) = self.persist.staged(wait) {
            wait = std::time::Duration::ZERO;
            if let Some(s) = self.sessions.get_mut(&id)
                && matches!(s.stage, Stage::Waiting)
            {
                s.stage = if s.job.is_some() && s.fresh {
                    Stage::Ready(Box::new(staged))
                } else {
                    Stage::Idle
                };
            }
        }
    }

    /// Handles the logits after a session's last computed token.
    pub(crate) fn on_logits(&mut self, id: SessionId, logits: &[f32]) {
        let Some(s) = self.sessions.get_mut(&id) else {
            return;
        };
        match &mut s.job {
            Some(Job::Generate(g)) => {
                if !s.pending.is_empty() {
                    return;
                }
                let allowed = g.matcher.as_mut().map(memoria_constrain::Matcher::mask);
                let token = g.sampler.sample_allowed(logits, allowed.as_deref());
                let logprobs = g.sampler.logprobs(logits, token);
                g.sampler.accept(token);
                // The mask allowed it, so the constraint takes it (an end id only when the
                // text is complete, which then ends the generation even with `ignore_eos`).
                let constrained_end = match g.matcher.as_mut().map(|m| (m.advance(token), m)) {
                    Some((Ok(()), m)) => m.is_finished(),
                    Some((Err(e), _)) => {
                        let why = format!("structured output: {e} (the mask allowed no token)");
                        self.fail_job(id, EngineError::Internal(why));
                        return;
                    }
                    None => false,
                };
                let now = Instant::now();
                if g.first_token.is_none() {
                    g.first_token = Some(now);
                }
                s.last_used = now;
                if constrained_end || (self.tok.is_eog(token) && !g.ignore_eos) {
                    self.finish_generation(id, StopReason::Eog);
                    return;
                }
                g.produced += 1;
                g.usage.completion_tokens += 1;
                s.pending.push(token);
                if let Some(sp) = g.spec.as_mut() {
                    sp.index.extend(&[token]);
                }
                g.text.clear();
                g.emit.clear();
                g.utf8.push_into(self.tok.piece(token, true), &mut g.text);
                let stopped = g.stops.push_into(&g.text, &mut g.emit);
                let _ = g.events.send(Event::Token {
                    id: token,
                    text: g.emit.as_str().into(),
                    logprobs,
                });
                let context = self.pool.seq_len(s.seq).unwrap_or(0) + s.pending.len();
                let reason = if stopped {
                    Some(StopReason::StopString)
                } else if g.produced >= g.max_tokens {
                    Some(StopReason::Length)
                } else if context >= self.cfg.max_context {
                    Some(StopReason::ContextFull)
                } else {
                    None
                };
                if let Some(r) = reason {
                    self.finish_generation(id, r);
                }
            }
            Some(Job::Warm(_)) if s.pending.is_empty() => self.finish_warm(id),
            Some(Job::Prefill(_)) if s.pending.is_empty() => {
                if let Some(Job::Prefill(reply)) = s.job.take() {
                    s.last_used = Instant::now();
                    let _ = reply.send(Ok(logits.to_vec()));
                }
            }
            Some(Job::Score(_)) if s.pending.is_empty() => {
                if let Some(Job::Score(sc)) = s.job.take() {
                    s.last_used = Instant::now();
                    sc.finish(logits);
                }
            }
            _ => {}
        }
    }
}

/// `s`'s prompt chain, hashed now unless the one it holds still fits its pending tokens.
fn prompt_chain<'s>(persist: &Persist, pool: &BlockPool, s: &'s mut Session) -> &'s PromptChain {
    let b = pool.layout().block_tokens;
    if !s.chain.as_ref().is_some_and(|c| c.fits(&s.pending, b)) {
        s.chain = None;
    }
    let (ns, root) = (s.ns, s.root);
    s.chain
        .get_or_insert_with(|| Box::new(persist.prompt_chain(pool, ns, root, &s.pending)))
}
