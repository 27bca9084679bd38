//! `memoria serve`: the host. Resolves the configuration (flags over `host.toml`), loads the
//! model (or builds the embedded demo model and says its output is random), starts the engine
//! with a pool sized for every namespace's concurrency, preloads pinned prefixes, prints the
//! listening address, serves until SIGINT/SIGTERM, then drains. With `[cache] auto_pin` and a
//! store, the hot prefixes of the last run are re-warmed before serving (module `hot`).

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::Args;
use memoria_http::{HttpConfig, Reloader, Server, ServerParts};
use memoria_kv::{KvElem, KvLayout, PinLevel};
use memoria_model::chat::{ChatError, ChatTemplate};
use memoria_model::gguf::GgufFile;
use memoria_model::llama::Model;
use memoria_model::synth::demo;
use memoria_model::tokenizer::Tokenizer;
use memoria_sched::{EngineConfig, EngineHandle};

use crate::config::{self, Overrides, RawConfig, ServeConfig};
use crate::load::load_model;

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// GGUF model file or a pulled catalogue name (default: the first `memoria pull` catalogue
    /// model in the models folder, else the embedded demo model, random weights).
    #[arg(short = 'm', long)]
    model: Option<PathBuf>,
    /// Tokens of context one request may use (0: the model's training context). llama-server's
    /// `-c N -np P` splits N over P slots; here every running request may use all N (as with
    /// its `--kv-unified`), and the K/V pool holds P requests of N tokens (docs/llama-server.md).
    #[arg(short = 'c', long = "ctx-size")]
    ctx_size: Option<usize>,
    /// Requests running at once in the default namespace (llama-server's -np).
    #[arg(long = "parallel", visible_alias = "np")]
    parallel: Option<usize>,
    /// Requests waiting per default-namespace queue before 429.
    #[arg(long = "max-queue")]
    max_queue: Option<usize>,
    /// Address to bind.
    #[arg(long)]
    host: Option<String>,
    /// Port (0: any free port; the address is printed).
    #[arg(long)]
    port: Option<u16>,
    /// One shared state cache for every namespace.
    #[arg(long = "state-share")]
    state_share: bool,
    /// Persistent state store directory.
    #[arg(long)]
    store: Option<PathBuf>,
    /// If the store file is damaged, salvage what still reads into a fresh file and move the
    /// damaged one aside (memoria.redb.corrupt-<unix time>) instead of refusing to start.
    #[arg(long = "store-recover")]
    store_recover: bool,
    /// Shared remote tier (Valkey or Redis), e.g. redis://127.0.0.1:6379; more settings in
    /// `[store.remote]`.
    #[arg(long)]
    remote: Option<String>,
    /// Shared remote tier on a Redis Cluster: its seed nodes, comma-separated or the flag
    /// repeated, e.g. redis://10.0.0.1:7000,redis://10.0.0.2:7000 (instead of --remote).
    #[arg(long = "remote-cluster", value_delimiter = ',')]
    remote_cluster: Vec<String>,
    /// The key file remote values are authenticated with (required with --remote or
    /// --remote-cluster; the same file on every host: `openssl rand -hex 32 > remote.key`).
    #[arg(long = "remote-key-file")]
    remote_key_file: Option<PathBuf>,
    /// Bearer key of the default namespace.
    #[arg(long = "api-key")]
    api_key: Option<String>,
    /// Bearer key of the /admin API.
    #[arg(long = "admin-key")]
    admin_key: Option<String>,
    /// host.toml configuration file.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Compute threads (0: one per core).
    #[arg(short = 't', long)]
    threads: Option<usize>,
    /// K/V cache element type: f16, f32, q8_0 or q4_0.
    #[arg(long = "cache-type", value_parser = super::run::parse_kv)]
    cache_type: Option<KvElem>,
    /// Chat template by built-in name (chatml, gemma, llama3, llama2, phi3, mistral-v7, zephyr,
    /// ...) or as Jinja source, instead of the model's; default: the model's, else gemma for
    /// Gemma, else chatml.
    #[arg(long = "chat-template")]
    chat_template: Option<String>,
    #[command(flatten)]
    dropin: super::serve_flags::DropInArgs,
    #[command(flatten)]
    tools: super::serve_tools::ToolsArgs,
}

