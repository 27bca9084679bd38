//! The stack as a [`Stager`]: the leading run of a context's wanted blocks that the tiers hold
//! (index look-ups first, no reads), read, verified and decoded into one staged set on the
//! caller's thread (the engine's staging thread, never the engine's) and, for a long run, one
//! more thread per core; the reads' effects are applied in chain order. The blocks land in the
//! pool blocks the request's loan lends, where it has one. When every wanted block is staged
//! and the request wants the partial tail after them, it is read from disk into one more slot
//! (see `stack_tail`).

use memoria_kv::staging::{StageRequest, Staged, Stager, TailMiss, WantedBlock};

use super::*;

/// Runs shorter than this are read on the calling thread alone.
const PARALLEL_FROM: usize = 8;

impl Stager for TierStack {
    fn stage(&self, mut req: StageRequest) -> Staged {
        let loan = req.loan.take();
        let b = req.layout.block_tokens;
        let Ok(block_bytes) = req.layout.block_bytes() else {
            return Staged::default();
        };
        let fits = |w: &WantedBlock| {
            w.index
                .checked_add(1)
                .and_then(|n| n.checked_mul(b))
                .is_some_and(|end| end <= req.tokens.len())
        };
        let wanted: Vec<WantedBlock> = req.wanted.iter().copied().take_while(fits).collect();
        // The run the tiers say they hold, plus the first block they do not (its fetch counts
        // the miss, as a prefix match's would).
        let held = wanted
            .iter()
            .take_while(|w| self.may_fetch(&w.hash))
            .count();
        let n = (held + 1).min(wanted.len());
        // The tail continues the last wanted block: only worth a slot when all are held.
        let tail_fits = req.tail.is_some() && held == wanted.len() && n == req.wanted.len();
        let mut staged = Staged::with_loan(loan, block_bytes, n + usize::from(tail_fits));
        // The salts a host-form block must carry, looked up once from the registry.
        let salts = (
            self.salt_of_root(req.model, &req.layout, &req.public.1),
            self.salt_of_root(req.model, &req.layout, &req.root),
        );
        let expect = |w: &WantedBlock| {
            let public = w.index < req.public.0;
            Expect {
                model: req.model,
                layout: req.layout,
                hash: w.hash,
                root: Some(if public { req.public.1 } else { req.root }),
                salt: if public { salts.0 } else { salts.1 },
                tokens: Some(&req.tokens[w.index * b..(w.index + 1) * b]),
            }
        };
        // The reads run side by side (one thread per core for a long run); their effects are
        // applied in chain order up to the first block that fails, so a bad block ends the
        // walk as it ends a prefix match: nothing past it is counted, removed or taken.
        let mut traces = vec![Trace::default(); n];
        {
            let mut work: Vec<_> = wanted[..n]
                .iter()
                .zip(staged.slots_mut())
                .zip(traces.iter_mut())
                .collect();
            let cores = std::thread::available_parallelism().map_or(1, |p| p.get());
            let parts = if n >= PARALLEL_FROM {
                cores.min(n / 4).max(1)
            } else {
                1
            };
            let per = n.div_ceil(parts).max(1);
            let read = |chunk: &mut [((&WantedBlock, &mut [u8]), &mut Trace)]| {
                for ((w, slot), t) in chunk.iter_mut() {
                    **t = self.trace(&expect(w), slot);
                }
            };
            std::thread::scope(|sc| {
                let mut chunks = work.chunks_mut(per);
                let first = chunks.next();
                for c in chunks {
                    sc.spawn(|| read(c));
                }
                if let Some(c) = first {
                    read(c);
                }
            });
        }
        let mut settled = Vec::with_capacity(n);
        for ((w, t), slot) in wanted[..n].iter().zip(&traces).zip(staged.slots_mut()) {
            let r = self.settle(t, &expect(w), slot);
            let failed = r.is_err();
            settled.push((w.hash, r));
            if failed {
                break;
            }
        }
        let all_hit = settled.len() == n && settled.iter().all(|(_, r)| r.is_ok());
        for (k, (hash, r)) in settled.into_iter().enumerate() {
            match r {
                Ok(f) => staged.push_hit(hash, k, f.tier),
                Err(why) => staged.push_miss(hash, why),
            }
        }
        if let Some(want) = &req.tail {
            let read = match staged.slot_mut(n) {
                Some(out) if tail_fits && all_hit => {
                    self.stage_tail(req.model, req.layout, req.root, want, out)
                }
                _ => Err(TailMiss::Absent),
            };
            match read {
                Ok(tokens) => staged.push_tail(want.parent, tokens, n),
                Err(why) => staged.push_tail_miss(why),
            }
        }
        staged.remote_lost = self.remote_lost_any();
        staged
    }
}
