//! One session's position in a constraint: the mask for the next token, applied to a logits row,
//! and the token taken. With the mask cached, a step allocates nothing.

use std::sync::Arc;

use crate::constraint::Constraint;
use crate::error::ConstrainError;
use crate::grammar::State;

/// A session's constrained decoding state. Cheap to clone (forks share the constraint).
#[derive(Debug, Clone)]
pub struct Matcher {
    c: Arc<Constraint>,
    state: State,
    /// An end-of-generation token was taken.
    finished: bool,
    /// The current state's mask, once asked for.
    mask: Option<Arc<[u64]>>,
}

impl Matcher {
    pub fn new(c: Arc<Constraint>) -> Matcher {
        Matcher {
            state: c.grammar().start(),
            c,
            finished: false,
            mask: None,
        }
    }

    pub fn constraint(&self) -> &Arc<Constraint> {
        &self.c
    }

    /// The allowed tokens now, one bit per id (`mask_words` words). Once finished: the
    /// end-of-generation ids only.
    pub fn mask(&mut self) -> Arc<[u64]> {
        if let Some(m) = &self.mask {
            return m.clone();
        }
        let m = if self.finished {
            let mut m = vec![0u64; self.c.vocab().mask_words()];
            for &e in self.c.vocab().eos_ids() {
                m[e as usize / 64] |= 1u64 << (e % 64);
            }
            Arc::from(m)
        } else {
            self.c.mask(self.state)
        };
        self.mask = Some(m.clone());
        m
    }

    /// Computes the current mask into `out` without the cache (the cold path: what a first visit
    /// of a state costs); words past the vocabulary's are zeroed.
    pub fn compute_mask(&self, out: &mut [u64]) {
        out.fill(0);
        if self.finished {
            for &e in self.c.vocab().eos_ids() {
                if let Some(w) = out.get_mut(e as usize / 64) {
                    *w |= 1u64 << (e % 64);
                }
            }
        } else {
            self.c.compute(self.state, out);
        }
    }

    /// Writes the mask into `out` (words past the vocabulary's are zeroed).
    pub fn fill_mask(&mut self, out: &mut [u64]) {
        let m = self.mask();
        let n = m.len().min(out.len());
        out[..n].copy_from_slice(&m[..n]);
        out[n..].fill(0);
    }

    /// Sets every disallowed logit to -inf (ids past the vocabulary too), leaving allowed ones.
    pub fn apply(&mut self, logits: &mut [f32]) {
        let m = self.mask();
        for (i, chunk) in logits.chunks_mut(64).enumerate() {
            match m.get(i).copied().unwrap_or(0) {
                u64::MAX => {}
                0 => chunk.fill(f32::NEG_INFINITY),
                w => {
                    for (j, l) in chunk.iter_mut().enumerate() {
                        *l = if w >> j & 1 == 1 {
                            *l
                        } else {
                            f32::NEG_INFINITY
                        };
                    }
                }
            }
        }
    }

    /// Whether `token` is allowed now.
    pub fn allows(&mut self, token: u32) -> bool {
        let m = self.mask();
        m.get(token as usize / 64)
            .is_some_and(|w| w >> (token % 64) & 1 == 1)
    }

    /// Takes `token`; a refused one leaves the state as it was.
    pub fn advance(&mut self, token: u32) -> Result<(), ConstrainError> {
        let vocab = self.c.vocab();
        if vocab.is_eos(token) {
            if self.finished || self.c.grammar().is_accepting(self.state) {
                if !self.finished {
                    self.finished = true;
                    self.mask = None;
                }
                return Ok(());
            }
            return Err(ConstrainError::TokenRejected { token });
        }
        let bytes = vocab.token_bytes(token);
        if self.finished || bytes.is_empty() {
            return Err(ConstrainError::TokenRejected { token });
        }
        match self.c.grammar().advance(self.state, bytes) {
            Some(s) => {
                if s != self.state {
                    self.state = s;
                    self.mask = None;
                }
                Ok(())
            }
            None => Err(ConstrainError::TokenRejected { token }),
        }
    }

    /// Whether the output so far is complete (an end-of-generation token is allowed).
    pub fn is_accepting(&self) -> bool {
        self.finished || self.c.grammar().is_accepting(self.state)
    }

    /// Whether an end-of-generation token was taken.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Whether no token is allowed (cannot happen from a reachable state when the vocabulary
    /// holds every single byte: the automata are trimmed to states that can still accept).
    pub fn is_dead(&mut self) -> bool {
        self.mask().iter().all(|&w| w == 0)
    }

    /// Fewest output bytes that complete the text from here (0 when accepting).
    pub fn remaining_bytes(&self) -> u32 {
        if self.finished {
            0
        } else {
            self.c.grammar().distance(self.state)
        }
    }
}
