//! The raw `host.toml`: every section and key the file may contain, decoded strictly (unknown
//! keys are errors that name them). Nothing here is validated beyond types; `config::resolve`
//! merges these values under the command-line flags and checks them (ripgrep's two stages).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use memoria_tenant::NamespaceSpec;
use serde::Deserialize;

/// The whole file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    #[serde(default)]
    pub server: RawServer,
    #[serde(default)]
    pub model: RawModel,
    #[serde(default)]
    pub cache: RawCache,
    #[serde(default)]
    pub store: RawStore,
    /// `[sampling]`: defaults of requests that set none (config/dropin.rs).
    #[serde(default)]
    pub sampling: super::dropin::RawSampling,
    /// `[namespaces.NAME]` tables.
    #[serde(default)]
    pub namespaces: BTreeMap<String, NamespaceSpec>,
}

/// `[server]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawServer {
    pub host: Option<String>,
    pub port: Option<u16>,
    pub api_key: Option<String>,
    pub admin_key: Option<String>,
    pub parallel: Option<usize>,
    pub queue: Option<usize>,
    pub threads: Option<usize>,
    pub max_body_bytes: Option<usize>,
    /// Bytes all request bodies being received may hold at once, MiB.
    pub max_body_memory_mb: Option<usize>,
    pub max_component_bytes: Option<usize>,
    pub components_dir: Option<PathBuf>,
    pub shutdown_timeout_s: Option<u64>,
    pub retry_after_s: Option<u64>,
    pub header_timeout_s: Option<u64>,
    pub body_timeout_s: Option<u64>,
    pub min_body_bytes_per_s: Option<u64>,
    pub max_connections: Option<usize>,
    /// `GET /ui`, the status page (default on).
    pub status_page: Option<bool>,
    pub default_namespace: Option<String>,
    pub state_share: Option<bool>,
    /// Origins whose pages may call the API (config/dropin.rs).
    pub cors_origins: Option<String>,
    /// error, warn, info or debug (config/dropin.rs).
    pub log_level: Option<String>,
}

/// `[model]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawModel {
    pub path: Option<PathBuf>,
    pub name: Option<String>,
    /// More names requests may use for the model (`model` field), besides its id.
    pub aliases: Option<Vec<String>>,
    pub context: Option<usize>,
    pub chat_template: Option<String>,
    /// Refuse requests naming another model (404) instead of answering them.
    pub strict_name: Option<bool>,
    /// Free labels `/v1/models` lists.
    pub tags: Option<Vec<String>>,
}

/// `[cache]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCache {
    pub block_tokens: Option<usize>,
    pub dtype: Option<String>,
    pub budget_mb: Option<usize>,
    pub step_tokens: Option<usize>,
    pub max_sessions: Option<usize>,
    pub idle_ttl_s: Option<u64>,
    pub embed_cache_entries: Option<usize>,
    pub embed_step_tokens: Option<usize>,
    /// The advisor's target hit rate (config/cache.rs).
    pub target_hit_rate: Option<f64>,
    /// Most reused prefixes kept pinned (config/cache.rs).
    pub auto_pin: Option<usize>,
}

/// `[store]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawStore {
    pub path: Option<PathBuf>,
    pub max_disk_mb: Option<u64>,
    pub max_saves_mb: Option<u64>,
    /// The compressed RAM tier's budget (0: no cold tier).
    pub cold_mb: Option<u64>,
    /// redb's page cache.
    pub page_cache_mb: Option<u64>,
    /// Block bytes that may wait for the disk writer.
    pub write_queue_mb: Option<u64>,
    /// `[store.remote]` (config/remote.rs).
    pub remote: Option<super::remote::RawRemote>,
}

impl RawConfig {
    /// Reads and decodes `path`; errors name the file, the key and why.
    pub fn load(path: &Path) -> anyhow::Result<RawConfig> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the config file {}", path.display()))?;
        RawConfig::parse(&text).with_context(|| format!("in the config file {}", path.display()))
    }

    /// Decodes TOML text.
    pub fn parse(text: &str) -> anyhow::Result<RawConfig> {
        toml::from_str(text).map_err(|e| anyhow::anyhow!("{e}"))
    }
}
