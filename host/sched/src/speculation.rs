//! Speculative decoding's settings and figures: how a generation drafts ([`Speculate`]: off, or up
//! to `max_draft` tokens from its own context and, where allowed, its isolation group's memory and
//! cached blocks), the per-generation state the engine keeps ([`Speculation`]), and the
//! per-namespace counters (`/stats`, `/metrics`). The engine verifies every draft against the model
//! in its normal step (see `engine::speculate`), so speculation changes speed, never a token.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};

use memoria_kv::draft::{ContextIndex, DraftLength, GroupMemory};
use memoria_kv::{BlockPool, NamespaceId};

/// The most draft tokens a generation may verify in one step.
pub const MAX_DRAFT: usize = 32;
/// The draft length `auto` allows.
pub const DEFAULT_MAX_DRAFT: usize = 8;

/// How one generation drafts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Speculate {
    /// Most draft tokens per step (0: no speculation; at most [`MAX_DRAFT`]).
    pub max_draft: usize,
    /// Also draft from the isolation group's memory of earlier sequences and its blocks in the
    /// pool (off: only from the session's own context, which tells nothing about anyone else's
    /// text through timing).
    pub group: bool,
}

impl Speculate {
    /// No drafting: one token per step.
    pub const OFF: Speculate = Speculate {
        max_draft: 0,
        group: false,
    };

    /// Drafting from the session's context and its group's memory, [`DEFAULT_MAX_DRAFT`] tokens
    /// at most.
    pub const AUTO: Speculate = Speculate {
        max_draft: DEFAULT_MAX_DRAFT,
        group: true,
    };

    /// Whether this generation drafts at all.
    pub fn on(&self) -> bool {
        self.max_draft > 0
    }
}

impl Default for Speculate {
    fn default() -> Self {
        Speculate::AUTO
    }
}

/// One namespace's speculation figures.
#[derive(Debug, Default)]
pub struct SpecCounters {
    /// Draft tokens verified.
    pub drafted: AtomicU64,
    /// Of those, tokens the model's own choice confirmed.
    pub accepted: AtomicU64,
    /// Steps that verified a draft.
    pub passes: AtomicU64,
    /// Tokens those steps produced (accepted drafts plus the token each pass samples).
    pub produced: AtomicU64,
}

/// A plain copy of [`SpecCounters`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SpecSnapshot {
    pub drafted: u64,
    pub accepted: u64,
    pub passes: u64,
    pub produced: u64,
}

impl SpecSnapshot {
    /// Accepted draft tokens per drafted one (0 before any draft).
    pub fn acceptance(&self) -> f64 {
        if self.drafted == 0 {
            0.0
        } else {
            self.accepted as f64 / self.drafted as f64
        }
    }

    /// Tokens produced per verifying pass (0 before any).
    pub fn tokens_per_pass(&self) -> f64 {
        if self.passes == 0 {
            0.0
        } else {
            self.produced as f64 / self.passes as f64
        }
    }
}

impl SpecCounters {
    /// A pass verifying `drafted` tokens begins (it samples at least one token). Counted before
    /// its tokens are sent, as is each acceptance, so a client that has its answer sees them.
    pub(crate) fn start_pass(&self, drafted: usize) {
        self.drafted.fetch_add(drafted as u64, Relaxed);
        self.passes.fetch_add(1, Relaxed);
        self.produced.fetch_add(1, Relaxed);
    }

    /// A draft token was confirmed (and the pass samples one more).
    pub(crate) fn accept(&self) {
        self.accepted.fetch_add(1, Relaxed);
        self.produced.fetch_add(1, Relaxed);
    }

    pub fn snapshot(&self) -> SpecSnapshot {
        SpecSnapshot {
            drafted: self.drafted.load(Relaxed),
            accepted: self.accepted.load(Relaxed),
            passes: self.passes.load(Relaxed),
            produced: self.produced.load(Relaxed),
        }
    }
}

/// Every namespace's speculation counters, created on a namespace's first drafting generation
/// (off the engine step).
#[derive(Debug, Default)]
pub struct SpecStats {
    by_ns: Mutex<BTreeMap<NamespaceId, Arc<SpecCounters>>>,
    /// The engine's figure for what a row past the first costs in a pass (f64 bits).
    row_cost: AtomicU64,
}

impl SpecStats {
    /// What a row past the first costs in a pass, as a fraction of a one-row pass: the figure
    /// draft lengths are weighed with now (measured, or the configured one).
    pub fn row_cost(&self) -> f64 {
        f64::from_bits(self.row_cost.load(Relaxed))
    }

    pub(crate) fn set_row_cost(&self, cost: f64) {
        self.row_cost.store(cost.to_bits(), Relaxed);
    }

    /// The counters of `ns`, created if missing.
    pub(crate) fn of(&self, ns: NamespaceId) -> Arc<SpecCounters> {
        let mut m = self.by_ns.lock().unwrap_or_else(PoisonError::into_inner);
        m.entry(ns).or_default().clone()
    }

    /// Every namespace's figures.
    pub fn snapshot(&self) -> Vec<(NamespaceId, SpecSnapshot)> {
        let m = self.by_ns.lock().unwrap_or_else(PoisonError::into_inner);
        m.iter().map(|(ns, c)| (*ns, c.snapshot())).collect()
    }
}

/// A generation's drafting state, created with the generation (its tables sized then, so a step
/// allocates nothing).
pub(crate) struct Speculation {
    /// The session's tokens so far (computed, pending, and each token sampled), for prompt
    /// lookup.
    pub index: ContextIndex,
    pub length: DraftLength,
    /// The isolation group's memory, when the generation may draft from it.
    pub group: Option<Arc<Mutex<GroupMemory>>>,
    /// The draft group whose resident blocks in the pool the generation may draft from.
    pub pool_group: Option<u64>,
    /// This step's draft.
    pub draft: Vec<u32>,
    pub counters: Arc<SpecCounters>,
}

impl Speculation {
    /// Drafting state for a session whose tokens are `context`, for up to `reach` tokens;
    /// `group` is its draft group (the key of its chain root) and `memory` that group's ring.
    pub fn new(
        context: &[u32],
        reach: usize,
        settings: Speculate,
        group: u64,
        memory: Option<Arc<Mutex<GroupMemory>>>,
        counters: Arc<SpecCounters>,
    ) -> Speculation {
        let max = settings.max_draft.min(MAX_DRAFT);
        let mut index = ContextIndex::new(reach.max(context.len()));
        index.extend(context);
        Speculation {
            index,
            length: DraftLength::new(max),
            group: if settings.group { memory } else { None },
            pool_group: settings.group.then_some(group),
            draft: Vec::with_capacity(max),
            counters,
        }
    }

    /// Fills `self.draft` with up to `max` tokens (the session's own context first, then its
    /// group's memory, then its group's blocks resident in `pool`), as many as pay when a row
    /// costs `row_cost` of a one-row pass; returns how many.
    pub fn propose(&mut self, max: usize, pool: &BlockPool, row_cost: f64) -> usize {
        let want = self.length.for_next_step(row_cost).min(max);
        self.draft.clear();
        if want == 0 {
            return 0;
        }
        if self.index.draft(want, &mut self.draft) == 0
            && let Some(group) = &self.group
        {
            let g = group.lock().unwrap_or_else(PoisonError::into_inner);
            g.draft(self.index.tokens(), want, &mut self.draft);
        }
        if self.draft.is_empty()
            && let Some(group) = self.pool_group
        {
            pool.draft_from_blocks(group, self.index.tokens(), want, &mut self.draft);
        }
        self.draft.len()
    }
}
