//! A grammar bound to a vocabulary, shared by every session using that format on that model: it
//! owns the bounded mask cache. [`ConstraintCache`] keeps the compiled ones per model by content.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use crate::error::ConstrainError;
use crate::format::ResponseFormat;
use crate::grammar::{Grammar, State};
use crate::mask::MaskCache;
use crate::vocab::Vocab;

/// Default memory for one constraint's cached masks (about 10,000 states at 49k tokens).
pub const DEFAULT_MASK_CACHE_BYTES: usize = 64 << 20;

/// A grammar over a vocabulary, with its mask cache.
#[derive(Debug)]
pub struct Constraint {
    grammar: Arc<Grammar>,
    vocab: Arc<Vocab>,
    cache: Mutex<MaskCache<State>>,
}

/// Mask cache counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheStats {
    pub hits: u64,
    pub misses: u64,
    pub entries: usize,
    /// The most masks kept.
    pub capacity: usize,
}

impl Constraint {
    /// Binds with the default mask cache ([`DEFAULT_MASK_CACHE_BYTES`]).
    pub fn new(grammar: Arc<Grammar>, vocab: Arc<Vocab>) -> Arc<Constraint> {
        Constraint::with_cache_bytes(grammar, vocab, DEFAULT_MASK_CACHE_BYTES)
    }

    /// Binds keeping at most `bytes` of masks (at least one mask).
    pub fn with_cache_bytes(
        grammar: Arc<Grammar>,
        vocab: Arc<Vocab>,
        bytes: usize,
    ) -> Arc<Constraint> {
        let per_mask = vocab.mask_words().saturating_mul(8).max(1);
        Arc::new(Constraint {
            cache: Mutex::new(MaskCache::new(bytes / per_mask)),
            grammar,
            vocab,
        })
    }

    pub fn grammar(&self) -> &Arc<Grammar> {
        &self.grammar
    }

    pub fn vocab(&self) -> &Arc<Vocab> {
        &self.vocab
    }

    pub fn cache_stats(&self) -> CacheStats {
        let c = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        CacheStats {
            hits: c.hits,
            misses: c.misses,
            entries: c.len(),
            capacity: c.cap(),
        }
    }

    /// Sets in `out` (zeroed by the caller) the bits of the tokens allowed from `s`.
    pub(crate) fn compute(&self, s: State, out: &mut [u64]) {
        self.grammar.walk(s, &self.vocab, out);
        if self.grammar.is_accepting(s) {
            for &e in self.vocab.eos_ids() {
                if let Some(w) = out.get_mut(e as usize / 64) {
                    *w |= 1u64 << (e % 64);
                }
            }
        }
    }

    /// Drops every cached mask.
    pub fn clear_cache(&self) {
        self.cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// The allowed tokens from `s`: cached, or computed outside the lock and cached.
    pub(crate) fn mask(&self, s: State) -> Arc<[u64]> {
        if let Some(m) = self
            .cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&s)
        {
            return m;
        }
        let mut m = vec![0u64; self.vocab.mask_words()];
        self.compute(s, &mut m);
        let m: Arc<[u64]> = Arc::from(m);
        self.cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(s, m.clone());
        m
    }
}

/// Compiled constraints by content key, and the keys oldest first.
type Entries = (HashMap<[u8; 32], Arc<Constraint>>, VecDeque<[u8; 32]>);

/// A model's compiled constraints by format content, at most `max` of them (oldest out first).
#[derive(Debug)]
pub struct ConstraintCache {
    vocab: Arc<Vocab>,
    max: usize,
    mask_cache_bytes: usize,
    inner: Mutex<Entries>,
}

impl ConstraintCache {
    /// Keeps at most `max` constraints (at least one), each with `mask_cache_bytes` of masks.
    pub fn new(vocab: Arc<Vocab>, max: usize, mask_cache_bytes: usize) -> ConstraintCache {
        ConstraintCache {
            vocab,
            max: max.max(1),
            mask_cache_bytes,
            inner: Mutex::new((HashMap::new(), VecDeque::new())),
        }
    }

    pub fn vocab(&self) -> &Arc<Vocab> {
        &self.vocab
    }

    /// The constraint for `f` (`None` for `text`), compiled on first use. Compilation runs outside
    /// the lock and can take milliseconds for a large schema.
    pub fn get(&self, f: &ResponseFormat) -> Result<Option<Arc<Constraint>>, ConstrainError> {
        let Some(key) = Grammar::content_key(f) else {
            return Ok(None);
        };
        if let Some(c) = self.lock().0.get(&key) {
            return Ok(Some(c.clone()));
        }
        let c = Constraint::with_cache_bytes(
            Arc::new(Grammar::compile(f)?),
            self.vocab.clone(),
            self.mask_cache_bytes,
        );
        let mut g = self.lock();
        let (map, order) = &mut *g;
        if let Some(existing) = map.get(&key) {
            return Ok(Some(existing.clone()));
        }
        while map.len() >= self.max {
            match order.pop_front() {
                Some(old) => {
                    map.remove(&old);
                }
                None => break,
            }
        }
        map.insert(key, c.clone());
        order.push_back(key);
        Ok(Some(c))
    }

    /// How many constraints are kept.
    pub fn len(&self) -> usize {
        self.lock().0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
