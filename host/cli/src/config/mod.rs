//! `memoria serve` configuration in two stages: the raw `host.toml` ([`file`]) and the command
//! line are merged (flags win, then the file, then defaults) and validated into a
//! [`ServeConfig`]; errors name the key (or flag) to fix and why. Namespaces are resolved into
//! [`Tenants`] here too, with the default namespace added when the file does not define it, so
//! a bare `memoria serve` is a single-user host with one shared namespace.

pub mod cache;
pub mod dropin;
pub mod events;
pub mod file;
pub mod remote;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use memoria_kv::KvElem;
use memoria_tenant::{Isolation, NamespaceSpec, Tenants};

pub use file::RawConfig;

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

/// The address `--host` names: an IP address, or a name such as `localhost` (its first
/// address).
fn host_ip(host: &str) -> anyhow::Result<IpAddr> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(ip);
    }
    let bad = || {
        format!(
            "server.host / --host: {host:?} is neither an IP address (e.g. 127.0.0.1 or 0.0.0.0) nor a name this machine resolves"
        )
    };
    if host.eq_ignore_ascii_case("localhost") {
        return Ok(IpAddr::from([127, 0, 0, 1]));
    }
    use std::net::ToSocketAddrs;
    let mut addrs = (host, 0u16).to_socket_addrs().with_context(bad)?;
    addrs
        .next()
        .map(|a| a.ip())
        .ok_or_else(|| anyhow::anyhow!(bad()))
}

/// `[server] header_timeout_s`, `body_timeout_s`, `min_body_bytes_per_s` and
/// `max_connections`, checked.
fn connection_limits(s: &file::RawServer) -> anyhow::Result<(Duration, Duration, u64, usize)> {
    const MAX_TIMEOUT_S: u64 = 3600;
    let mut secs = [30u64; 2];
    for (i, (key, v)) in [
        ("header_timeout_s", s.header_timeout_s),
        ("body_timeout_s", s.body_timeout_s),
    ]
    .into_iter()
    .enumerate()
    {
        if let Some(t) = v {
            if !(1..=MAX_TIMEOUT_S).contains(&t) {
                bail!("server.{key} = {t}: use 1 to {MAX_TIMEOUT_S}");
            }
            secs[i] = t;
        }
    }
    let rate = s.min_body_bytes_per_s.unwrap_or(1024);
    if rate == 0 {
        bail!("server.min_body_bytes_per_s: must be at least 1");
    }
    let max_connections = s.max_connections.unwrap_or(1024);
    if !(1..=1 << 20).contains(&max_connections) {
        bail!(
            "server.max_connections = {max_connections}: use 1 to {}",
            1 << 20
        );
    }
    Ok((
        Duration::from_secs(secs[0]),
        Duration::from_secs(secs[1]),
        rate,
        max_connections,
    ))
}

/// `[store] max_disk_mb` and `max_saves_mb`, in bytes, checked.
fn store_budgets(s: &file::RawStore) -> anyhow::Result<(Option<u64>, Option<u64>)> {
    const MAX_MB: u64 = 1 << 40;
    // The store file cannot be held under this (its own tables, and redb grows it by doubling).
    const MIN_DISK_MB: u64 = memoria_store::disk::budget::MIN_BUDGET >> 20;
    if let Some(mb) = s.max_disk_mb
        && !(MIN_DISK_MB..=MAX_MB).contains(&mb)
    {
        bail!(
            "store.max_disk_mb = {mb}: use {MIN_DISK_MB} to {MAX_MB} (the store file cannot be \
             held under {MIN_DISK_MB} MiB)"
        );
    }
    if let Some(mb) = s.max_saves_mb
        && !(1..=MAX_MB).contains(&mb)
    {
        bail!("store.max_saves_mb = {mb}: use 1 to {MAX_MB}");
    }
    if let (Some(disk), Some(saves)) = (s.max_disk_mb, s.max_saves_mb)
        && saves.saturating_mul(2) > disk
    {
        bail!("store.max_saves_mb = {saves}: at most half of store.max_disk_mb ({disk})");
    }
    Ok((
        s.max_disk_mb.map(|m| m << 20),
        s.max_saves_mb.map(|m| m << 20),
    ))
}

