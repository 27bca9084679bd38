//! `memoria serve` configuration in two stages: the raw `host.toml` ([`file`]) and the command
//! line are merged (flags win, then the file, then defaults) and validated into a
//! [`ServeConfig`]; errors name the key (or flag) to fix and why. Namespaces are resolved into
//! [`Tenants`](memoria_tenant::Tenants) here too (`tenancy`), with the default namespace added
//! when the file does not define it, so a bare `memoria serve` is a single-user host with one
//! shared namespace. `[server]` listener keys are checked in `server`, `[store]` budgets in
//! `store`.

pub mod cache;
pub mod dropin;
pub mod events;
pub mod file;
pub mod remote;
mod server;
mod store;
mod tenancy;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::bail;
use memoria_kv::KvElem;
use memoria_tenant::NamespaceSpec;

pub use file::RawConfig;
use server::{connection_limits, host_ip};
pub use store::StoreRam;
use store::{store_budgets, store_ram};
pub use tenancy::{namespaces, short_key_warnings, tenants};

/// Command-line values that override the file (None: not given).
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    pub model: Option<PathBuf>,
    pub context: Option<usize>,
    pub parallel: Option<usize>,
    pub queue: Option<usize>,
    pub host: Option<String>,
    pub port: Option<u16>,
    pub state_share: bool,
    pub store: Option<PathBuf>,
    pub api_key: Option<String>,
    pub admin_key: Option<String>,
    pub threads: Option<usize>,
    pub cache_type: Option<KvElem>,
    /// `--chat-template`: a built-in template name (or Jinja source).
    pub chat_template: Option<String>,
    /// `--remote URL`: the shared Valkey/Redis tier.
    pub remote: Option<String>,
    /// `--remote-cluster URL,...`: the shared tier on a Redis Cluster (its seed nodes).
    pub remote_cluster: Vec<String>,
    /// `--remote-key-file PATH`: the key remote values are authenticated with.
    pub remote_key_file: Option<PathBuf>,
    /// llama-server's flags (sampling defaults, names, CORS, logging).
    pub dropin: crate::cmd::serve_flags::DropInArgs,
}

/// A validated server configuration.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    pub addr: SocketAddr,
    /// More addresses to listen on, same port (`--host a,b`).
    pub more_addrs: Vec<SocketAddr>,
    /// None: the embedded demo model.
    pub model: Option<PathBuf>,
    pub model_name: Option<String>,
    /// `[model] aliases`: more names requests may give in `model`.
    pub model_aliases: Vec<String>,
    /// 0: the model's training context.
    pub context: usize,
    /// A built-in template name (`gemma`, `chatml`, ...) or Jinja source; None: the model's,
    /// else its architecture's default.
    pub chat_template: Option<String>,
    pub threads: usize,
    pub admin_key: Option<String>,
    pub max_body_bytes: usize,
    /// Bytes all request bodies being received may hold at once.
    pub max_body_memory: usize,
    /// Largest component the admin API accepts.
    pub max_component_bytes: usize,
    /// Where deployed components are kept (default: `<store>/components`).
    pub components_dir: Option<PathBuf>,
    pub shutdown_timeout: Duration,
    pub retry_after_s: u64,
    /// Per request head (and keep-alive idle) read timeout.
    pub header_timeout: Duration,
    /// Per request body: base time, plus a second per `min_body_rate` bytes received.
    pub body_timeout: Duration,
    pub min_body_rate: u64,
    pub max_connections: usize,
    /// Whether `GET /ui` serves the status page.
    pub status_page: bool,
    pub default_namespace: String,
    pub kv_elem: KvElem,
    pub block_tokens: usize,
    /// None: sized from the model, the context and the namespaces' concurrency.
    pub kv_budget_bytes: Option<usize>,
    pub step_tokens: usize,
    pub max_sessions: usize,
    pub idle_ttl: Option<Duration>,
    pub embed_cache_entries: usize,
    /// Tokens of embedding work per step while sessions decode.
    pub embed_step_tokens: usize,
    pub store: Option<PathBuf>,
    /// `[store] max_disk_mb` in bytes (None: a tenth of the free space at start).
    pub store_max_disk_bytes: Option<u64>,
    /// `[store] cold_mb`, `page_cache_mb`, `write_queue_mb` in bytes (None: the defaults).
    pub store_ram: StoreRam,
    /// `[store] max_saves_mb` in bytes (None: a quarter of the disk budget).
    pub store_max_saves_bytes: Option<u64>,
    /// `[store.remote]` / `--remote`: the shared tier (None: none).
    pub remote: Option<memoria_store::RemoteOptions>,
    /// `[store.remote] events = true`: host events (None: off).
    pub events: Option<events::EventsSettings>,
    /// Namespaces in id order (the default one first).
    pub namespaces: Vec<(String, NamespaceSpec)>,
    /// `[cache] target_hit_rate` (see `cache`).
    pub target_hit_rate: f64,
    /// `[cache] auto_pin` (see `cache`).
    pub auto_pin: usize,
    /// llama-server's settings: sampling defaults, CORS, log level, model names.
    pub dropin: dropin::DropIn,
}

