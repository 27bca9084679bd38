//! How a session's job ends: a generation finished (held-back text flushed, usage reported, a
//! one-shot session closed), a warm-up pinned, a job failed, or a caller gone away.

use std::sync::atomic::Ordering::Relaxed;

use super::Engine;
use crate::EngineError;
use crate::session::{Event, Job, SessionId, StopReason, WarmInfo};

impl Engine {
    /// Ends a generation: flushes held-back text, reports usage, closes one-shot sessions.
    pub(crate) fn finish_generation(&mut self, id: SessionId, reason: StopReason) {
        let Some(s) = self.sessions.get_mut(&id) else {
            return;
        };
        let Some(Job::Generate(mut g)) = s.job.take() else {
            return;
        };
        Self::remember(&g);
        let mut tail = String::new();
        if reason != StopReason::StopString {
            let out = g.stops.push(&g.utf8.finish());
            tail.push_str(&out.emit);
            if !out.stopped {
                tail.push_str(&g.stops.finish());
            }
        }
        let ttft_ms = g
            .first_token
            .map_or(0.0, |t| t.duration_since(g.started).as_secs_f64() * 1000.0);
        let _ = g.events.send(Event::Done {
            reason,
            text_tail: tail,
            usage: g.usage,
            ttft_ms,
        });
        self.stats.generations.fetch_add(1, Relaxed);
        if g.ephemeral {
            self.close_session(id);
        }
    }

    /// Pins a warmed prefix and closes its session (the blocks stay cached).
    pub(super) fn finish_warm(&mut self, id: SessionId) {
        let Some(s) = self.sessions.get_mut(&id) else {
            return;
        };
        let Some(Job::Warm(w)) = s.job.take() else {
            return;
        };
        let seq = s.seq;
        let pinned = |pool: &mut memoria_kv::BlockPool| match w.pin {
            Some(pin) => pool.pin_seq_blocks(seq, pin, w.ttl),
            None => Ok(0),
        };
        let (tokens, blocks_pinned) = match self
            .pool
            .seq_len(seq)
            .and_then(|n| Ok((n, pinned(&mut self.pool)?)))
        {
            Ok(v) => v,
            Err(e) => {
                let _ = w.reply.send(Err(e.into()));
                self.close_session(id);
                return;
            }
        };
        if let Some(count) = w.hot {
            let end = self.pool.block_table(seq).ok().and_then(|t| {
                let full = tokens / self.pool.layout().block_tokens;
                t.get(full.checked_sub(1)?)
                    .and_then(|&b| self.pool.block_info(b)?.hash)
            });
            if let Some(end) = end {
                self.pool.seed_hot(end, count);
            }
        }
        let info = WarmInfo {
            tokens,
            cached_tokens: w.cached_tokens,
            blocks_pinned,
        };
        let _ = w.reply.send(Ok(info));
        self.close_session(id);
    }

    /// Fails a session's job with `err`; one-shot sessions are closed.
    pub(crate) fn fail_job(&mut self, id: SessionId, err: EngineError) {
        let Some(s) = self.sessions.get_mut(&id) else {
            return;
        };
        match s.job.take() {
            Some(Job::Generate(g)) => {
                let _ = g.events.send(Event::Error(err.to_string()));
                if g.ephemeral {
                    self.close_session(id);
                }
            }
            Some(Job::Warm(w)) => {
                let _ = w.reply.send(Err(err));
                self.close_session(id);
            }
            Some(Job::Prefill(reply)) => {
                let _ = reply.send(Err(err));
            }
            Some(Job::Embed(e)) => {
                let _ = e.reply.send(Err(err));
                self.close_session(id);
            }
            Some(Job::Score(sc)) => sc.fail(err),
            None => {}
        }
    }

    /// Cancels generations and embeddings whose caller went away; one-shot sessions release
    /// their blocks.
    pub(super) fn reap_cancelled(&mut self, gone: &mut Vec<SessionId>) {
        gone.clear();
        gone.extend(
            self.sessions
                .iter()
                .filter(|(_, s)| match &s.job {
                    Some(Job::Generate(g)) => g.events.is_closed(),
                    Some(Job::Embed(e)) => e.reply.is_closed(),
                    _ => false,
                })
                .map(|(id, _)| *id),
        );
        for &id in gone.iter() {
            self.stats.cancelled.fetch_add(1, Relaxed);
            let Some(s) = self.sessions.get_mut(&id) else {
                continue;
            };
            match s.job.take() {
                Some(Job::Generate(g)) if g.ephemeral => self.close_session(id),
                Some(Job::Embed(_)) => self.close_session(id),
                _ => {}
            }
        }
    }
}