impl ServeArgs {
    fn overrides(&self) -> anyhow::Result<Overrides> {
        let model = match &self.model {
            Some(m) => Some(super::pull::catalogue::model_arg(m)?),
            None => None,
        };
        let d = &self.dropin;
        let cache_type = match (self.cache_type, d.cache_type_k, d.cache_type_v) {
            (_, Some(k), Some(v)) if k != v => {
                bail!(
                    "--cache-type-k and --cache-type-v: memoria keeps K and V in one type; give the same"
                )
            }
            (Some(t), _, _) => Some(t),
            (None, k, v) => k.or(v),
        };
        let chat_template = super::super::config::dropin::chat_template(
            self.chat_template.as_deref(),
            d.chat_template_file.as_deref(),
        )?;
        Ok(Overrides {
            model,
            context: self.ctx_size,
            parallel: self.parallel,
            queue: self.max_queue,
            host: self.host.clone(),
            port: self.port,
            state_share: self.state_share,
            store: self.store.clone().or(d.slot_save_path.clone()),
            api_key: self.api_key.clone(),
            admin_key: self.admin_key.clone(),
            threads: self.threads,
            cache_type,
            chat_template,
            remote: self.remote.clone(),
            remote_cluster: self.remote_cluster.clone(),
            remote_key_file: self.remote_key_file.clone(),
            dropin: self.dropin.clone(),
        })
    }
}