/// Merges `raw` under `o` and validates.
pub fn resolve(raw: RawConfig, o: &Overrides) -> anyhow::Result<ServeConfig> {
    let s = &raw.server;
    let host = o
        .host
        .clone()
        .or(s.host.clone())
        .unwrap_or_else(|| "127.0.0.1".into());
    let mut ips = host
        .split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .map(host_ip)
        .collect::<anyhow::Result<Vec<IpAddr>>>()?;
    if ips.is_empty() {
        bail!("server.host / --host: no address given");
    }
    let ip = ips.remove(0);
    let port = o.port.or(s.port).unwrap_or(8080);
    let c = &raw.cache;
    let kv_elem = match (o.cache_type, c.dtype.as_deref()) {
        (Some(e), _) => e,
        (None, None) => KvElem::F16,
        (None, Some(d)) => {
            crate::cmd::run::parse_kv(d).map_err(|e| anyhow::anyhow!("cache.dtype: {e}"))?
        }
    };
    let block_tokens = c.block_tokens.unwrap_or(16);
    if !(1..=memoria_kv::MAX_BLOCK_TOKENS).contains(&block_tokens) {
        bail!(
            "cache.block_tokens = {block_tokens}: use 1 to {}",
            memoria_kv::MAX_BLOCK_TOKENS
        );
    }
    in_range("cache.step_tokens", c.step_tokens, 1, 1 << 16)?;
    in_range("cache.embed_step_tokens", c.embed_step_tokens, 1, 1 << 16)?;
    in_range("cache.max_sessions", c.max_sessions, 1, 1 << 20)?;
    in_range(
        "cache.embed_cache_entries",
        c.embed_cache_entries,
        0,
        1 << 24,
    )?;
    in_range("cache.idle_ttl_s", c.idle_ttl_s, 0, 366 * 86_400)?;
    in_range("server.max_body_bytes", s.max_body_bytes, 1024, 1 << 30)?;
    in_range(
        "server.max_component_bytes",
        s.max_component_bytes,
        1024,
        1 << 30,
    )?;
    in_range("cache.budget_mb", c.budget_mb, 1, 1 << 30)?;
    // Defaults of the values checked above.
    let step_tokens = c.step_tokens.unwrap_or(512);
    let embed_step_tokens = c.embed_step_tokens.unwrap_or(16);
    let max_sessions = c.max_sessions.unwrap_or(4096);
    let max_body_bytes = s.max_body_bytes.unwrap_or(4 << 20);
    let max_component_bytes = s.max_component_bytes.unwrap_or(64 << 20);
    in_range(
        "server.max_body_memory_mb",
        s.max_body_memory_mb,
        1,
        1 << 20,
    )?;
    let max_body_memory = match s.max_body_memory_mb {
        Some(mb) => mb << 20,
        None => (64usize << 20)
            .max(max_body_bytes.saturating_mul(4))
            .max(max_component_bytes),
    };
    if max_body_memory < max_body_bytes.max(max_component_bytes) {
        bail!(
            "server.max_body_memory_mb = {}: at least server.max_body_bytes and server.max_component_bytes ({} MiB), or no body of that size is ever accepted",
            max_body_memory >> 20,
            max_body_bytes.max(max_component_bytes).div_ceil(1 << 20)
        );
    }
    let (header_timeout, body_timeout, min_body_rate, max_connections) = connection_limits(s)?;
    let store = o.store.clone().or(raw.store.path.clone());
    let (store_max_disk_bytes, store_max_saves_bytes) = store_budgets(&raw.store)?;
    let store_ram = store_ram(&raw.store)?;
    let remote = remote::resolve(
        raw.store.remote.as_ref(),
        o.remote.as_deref(),
        &o.remote_cluster,
        o.remote_key_file.as_deref(),
    )?;
    let events = events::resolve(raw.store.remote.as_ref(), remote.as_ref())?;
    let components_dir = s
        .components_dir
        .clone()
        .or_else(|| store.as_ref().map(|d| d.join("components")));
    let slots = memoria_tenant::MAX_SLOTS;
    in_range("server.parallel / -np", o.parallel.or(s.parallel), 1, slots)?;
    in_range(
        "server.queue / --queue",
        o.queue.or(s.queue),
        0,
        memoria_tenant::MAX_QUEUE,
    )?;
    in_range(
        "server.threads / -t",
        o.threads.or(s.threads),
        0,
        crate::cmd::MAX_THREADS as u64,
    )?;
    in_range(
        "model.context / -c",
        o.context.or(raw.model.context),
        0,
        MAX_CONTEXT,
    )?;
    in_range("server.shutdown_timeout_s", s.shutdown_timeout_s, 0, 3600)?;
    in_range("server.retry_after_s", s.retry_after_s, 0, 3600)?;
    let admin_key = o.admin_key.clone().or(s.admin_key.clone());
    if admin_key.as_ref().is_some_and(|k| k.trim().is_empty()) {
        bail!("server.admin_key / --admin-key: the key is empty");
    }
    let default_namespace = s
        .default_namespace
        .clone()
        .unwrap_or_else(|| "shared".into());
    let namespaces = namespaces(&raw, o, &default_namespace, None)?;
    let dropin = dropin::resolve(&raw.sampling, &raw.server, &raw.model, &o.dropin)?;
    let mut model_aliases = raw.model.aliases.clone().unwrap_or_default();
    let mut model_name = raw.model.name.clone();
    if let Some((first, rest)) = dropin.aliases.split_first() {
        model_name = Some(first.clone());
        model_aliases.extend(rest.iter().cloned());
    }
    if model_aliases
        .iter()
        .any(|a| a.trim().is_empty() || a.len() > 256)
    {
        bail!("model.aliases: each alias needs 1-256 characters, not only spaces");
    }
    Ok(ServeConfig {
        addr: SocketAddr::new(ip, port),
        more_addrs: ips
            .into_iter()
            .map(|ip| SocketAddr::new(ip, port))
            .collect(),
        model: o.model.clone().or(raw.model.path.clone()),
        model_name,
        model_aliases,
        context: o.context.or(raw.model.context).unwrap_or(0),
        chat_template: o.chat_template.clone().or(raw.model.chat_template.clone()),
        threads: o.threads.or(s.threads).unwrap_or(0),
        admin_key,
        max_body_bytes,
        max_body_memory,
        max_component_bytes,
        components_dir,
        shutdown_timeout: Duration::from_secs(s.shutdown_timeout_s.unwrap_or(30)),
        retry_after_s: s.retry_after_s.unwrap_or(1).max(1),
        header_timeout,
        body_timeout,
        min_body_rate,
        max_connections,
        status_page: s.status_page.unwrap_or(true),
        default_namespace,
        kv_elem,
        block_tokens,
        kv_budget_bytes: c.budget_mb.map(|m| m.saturating_mul(1 << 20)),
        step_tokens,
        max_sessions,
        idle_ttl: match c.idle_ttl_s {
            Some(0) => None,
            Some(s) => Some(Duration::from_secs(s)),
            None => Some(Duration::from_secs(600)),
        },
        embed_cache_entries: c.embed_cache_entries.unwrap_or(4096),
        embed_step_tokens,
        store,
        store_max_disk_bytes,
        store_ram,
        store_max_saves_bytes,
        remote,
        events,
        namespaces,
        target_hit_rate: cache::target_hit_rate(c.target_hit_rate)?,
        auto_pin: cache::auto_pin(c.auto_pin)?,
        dropin,
    })
}

/// Most tokens `-c` / `model.context` may give a request (2^24).
pub const MAX_CONTEXT: u64 = 1 << 24;

/// Checks an optional number against `lo..=hi`; the error names the key and the range.
fn in_range<T: Copy + std::fmt::Display + TryInto<u64>>(
    key: &str,
    v: Option<T>,
    lo: u64,
    hi: u64,
) -> anyhow::Result<()> {
    match v {
        Some(x) if !x.try_into().is_ok_and(|n: u64| (lo..=hi).contains(&n)) => {
            bail!("{key} = {x}: use {lo} to {hi}")
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests;
