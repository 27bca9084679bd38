//! Host-wide runtime settings: where compiled components are cached and deployed ones kept, the
//! chat template guests get from `apply-chat-template`, the epoch tick, spare instance slots and
//! each namespace's CPU share.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use memoria_model::chat::ChatTemplate;

use memoria_tenant::HitPad;

use crate::fair::CpuShare;

/// How the runtime is set up; one per host.
#[derive(Clone, Debug)]
pub struct RuntimeConfig {
    /// Folder for compiled components (`<blake3 of wasm>.cwasm`); `None`: compile at every start.
    pub cache_dir: Option<PathBuf>,
    /// Template for `models.apply-chat-template` (None: ChatML).
    pub chat_template: Option<Arc<ChatTemplate>>,
    /// Model id reported by `models.list-models`.
    pub model_id: String,
    /// Period of the epoch ticker; wall-time limits are rounded up to it.
    pub epoch_tick: Duration,
    /// The engine was started with a persistent store (`EngineConfig::store` with a disk or a
    /// remote tier): `session.save` / `session.restore` then go through the engine's named
    /// sessions, which survive restarts (disk) and are restored on any host sharing the remote.
    /// Otherwise saved sessions live in this process only.
    pub durable_sessions: bool,
    /// Folder where components deployed through the admin API are kept (and read back at
    /// start); `None`: deployments last until the process exits.
    pub components_dir: Option<PathBuf>,
    /// Instance slots kept beyond the configured namespaces' `max_instances`, for namespaces a
    /// reload adds.
    pub spare_instances: u32,
    /// CPU each namespace's guests may use before they are put to sleep at their epoch
    /// callbacks (checked at start); `None`: guest CPU is counted, never throttled.
    pub cpu_share: Option<CpuShare>,
    /// The first-token padding estimate of `hit_timing = "pad"` namespaces, shared with the
    /// OpenAI endpoints (one engine computes both).
    pub hit_pad: Arc<HitPad>,
    /// The same for embeddings (their own estimate: a vector costs a forward pass over its
    /// tokens), shared with the OpenAI endpoints like the engine's embedding cache.
    pub embed_pad: Arc<HitPad>,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            cache_dir: None,
            chat_template: None,
            model_id: "memoria".into(),
            epoch_tick: Duration::from_millis(10),
            durable_sessions: false,
            components_dir: None,
            spare_instances: 32,
            cpu_share: Some(CpuShare::default()),
            hit_pad: Arc::default(),
            embed_pad: Arc::default(),
        }
    }
}