/// The store's RAM budgets from `[store]`, in bytes (None: the defaults).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreRam {
    pub cold_bytes: Option<u64>,
    pub page_cache_bytes: Option<u64>,
    pub write_queue_bytes: Option<u64>,
}

/// `[store] cold_mb` (0 turns the cold tier off), `page_cache_mb` and `write_queue_mb`, checked.
fn store_ram(s: &file::RawStore) -> anyhow::Result<StoreRam> {
    const MAX_MB: u64 = 1 << 24;
    for (key, v, min) in [
        ("cold_mb", s.cold_mb, 0),
        ("page_cache_mb", s.page_cache_mb, 1),
        ("write_queue_mb", s.write_queue_mb, 1),
    ] {
        if let Some(mb) = v
            && !(min..=MAX_MB).contains(&mb)
        {
            bail!("store.{key} = {mb}: use {min} to {MAX_MB}");
        }
    }
    Ok(StoreRam {
        cold_bytes: s.cold_mb.map(|m| m << 20),
        page_cache_bytes: s.page_cache_mb.map(|m| m << 20),
        write_queue_bytes: s.write_queue_mb.map(|m| m << 20),
    })
}

/// The namespaces in id order: `previous` names first (so a reload keeps ids), then the
/// default namespace, then the rest by name. Flags apply to the default namespace.
pub fn namespaces(
    raw: &RawConfig,
    o: &Overrides,
    default: &str,
    previous: Option<&[String]>,
) -> anyhow::Result<Vec<(String, NamespaceSpec)>> {
    let mut specs = raw.namespaces.clone();
    let configured = specs.contains_key(default);
    let mut d = match specs.remove(default) {
        Some(spec) => spec,
        None => {
            let mut spec: NamespaceSpec = toml::from_str("").context("default namespace")?;
            spec.isolation = Isolation::Shared;
            if let Some(n) = raw.server.parallel {
                spec.limits.max_concurrent = n;
            }
            if let Some(q) = raw.server.queue {
                spec.limits.max_queue = q;
            }
            spec
        }
    };
    if let Some(n) = o.parallel {
        d.limits.max_concurrent = n;
    }
    if let Some(q) = o.queue {
        d.limits.max_queue = q;
    }
    if configured && raw.server.parallel.is_some() {
        bail!(
            "server.parallel: set namespaces.{default}.limits.max_concurrent instead, since [namespaces.{default}] is defined"
        );
    }
    if configured && raw.server.queue.is_some() {
        bail!(
            "server.queue: set namespaces.{default}.limits.max_queue instead, since [namespaces.{default}] is defined"
        );
    }
    for key in o.api_key.iter().chain(raw.server.api_key.iter()) {
        if !d.api_keys.contains(key) {
            d.api_keys.push(key.clone());
        }
    }
    let mut all: Vec<(String, NamespaceSpec)> = Vec::with_capacity(specs.len() + 1);
    let mut rest: Vec<(String, NamespaceSpec)> = vec![(default.to_string(), d)];
    rest.extend(specs);
    if let Some(prev) = previous {
        for name in prev {
            if let Some(i) = rest.iter().position(|(n, _)| n == name) {
                all.push(rest.remove(i));
            }
        }
    }
    all.extend(rest);
    let state_share = o.state_share || raw.server.state_share.unwrap_or(false);
    if state_share {
        for (_, spec) in &mut all {
            spec.isolation = Isolation::Shared;
        }
    }
    Ok(all)
}

