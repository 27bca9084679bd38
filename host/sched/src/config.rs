//! Engine configuration: K/V pool shape and budget, step token budget, session limits.

use std::sync::Arc;
use std::time::Duration;

use memoria_kv::KvElem;
use memoria_kv::backing::Backing;

/// How the engine sizes its pool and batches.
#[derive(Clone, Debug, PartialEq)]
pub struct EngineConfig {
    /// Element type of cached K/V (f16 by default, as llama.cpp).
    pub kv_elem: KvElem,
    /// Tokens per K/V block.
    pub block_tokens: usize,
    /// Bytes of K/V the pool may hold.
    pub kv_budget_bytes: usize,
    /// Tokens per forward pass (decode tokens plus prefill chunks).
    pub step_tokens: usize,
    /// Longest context a session may hold (0: the model's training context).
    pub max_context: usize,
    /// Sessions open at once.
    pub max_sessions: usize,
    /// Idle sessions (no running job) are closed after this long.
    pub idle_ttl: Option<Duration>,
    /// Tiers below the hot pool (cold RAM, redb): evicted blocks are demoted to them, prefix
    /// misses promote from them, sealed blocks are written through to disk, and sessions can
    /// be saved and restored. `None`: evicted blocks are dropped.
    pub store: Option<Arc<dyn Backing>>,
    /// The hit rate the cache-sizing advisor sizes for (`[cache] target_hit_rate`, 0 < x < 1).
    pub target_hit_rate: f64,
    /// How many of the most reused prefixes the pool keeps pinned (`[cache] auto_pin`, 0: off).
    pub auto_pin: usize,
    /// Embeddings kept by content (namespace salt and tokens; 0: none).
    pub embed_cache_entries: usize,
    /// Most tokens of embedding work in one step while sessions are decoding (embeddings are
    /// bulk work: they fill what is left of the step budget only up to this, so decoders keep
    /// their pace; with nobody decoding they take the whole budget). At least 1.
    pub embed_step_tokens: usize,
    /// Tokens each isolation group's draft memory keeps for speculative decoding (0: no such
    /// memory; a group's drafts then come from its blocks resident in the pool only).
    pub draft_memory_tokens: usize,
    /// Isolation groups with a draft memory at once (the least recently used one is dropped).
    pub draft_groups: usize,
    /// What a row past the first costs in a forward pass, as a fraction of a one-row pass, when
    /// drafts are sized (`None`: measured from the engine's own passes; a figure makes draft
    /// lengths independent of timing).
    pub draft_row_cost: Option<f64>,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            kv_elem: KvElem::F16,
            block_tokens: 16,
            kv_budget_bytes: 256 << 20,
            step_tokens: 512,
            max_context: 0,
            max_sessions: 4096,
            idle_ttl: Some(Duration::from_secs(600)),
            store: None,
            target_hit_rate: 0.9,
            auto_pin: 0,
            embed_cache_entries: 4096,
            embed_step_tokens: 16,
            draft_memory_tokens: 1 << 15,
            draft_groups: 32,
            draft_row_cost: None,
        }
    }
}