pub fn main(a: ServeArgs) -> anyhow::Result<()> {
    let raw = match &a.config {
        Some(p) => RawConfig::load(p)?,
        None => RawConfig::default(),
    };
    let overrides = a.overrides()?;
    let tools = a.tools.config()?;
    let cors_set = a.dropin.cors_origins.is_some() || raw.server.cors_origins.is_some();
    let mut cfg = config::resolve(raw, &overrides)?;
    if tools.is_some() && !cors_set {
        // Tools act on this host: browser pages only from this machine unless configured.
        cfg.dropin.cors_origins = memoria_http::CorsOrigins::Localhost;
    }
    for w in config::short_key_warnings(&cfg) {
        eprintln!("memoria: warning: {w}");
    }
    super::init_threads(cfg.threads)?;
    let (mut model, tokenizer, model_id) = model(&cfg)?;
    let tenants = config::tenants(cfg.namespaces.clone(), cfg.remote.as_ref())?;
    let chat = chat_template(&cfg, &model, &tokenizer)?;
    let max_context = if cfg.context == 0 {
        model.hparams().n_ctx_train.max(1)
    } else {
        cfg.context
    };
    // A session may reach `max_context` tokens (LongRoPE's factors follow it).
    model.set_context(max_context);
    let budget = kv_budget(&cfg, &model, max_context)?;
    eprintln!("memoria: {}", crate::load::summary(&model, max_context));
    let store_settings = super::store::StoreSettings {
        max_disk_bytes: cfg.store_max_disk_bytes,
        max_saves_bytes: cfg.store_max_saves_bytes,
        ram: cfg.store_ram,
        recover: a.store_recover,
        announce: true,
    };
    let store = super::store::open_store_with(cfg.store.as_deref(), &store_settings)?;
    let store = with_remote(store, &cfg)?;
    let engine_cfg = EngineConfig {
        kv_elem: cfg.kv_elem,
        block_tokens: cfg.block_tokens,
        kv_budget_bytes: budget,
        step_tokens: cfg.step_tokens,
        max_context,
        max_sessions: cfg.max_sessions,
        idle_ttl: cfg.idle_ttl,
        store: store.clone().map(|s| s as _),
        target_hit_rate: cfg.target_hit_rate,
        auto_pin: cfg.auto_pin,
        embed_cache_entries: cfg.embed_cache_entries,
        embed_step_tokens: cfg.embed_step_tokens,
        ..EngineConfig::default()
    };
    let engine = EngineHandle::start(Arc::new(model), Arc::new(tokenizer), engine_cfg)
        .context("starting the engine")?;
    // One first-token padding estimate for the OpenAI endpoints and the components.
    let hit_pad = Arc::new(memoria_tenant::HitPad::default());
    // And one for embeddings, which share the engine's embedding cache.
    let embed_pad = Arc::new(memoria_tenant::HitPad::default());
    let pads = (&hit_pad, &embed_pad);
    let router = needs_runtime(&cfg, &tenants)
        .then(|| components(&cfg, &tenants, &engine, &model_id, store.as_ref(), pads))
        .transpose()?;
    let http = HttpConfig {
        model_path: model_file(&cfg).map_or_else(String::new, |p| p.display().to_string()),
        model_aliases: model_aliases(&cfg, &model_id),
        model_file_names: model_file_names(&cfg, &model_id),
        model_id,
        max_body_bytes: cfg.max_body_bytes,
        max_body_memory: cfg.max_body_memory,
        admin_key: cfg.admin_key.clone(),
        default_namespace: cfg.default_namespace.clone(),
        shutdown_timeout: cfg.shutdown_timeout,
        retry_after_s: cfg.retry_after_s,
        max_context,
        max_component_bytes: cfg.max_component_bytes,
        header_timeout: cfg.header_timeout,
        body_timeout: cfg.body_timeout,
        min_body_rate: cfg.min_body_rate,
        max_connections: cfg.max_connections,
        status_page: cfg.status_page && !a.dropin.no_ui,
        strict_model: cfg.dropin.strict_model,
        cors_origins: cfg.dropin.cors_origins.clone(),
        log_level: cfg.dropin.log_level,
        defaults: cfg.dropin.defaults.clone(),
        model_tags: cfg.dropin.tags.clone(),
        slots: cfg.dropin.slots,
        llama_metrics: a.dropin.ignored.metrics,
        predict_route: predict_route(),
        responses_dir: cfg.store.as_ref().map(|d| d.join("responses")),
        tools: None,
        cors_proxy: a.dropin.ui_mcp_proxy,
    };
    let events = cfg
        .events
        .as_ref()
        .map(|_| super::serve_events::Events::new());
    let reloader = a
        .config
        .clone()
        .map(|path| reloader(path, overrides.clone(), &cfg));
    let parts = ServerParts {
        engine: engine.clone(),
        tenants,
        config: http,
        chat,
        router,
        reloader,
        store: store.clone(),
        hit_pad,
        embed_pad,
        observer: events
            .clone()
            .map(|e| e as Arc<dyn memoria_http::PromptObserver>),
    };
    let rt = super::server_runtime()?;
    rt.block_on(async move {
        let mut parts = parts;
        if let Some(t) = tools {
            parts.config.tools = Some(memoria_http::tools::Tools::start(t).await.map_err(anyhow::Error::msg)?);
        }
        let mut addrs = vec![cfg.addr];
        addrs.extend(cfg.more_addrs.iter().copied());
        let server = Server::bind_all(&addrs, parts)
            .await
            .with_context(|| format!("binding {addrs:?}"))?;
        preload(&engine, server.state()).await?;
        let hot = hot_keeper(&cfg, &engine, server.state(), store.as_ref());
        if let Some(h) = &hot {
            h.rewarm().await;
            h.clone().spawn_saver();
        }
        let addr = server.local_addr()?;
        if let (Some(e), Some(settings), Some(remote), Some(store)) =
            (&events, &cfg.events, &cfg.remote, &store)
        {
            let keys_for = super::serve_events::KeysFor {
                model: memoria_kv::ModelFingerprint(engine.model().fingerprint()),
                elem: cfg.kv_elem,
                block_tokens: cfg.block_tokens,
            };
            e.start(
                remote,
                settings.complete(addr),
                server.state().clone(),
                keys_for,
                store,
            )?;
        }
        let events_at_stop = events.clone();
        for a in server.local_addrs()? {
            println!("memoria: listening on http://{a}");
        }
        eprintln!(
            "memoria: {} namespaces, context {max_context} tokens, K/V pool {} MiB; Ctrl-C or SIGTERM stops",
            server.state().tenants().len(),
            budget >> 20
        );
        let report = server
            .run(async move {
                memoria_http::shutdown_signal().await;
                if let Some(h) = hot {
                    h.save().await;
                }
                if let Some(e) = events_at_stop {
                    e.save(std::time::Duration::from_secs(10)).await;
                }
            })
            .await;
        if let Some(s) = &store
            && let Err(e) = s.flush()
        {
            eprintln!("memoria: the store was not fully written at shutdown: {e}");
        }
        if report.drained {
            eprintln!("memoria: stopped");
        } else {
            eprintln!("memoria: stopped after the drain timeout with requests still running");
        }
        Ok(())
    })
}

