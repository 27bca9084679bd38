//! Speculative decoding in the engine step. A decoding session's draft rides in the batch as a
//! short prefill after its last token, every row with logits; the rows are then sampled in
//! order with the generation's own sampler, constraint and RNG, exactly as plain decoding would
//! sample them one step at a time. A draft token is kept while the sampled token equals it; the
//! first token that differs (or the pass's last row) is the pass's own sampled token, and the
//! K/V of the drafts past it is truncated from the session. Since a row's logits do not depend
//! on the batch or the chunk it is computed in (batch invariance), the text is the same as
//! without speculation, bit for bit; only the number of passes changes.

use std::sync::PoisonError;

use memoria_kv::NamespaceId;
use memoria_kv::draft::group_key;

use super::Engine;
use crate::EngineError;
use crate::session::{Generation, Job, SessionId};
use crate::speculation::{MAX_DRAFT, Speculate, Speculation};

impl Engine {
    /// The drafting state of a new generation of session `id` (its tokens `context`, at most
    /// `reach` in all), or `None` when it does not draft. Allocates its tables now, off the step.
    pub(super) fn speculation(
        &mut self,
        ns: NamespaceId,
        id: SessionId,
        context: &[u32],
        reach: usize,
        settings: Speculate,
    ) -> Result<Option<Box<Speculation>>, EngineError> {
        if !settings.on() {
            return Ok(None);
        }
        // The group is the chain root's: sessions share drafts exactly where they share cached
        // blocks (the same salt), never across isolated namespaces.
        let group = group_key(&self.session(ns, id)?.root);
        let memory =
            (settings.group && self.cfg.draft_memory_tokens > 0).then(|| self.drafts.group(group));
        let counters = self.stats.speculation.of(ns);
        Ok(Some(Box::new(Speculation::new(
            context, reach, settings, group, memory, counters,
        ))))
    }

    /// Appends a draft of at most `room` tokens to decoding session `id`'s pending token, within
    /// its token and context limits; returns the draft's length.
    pub(super) fn draft(&mut self, id: SessionId, room: usize) -> usize {
        let max_context = self.cfg.max_context;
        let pool = &self.pool;
        let row_cost = self.row_cost.get();
        let Some(s) = self.sessions.get_mut(&id) else {
            return 0;
        };
        let len = pool.seq_len(s.seq).unwrap_or(usize::MAX);
        let Some(Job::Generate(g)) = &mut s.job else {
            return 0;
        };
        let Some(sp) = g.spec.as_mut() else {
            return 0;
        };
        // The pass samples one token per row: no more rows than tokens still to produce, nor
        // past the context.
        let left = g.max_tokens.saturating_sub(g.produced).saturating_sub(1);
        let context_left = max_context
            .saturating_sub(len.saturating_add(s.pending.len()))
            .saturating_sub(1);
        let max = room.min(left).min(context_left).min(MAX_DRAFT);
        let k = sp.propose(max, pool, row_cost);
        s.pending.extend_from_slice(&sp.draft[..k]);
        k
    }

    /// Undoes [`Self::draft`] when the step cannot carry it: the session decodes one token.
    pub(super) fn drop_draft(&mut self, id: SessionId, k: usize) {
        if let Some(s) = self.sessions.get_mut(&id) {
            let keep = s.pending.len().saturating_sub(k);
            s.pending.truncate(keep);
        }
    }

    /// Verifies decoding session `id`'s pass: its pending tokens are its last token and the
    /// draft (their K/V computed into reserved positions), `rows` the logits after each. Each
    /// token is committed to the pool as it is confirmed; the reservation past the last one is
    /// dropped.
    pub(super) fn verify(&mut self, id: SessionId, rows: &[f32]) {
        let n_vocab = self.model.hparams().n_vocab;
        let Some(s) = self.sessions.get_mut(&id) else {
            return;
        };
        let (seq, k) = (s.seq, s.pending.len().saturating_sub(1));
        let Some(&last) = s.pending.first() else {
            return;
        };
        s.pending.clear();
        let counters = match &mut s.job {
            Some(Job::Generate(g)) if g.spec.is_some() => {
                g.usage.drafted += k;
                g.spec.as_ref().map(|sp| sp.counters.clone())
            }
            _ => None,
        };
        if let Some(c) = &counters {
            c.start_pass(k);
        }
        if let Err(e) = self.pool.commit_part(seq, &[last]) {
            // Nothing of the pass is kept: the reservation goes too.
            let _ = self.pool.truncate(seq, self.pool.seq_len(seq).unwrap_or(0));
            self.fail_job(id, e.into());
            return;
        }
        let mut used = 0;
        let mut accepted = 0;
        for i in 0..=k {
            used = i;
            self.on_logits(id, &rows[i * n_vocab..(i + 1) * n_vocab]);
            if i == k {
                break;
            }
            let Some(s) = self.sessions.get_mut(&id) else {
                break;
            };
            let Some(Job::Generate(g)) = &mut s.job else {
                break;
            };
            let Some(sp) = g.spec.as_ref() else {
                break;
            };
            // The sampled token is the draft's: its K/V is computed already.
            let drafted = sp.draft[i];
            if s.pending.len() != 1 || s.pending[0] != drafted {
                break;
            }
            s.pending.clear();
            accepted += 1;
            g.usage.draft_accepted += 1;
            if let Some(c) = &counters {
                c.accept();
            }
            if let Err(e) = self.pool.commit_part(seq, &[drafted]) {
                self.fail_job(id, e.into());
                break;
            }
        }
        if let Some(sp) = self.generation(id).and_then(|g| g.spec.as_mut()) {
            sp.length.observe(k, accepted);
        }
        let Some(s) = self.sessions.get_mut(&id) else {
            return;
        };
        let kept = s.last_logits.get_or_insert_with(Vec::new);
        kept.clear();
        kept.extend_from_slice(&rows[used * n_vocab..(used + 1) * n_vocab]);
        // Drop the positions of the drafts not confirmed.
        let dropped = self
            .pool
            .seq_len(seq)
            .and_then(|len| self.pool.truncate(seq, len));
        if let Err(e) = dropped {
            self.fail_job(id, e.into());
        }
    }

    /// Records a finished generation's tokens in its group's draft memory.
    pub(super) fn remember(g: &Generation) {
        if let Some(sp) = &g.spec
            && let Some(group) = &sp.group
        {
            let mut m = group.lock().unwrap_or_else(PoisonError::into_inner);
            m.record(sp.index.tokens());
        }
    }

    /// The running generation of session `id`.
    fn generation(&mut self, id: SessionId) -> Option<&mut Generation> {
        match &mut self.sessions.get_mut(&id)?.job {
            Some(Job::Generate(g)) => Some(g),
            _ => None,
        }
    }
}
