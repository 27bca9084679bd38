//! Embeddings through the engine, from any caller (the OpenAI API, guests' `embeddings`): each
//! input is looked up in the engine's [`EmbedCache`] by its namespace's salt (from the registry)
//! and tokens, and the
//! misses are sent to the engine as embedding jobs, [`EMBED_WAVE`] at a time, so their chunks
//! share steps with each other and with every session instead of running beside the engine.

use std::sync::Arc;

use memoria_kv::NamespaceId;

use super::EngineHandle;
use crate::EngineError;
use crate::embed_cache::{EmbedCache, key};
use crate::engine::{Command, Reply};

/// Inputs of one call in the engine at once: enough to fill steps, few enough that one
/// request's embeddings cannot take every session slot from other callers.
pub const EMBED_WAVE: usize = 16;

/// One input's embedding.
#[derive(Clone, Debug, PartialEq)]
pub struct Embedded {
    /// `[n_embd]`, L2-normalised.
    pub vector: Arc<Vec<f32>>,
    /// Whether it came from the cache (nothing computed).
    pub cached: bool,
}

/// Tokens of `inputs` whose embeddings in `out` (the answer for them) were computed, not cached.
pub fn computed_tokens(inputs: &[Vec<u32>], out: &[Embedded]) -> usize {
    inputs
        .iter()
        .zip(out)
        .filter(|(_, e)| !e.cached)
        .map(|(t, _)| t.len())
        .sum()
}

impl EngineHandle {
    /// The embeddings of `inputs` (each non-empty, within the context limit, in the
    /// vocabulary) in `ns`, whose cache entries are keyed with its registered salt, in input
    /// order.
    pub async fn embed(
        &self,
        ns: NamespaceId,
        inputs: &[Vec<u32>],
    ) -> Result<Vec<Embedded>, EngineError> {
        let salt = self.salt(ns)?;
        let keys: Vec<_> = inputs.iter().map(|t| key(&salt, t)).collect();
        let mut out: Vec<Option<Embedded>> =
            keys.iter().map(|k| self.cached_embedding(k)).collect();
        let misses: Vec<usize> = (0..inputs.len()).filter(|&i| out[i].is_none()).collect();
        for wave in misses.chunks(EMBED_WAVE) {
            let mut waiting = Vec::with_capacity(wave.len());
            for &i in wave {
                // An earlier wave may have computed the same input.
                if let Some(hit) = self.cached_embedding(&keys[i]) {
                    out[i] = Some(hit);
                    continue;
                }
                let (reply, rx) = Reply::channel("embed");
                let tokens = inputs[i].clone();
                self.tx
                    .send(Command::Embed { ns, tokens, reply })
                    .map_err(|_| EngineError::Stopped)?;
                waiting.push((i, rx));
            }
            for (i, rx) in waiting {
                let vector = Arc::new(rx.await.map_err(|_| EngineError::Stopped)??);
                self.embeddings.put(keys[i], vector.clone());
                out[i] = Some(Embedded {
                    vector,
                    cached: false,
                });
            }
        }
        out.into_iter()
            .map(|e| e.ok_or_else(|| EngineError::Internal("an embedding went missing".into())))
            .collect()
    }

    /// The engine's embedding cache (for its figures).
    pub fn embedding_cache(&self) -> &EmbedCache {
        &self.embeddings
    }

    fn cached_embedding(&self, k: &crate::embed_cache::EmbedKey) -> Option<Embedded> {
        self.embeddings.get(k).map(|vector| Embedded {
            vector,
            cached: true,
        })
    }
}