/// Adds the remote tier (`--remote` / `[store.remote]`) to the stack (an in-memory one without
/// `--store`); its keys take each namespace's label from the registry the engine fills.
fn with_remote(
    store: Option<Arc<memoria_store::TierStack>>,
    cfg: &ServeConfig,
) -> anyhow::Result<Option<Arc<memoria_store::TierStack>>> {
    let Some(opts) = cfg.remote.clone() else {
        return Ok(store);
    };
    let stack = match store {
        None => memoria_store::TierStack::in_memory(memoria_store::StoreOptions::default()),
        Some(s) => Arc::try_unwrap(s)
            .map_err(|_| anyhow::anyhow!("the store is already shared; cannot add --remote"))?,
    };
    let at = opts.endpoint.describe();
    let remote = memoria_store::RemoteTier::start(opts).map_err(|e| anyhow::anyhow!("{e}"))?;
    let stack = stack.with_remote(remote);
    eprintln!("memoria: remote tier {at} (a lossy cache: an unreachable server is a miss)");
    Ok(Some(Arc::new(stack)))
}

/// Vertex AI's prediction route, as llama-server reads it: on when `AIP_MODE` is `PREDICTION`,
/// at `AIP_PREDICT_ROUTE` (default `/predict`; a leading `/` added).
fn predict_route() -> Option<String> {
    if std::env::var("AIP_MODE").ok().as_deref() != Some("PREDICTION") {
        return None;
    }
    let route = std::env::var("AIP_PREDICT_ROUTE")
        .ok()
        .filter(|r| !r.is_empty())
        .unwrap_or_else(|| "/predict".into());
    Some(if route.starts_with('/') {
        route
    } else {
        format!("/{route}")
    })
}

/// Saving and re-warming hot prefixes, when `[cache] auto_pin` is on and the store has a disk.
fn hot_keeper(
    cfg: &ServeConfig,
    engine: &EngineHandle,
    state: &Arc<memoria_http::AppState>,
    store: Option<&Arc<memoria_store::TierStack>>,
) -> Option<Arc<super::hot::HotKeeper>> {
    let store = store.filter(|s| s.disk().is_some())?;
    (cfg.auto_pin > 0).then(|| {
        Arc::new(super::hot::HotKeeper {
            engine: engine.clone(),
            state: state.clone(),
            store: store.clone(),
            model: memoria_kv::ModelFingerprint(engine.model().fingerprint()),
            elem: cfg.kv_elem,
            block_tokens: cfg.block_tokens,
        })
    })
}

/// Prefills and pins each namespace's `preload` texts (through `memoria_sched::preload`).
async fn preload(engine: &EngineHandle, state: &Arc<memoria_http::AppState>) -> anyhow::Result<()> {
    for ns in state
        .tenants()
        .iter()
        .filter(|n| !n.spec.preload.is_empty())
    {
        let entry = memoria_sched::Preload {
            ns: ns.id,
            texts: ns.spec.preload.clone(),
            pin: PinLevel::Pinned,
            ttl: None,
        };
        let warmed = memoria_sched::preload(engine, &[entry])
            .await
            .with_context(|| format!("namespaces.{}.preload", ns.name))?;
        for info in warmed {
            eprintln!(
                "memoria: preloaded {} tokens for namespace {} ({} blocks pinned)",
                info.tokens, ns.name, info.blocks_pinned
            );
        }
    }
    Ok(())
}

/// Re-reads the config file for `POST /admin/reload`; namespaces keep their order (and ids).
fn reloader(path: PathBuf, o: Overrides, cfg: &ServeConfig) -> Reloader {
    let default = cfg.default_namespace.clone();
    let remote = cfg.remote.clone();
    Box::new(move |current| {
        let raw = RawConfig::load(&path).map_err(|e| format!("{e:#}"))?;
        let prev: Vec<String> = current.iter().map(|n| n.name.clone()).collect();
        let specs =
            config::namespaces(&raw, &o, &default, Some(&prev)).map_err(|e| format!("{e:#}"))?;
        config::tenants(specs, remote.as_ref()).map_err(|e| format!("{e:#}"))
    })
}

#[path = "serve_model.rs"]
mod model_files;
pub use model_files::chat_template_for;
use model_files::{
    chat_template, components, kv_budget, model, model_aliases, model_file, model_file_names,
    needs_runtime,
};