/// Warnings for keys shorter than 8 characters (accepted, as llama-server accepts them, but
/// easy to guess).
pub fn short_key_warnings(cfg: &ServeConfig) -> Vec<String> {
    const SHORT: usize = 8;
    let mut out = Vec::new();
    if cfg.admin_key.as_ref().is_some_and(|k| k.len() < SHORT) {
        out.push(format!(
            "the admin key has fewer than {SHORT} characters: it is easy to guess"
        ));
    }
    for (name, spec) in &cfg.namespaces {
        if spec.api_keys.iter().any(|k| k.len() < SHORT) {
            out.push(format!(
                "namespace {name} has an API key of fewer than {SHORT} characters: it is easy to guess"
            ));
        }
    }
    out
}

/// Validates namespaces into the registry; with a remote tier, their salts are derived from
/// its key as well as their names (see `memoria_tenant::Isolation`).
pub fn tenants(
    specs: Vec<(String, NamespaceSpec)>,
    remote: Option<&memoria_store::RemoteOptions>,
) -> anyhow::Result<Tenants> {
    let secret = remote
        .and_then(|r| r.auth.as_ref())
        .map(|k| k.salt_secret());
    Tenants::new(specs)
        .map(|t| t.with_salt_secret(secret))
        .map_err(|e| anyhow::anyhow!("{e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_template_flag_wins_over_the_file() {
        let raw = || RawConfig::parse("[model]\nchat_template = \"gemma\"\n").expect("parses");
        let cfg = resolve(raw(), &Overrides::default()).expect("valid");
        assert_eq!(cfg.chat_template.as_deref(), Some("gemma"));
        let o = Overrides {
            chat_template: Some("llama3".into()),
            ..Overrides::default()
        };
        let cfg = resolve(raw(), &o).expect("valid");
        assert_eq!(cfg.chat_template.as_deref(), Some("llama3"));
        let cfg = resolve(RawConfig::default(), &Overrides::default()).expect("valid");
        assert_eq!(cfg.chat_template, None);
    }

    #[test]
    fn config_numbers_that_would_wrap_or_stop_the_server_are_refused_naming_key_and_range() {
        let with = |o: Overrides| resolve(RawConfig::default(), &o).map(|_| ());
        let e = with(Overrides {
            context: Some(usize::MAX),
            parallel: Some(32),
            ..Overrides::default()
        })
        .expect_err("-c past 2^24");
        assert!(
            e.to_string().contains("model.context / -c") && e.to_string().contains("0 to 16777216"),
            "{e}"
        );
        let e = with(Overrides {
            threads: Some(100_000),
            ..Overrides::default()
        })
        .expect_err("-t 100000");
        assert!(e.to_string().contains("server.threads / -t"), "{e}");
        let e = with(Overrides {
            parallel: Some(1 << 20),
            ..Overrides::default()
        })
        .expect_err("-np");
        assert!(e.to_string().contains("use 1 to 65536"), "{e}");
        for (text, key) in [
            ("[server]\nthreads = 4294967296\n", "server.threads"),
            ("[server]\nqueue = 18446744073709551615\n", "server.queue"),
            (
                "[server]\nretry_after_s = 18446744073709551615\n",
                "server.retry_after_s",
            ),
            (
                "[server]\nmax_body_bytes = 18446744073709551615\n",
                "server.max_body_bytes",
            ),
            (
                "[cache]\nidle_ttl_s = 18446744073709551615\n",
                "cache.idle_ttl_s",
            ),
            ("[cache]\nstep_tokens = 0\n", "cache.step_tokens"),
            ("[model]\ncontext = 18446744073709551615\n", "model.context"),
        ] {
            let raw = RawConfig::parse(text).expect(text);
            let e = resolve(raw, &Overrides::default()).expect_err(text);
            assert!(
                e.to_string().contains(key) && e.to_string().contains(" to "),
                "{text}: {e}"
            );
        }
        // Limits of namespaces: the same rules at start-up and through /admin/reload (both
        // build the registry with `tenants`).
        let raw = RawConfig::parse(
            "[namespaces.g]\nisolation = \"isolated\"\n[namespaces.g.limits]\nmax_instances = 9223372036854775807\n",
        )
        .expect("parses");
        let cfg = resolve(raw, &Overrides::default()).expect("resolves");
        let Err(e) = tenants(cfg.namespaces, None) else {
            panic!("max_instances past its range is refused");
        };
        assert!(
            e.to_string().contains("namespaces.g.limits.max_instances"),
            "{e}"
        );
    }

    #[test]
    fn unknown_keys_and_bad_values_are_named() {
        let e = RawConfig::parse("[server]\nprot = 1\n").expect_err("typo");
        assert!(e.to_string().contains("prot"), "{e}");
        let e = RawConfig::parse("[cache]\nblock_tokens = \"x\"\n").expect_err("type");
        assert!(e.to_string().contains("block_tokens"), "{e}");
        let raw = RawConfig::parse("[cache]\nblock_tokens = 100000\n").expect("parses");
        let e = resolve(raw, &Overrides::default()).expect_err("range");
        assert!(e.to_string().contains("cache.block_tokens"), "{e}");
        let two = Overrides {
            host: Some("127.0.0.1, ::1".into()),
            ..Overrides::default()
        };
        let cfg = resolve(RawConfig::default(), &two).expect("two hosts");
        assert_eq!(cfg.addr.ip().to_string(), "127.0.0.1");
        assert_eq!(cfg.more_addrs.len(), 1);
        assert_eq!(cfg.more_addrs[0].port(), cfg.addr.port());
        let raw = RawConfig::parse("[server]\nhost = \"localhost:1\"\n").expect("parses");
        assert!(
            resolve(raw, &Overrides::default())
                .expect_err("host")
                .to_string()
                .contains("server.host")
        );
    }

    #[test]
    fn connection_limits_and_budgets_are_checked() {
        let cfg = resolve(RawConfig::default(), &Overrides::default()).expect("defaults");
        assert_eq!(cfg.header_timeout, Duration::from_secs(30));
        assert_eq!(cfg.body_timeout, Duration::from_secs(30));
        assert_eq!(cfg.min_body_rate, 1024);
        assert_eq!(cfg.max_connections, 1024);
        assert!(cfg.status_page, "the status page is on by default");
        let off = RawConfig::parse("[server]\nstatus_page = false\n").expect("parses");
        assert!(
            !resolve(off, &Overrides::default())
                .expect("valid")
                .status_page
        );
        let raw = RawConfig::parse(
            "[server]\nheader_timeout_s = 2\nbody_timeout_s = 1\nmin_body_bytes_per_s = 10\nmax_connections = 4\n",
        )
        .expect("parses");
        let cfg = resolve(raw, &Overrides::default()).expect("valid");
        assert_eq!(
            (
                cfg.header_timeout,
                cfg.body_timeout,
                cfg.min_body_rate,
                cfg.max_connections
            ),
            (Duration::from_secs(2), Duration::from_secs(1), 10, 4)
        );
        for (text, key) in [
            (
                "[server]\nheader_timeout_s = 0\n",
                "server.header_timeout_s",
            ),
            (
                "[server]\nbody_timeout_s = 18446744073709551615\n",
                "server.body_timeout_s",
            ),
            (
                "[server]\nmin_body_bytes_per_s = 0\n",
                "server.min_body_bytes_per_s",
            ),
            ("[server]\nmax_connections = 0\n", "server.max_connections"),
            // Was an unchecked `<< 20` that wrapped to a tiny or zero budget.
            ("[cache]\nbudget_mb = 17592186044416\n", "cache.budget_mb"),
        ] {
            let raw = RawConfig::parse(text).expect("parses");
            let e = resolve(raw, &Overrides::default()).expect_err(text);
            assert!(e.to_string().contains(key), "{text}: {e}");
        }
    }

    #[test]
    fn flags_win_and_the_default_namespace_is_added() {
        let raw = RawConfig::parse(
            "[server]\nport = 9000\nparallel = 2\n[namespaces.alpha]\nisolation = \"isolated\"\napi_keys = [\"alpha-key-1\"]\n",
        )
        .expect("parses");
        let o = Overrides {
            port: Some(0),
            api_key: Some("shared-key-1".into()),
            ..Overrides::default()
        };
        let cfg = resolve(raw, &o).expect("valid");
        assert_eq!(cfg.addr.port(), 0);
        let names: Vec<&str> = cfg.namespaces.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["shared", "alpha"]);
        assert_eq!(cfg.namespaces[0].1.limits.max_concurrent, 2);
        assert_eq!(cfg.namespaces[0].1.api_keys, ["shared-key-1"]);
        let t = tenants(cfg.namespaces, cfg.remote.as_ref()).expect("tenants");
        assert_eq!(
            t.by_key("alpha-key-1").map(|n| n.name.as_str()),
            Some("alpha")
        );
    }

    #[test]
    fn store_ram_budgets_are_read_and_checked() {
        let raw =
            RawConfig::parse("[store]\ncold_mb = 0\npage_cache_mb = 8\nwrite_queue_mb = 16\n")
                .expect("parse");
        let ram = store_ram(&raw.store).expect("in range");
        assert_eq!(
            ram,
            StoreRam {
                cold_bytes: Some(0),
                page_cache_bytes: Some(8 << 20),
                write_queue_bytes: Some(16 << 20),
            }
        );
        for bad in [
            "[store]\npage_cache_mb = 0\n",
            "[store]\nwrite_queue_mb = 0\n",
            "[store]\ncold_mb = 17592186044416\n",
        ] {
            let raw = RawConfig::parse(bad).expect("parse");
            let e = store_ram(&raw.store).expect_err(bad).to_string();
            assert!(e.contains("store."), "{e}");
        }
    }

    #[test]
    fn store_budgets_are_checked() {
        let raw = RawConfig::parse("[store]\nmax_disk_mb = 100\nmax_saves_mb = 10\n").unwrap();
        let cfg = resolve(raw, &Overrides::default()).expect("valid");
        assert_eq!(cfg.store_max_disk_bytes, Some(100 << 20));
        assert_eq!(cfg.store_max_saves_bytes, Some(10 << 20));
        for bad in [
            "max_disk_mb = 0",
            "max_disk_mb = 3",
            "max_saves_mb = 0",
            "max_disk_mb = 10\nmax_saves_mb = 6",
        ] {
            let raw = RawConfig::parse(&format!("[store]\n{bad}\n")).unwrap();
            let e = resolve(raw, &Overrides::default()).expect_err(bad);
            assert!(e.to_string().contains("store.max_"), "{e}");
        }
        let raw = RawConfig::parse("[store]\nmax_disk_mb = 3\n").unwrap();
        let e = resolve(raw, &Overrides::default()).expect_err("under the minimum");
        assert!(e.to_string().contains("cannot be held under 4 MiB"), "{e}");
        let raw = RawConfig::parse("[store]\nmax_disk_mb = 4\nmax_saves_mb = 1\n").unwrap();
        let cfg = resolve(raw, &Overrides::default()).expect("the minimum is taken");
        assert_eq!(cfg.store_max_disk_bytes, Some(4 << 20));
    }

    #[test]
    fn the_example_file_is_valid() {
        let text = include_str!("../../../../host.example.toml");
        let raw = RawConfig::parse(text).expect("host.example.toml parses");
        let cfg = resolve(raw, &Overrides::default()).expect("host.example.toml validates");
        tenants(cfg.namespaces, cfg.remote.as_ref()).expect("its namespaces validate");
    }

    #[test]
    fn model_aliases_are_read_and_checked() {
        let raw =
            RawConfig::parse("[model]\naliases = [\"gpt-4o-mini\", \"smol\"]\n").expect("parses");
        let cfg = resolve(raw, &Overrides::default()).expect("valid");
        assert_eq!(cfg.model_aliases, ["gpt-4o-mini", "smol"]);
        let raw = RawConfig::parse("[model]\naliases = [\" \"]\n").expect("parses");
        let e = resolve(raw, &Overrides::default()).expect_err("a blank alias");
        assert!(e.to_string().contains("model.aliases"), "{e}");
    }
}
