//! Prefix preload at start-up: texts from configuration, per namespace, prefilled and pinned
//! so their first requests hit the cache (with a store, blocks already on disk are promoted
//! instead of recomputed). Invariant: texts are tokenized exactly as requests are (BOS per the
//! model, special tokens parsed), so their blocks match the prompts that start with them.

use std::time::Duration;

use memoria_kv::{NamespaceId, PinLevel};

use crate::EngineError;
use crate::handle::EngineHandle;
use crate::session::WarmInfo;

/// Prefixes to warm for one namespace.
#[derive(Clone, Debug)]
pub struct Preload {
    /// The namespace, as registered with the engine.
    pub ns: NamespaceId,
    pub texts: Vec<String>,
    pub pin: PinLevel,
    /// How long the pin lasts (`None`: until unpinned).
    pub ttl: Option<Duration>,
}

/// Warms and pins every text of every entry, in order; returns one [`WarmInfo`] per text.
pub async fn preload(
    engine: &EngineHandle,
    entries: &[Preload],
) -> Result<Vec<WarmInfo>, EngineError> {
    let mut out = Vec::new();
    for e in entries {
        for text in &e.texts {
            let tokens = engine.tokenizer().encode(text, true, true);
            out.push(engine.warm(e.ns, tokens, e.pin, e.ttl).await?);
        }
    }
    Ok(out)
}
