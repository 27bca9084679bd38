//! What `memoria serve` loads before it serves: the model file and the names it answers to,
//! its chat template, the tenants' components, and the K/V budget that fits the host.

use super::*;

/// The configured aliases besides `id` (`/v1/models` lists them; requests may name them).
pub(super) fn model_aliases(cfg: &ServeConfig, id: &str) -> Vec<String> {
    let mut names = cfg.model_aliases.clone();
    names.retain(|n| n != id);
    names.sort();
    names.dedup();
    names
}

/// The model file's name and stem besides `id`: requests may name them, `/v1/models` does not
/// list them.
pub(super) fn model_file_names(cfg: &ServeConfig, id: &str) -> Vec<String> {
    let mut names = Vec::new();
    if let Some(p) = model_file(cfg) {
        for n in [p.file_stem(), p.file_name()].into_iter().flatten() {
            names.push(n.to_string_lossy().into_owned());
        }
    }
    names.retain(|n| n != id);
    names.sort();
    names.dedup();
    names
}

/// The served model's file (None: the embedded demo model).
pub(super) fn model_file(cfg: &ServeConfig) -> Option<PathBuf> {
    cfg.model
        .clone()
        .or_else(|| crate::cmd::pull::catalogue::first_present().map(|(_, path)| path))
}

/// The model, its tokenizer and the id `/v1/models` reports.
pub(super) fn model(cfg: &ServeConfig) -> anyhow::Result<(Model, Tokenizer, String)> {
    let pulled = match &cfg.model {
        Some(_) => None,
        None => crate::cmd::pull::catalogue::first_present(),
    };
    match (&cfg.model, pulled) {
        (Some(path), _) => {
            let loaded = load_announced(path)?;
            let id = cfg.model_name.clone().unwrap_or_else(|| {
                path.file_stem()
                    .map_or_else(|| "model".into(), |s| s.to_string_lossy().into_owned())
            });
            Ok((loaded.model, loaded.tokenizer, id))
        }
        (None, Some((entry, path))) => {
            eprintln!(
                "memoria: no model given (-m FILE.gguf): serving {} from {} (the first `memoria pull` catalogue model in the models folder)",
                entry.name,
                path.display()
            );
            let loaded = load_announced(&path)?;
            let id = cfg.model_name.clone().unwrap_or_else(|| entry.name.into());
            Ok((loaded.model, loaded.tokenizer, id))
        }
        (None, None) => {
            eprintln!(
                "memoria: no model given (-m FILE.gguf) and no `memoria pull` model in the models folder: serving the embedded demo model \
                 `{}` — random weights, so its output is RANDOM TEXT",
                demo::DEMO_MODEL_NAME
            );
            let (model, tok) =
                demo::demo_model_and_tokenizer().context("building the demo model")?;
            let id = cfg
                .model_name
                .clone()
                .unwrap_or_else(|| demo::DEMO_MODEL_NAME.into());
            Ok((model, tok, id))
        }
    }
}

/// Loads `path`, saying so on stderr before and after (a large model takes a while).
pub(super) fn load_announced(path: &std::path::Path) -> anyhow::Result<crate::load::Loaded> {
    let mib = std::fs::metadata(path).map_or(0, |m| m.len() >> 20);
    eprintln!("memoria: loading {} ({mib} MiB)", path.display());
    let loaded = load_model(path, false)?;
    eprintln!("memoria: model loaded in {:.1} s", loaded.load_ms / 1000.0);
    Ok(loaded)
}

/// Whether this host can ever serve a component: one is configured, the components folder holds
/// deployments, or the admin API (and so deploys and reloads) is on. Otherwise the wasm runtime,
/// whose instance pool reserves a large stretch of address space, is not started.
pub(super) fn needs_runtime(cfg: &ServeConfig, tenants: &memoria_tenant::Tenants) -> bool {
    let configured = tenants
        .iter()
        .any(|n| n.spec.component.is_some() || !n.spec.components.is_empty());
    let stored = cfg
        .components_dir
        .as_ref()
        .and_then(|d| std::fs::read_dir(d).ok())
        .is_some_and(|mut entries| {
            entries.any(|e| e.is_ok_and(|e| !e.file_name().to_string_lossy().starts_with('.')))
        });
    configured || stored || cfg.admin_key.is_some()
}

/// The wasm runtime serving `/ns/{namespace}/...` and the admin API's component routes. Every
/// configured component is validated, compiled and linked here, then every one deployed into
/// the components folder; a bad one stops start-up with its namespace named.
pub(super) fn components(
    cfg: &ServeConfig,
    tenants: &memoria_tenant::Tenants,
    engine: &EngineHandle,
    model_id: &str,
    store: Option<&Arc<memoria_store::TierStack>>,
    (hit_pad, embed_pad): (&Arc<memoria_tenant::HitPad>, &Arc<memoria_tenant::HitPad>),
) -> anyhow::Result<Arc<dyn memoria_runtime::ComponentRouter>> {
    let rc = memoria_runtime::RuntimeConfig {
        chat_template: Some(Arc::new(chat_template(
            cfg,
            engine.model(),
            engine.tokenizer(),
        )?)),
        model_id: model_id.to_string(),
        durable_sessions: store.is_some_and(|s| s.disk().is_some() || s.remote().is_some()),
        cache_dir: cfg.components_dir.as_ref().map(|d| d.join(".compiled")),
        components_dir: cfg.components_dir.clone(),
        hit_pad: hit_pad.clone(),
        embed_pad: embed_pad.clone(),
        ..memoria_runtime::RuntimeConfig::default()
    };
    if let Some(d) = &rc.cache_dir {
        std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    let rt = memoria_runtime::Runtime::new(tenants, engine.clone(), rc)
        .context("loading tenant components")?;
    Ok(Arc::new(rt))
}

/// The configured template (built-in name or Jinja), the model's, or its architecture's
/// built-in default (llama-server's choice).
pub(super) fn chat_template(
    cfg: &ServeConfig,
    model: &Model,
    tok: &Tokenizer,
) -> anyhow::Result<ChatTemplate> {
    chat_template_for(cfg.chat_template.as_deref(), model.gguf(), tok)
}

/// [`chat_template`] from a GGUF file (a vocab-only one is enough): `memoria route` renders with
/// this too, so router and hosts pick the same template.
pub fn chat_template_for(
    configured: Option<&str>,
    gguf: &GgufFile,
    tok: &Tokenizer,
) -> anyhow::Result<ChatTemplate> {
    match ChatTemplate::for_model(gguf, tok, configured) {
        Ok(t) => return Ok(t),
        Err(e @ ChatError::UnknownBuiltin { .. }) => return Err(e.into()),
        Err(e) => eprintln!("memoria: the chat template does not compile ({e}); using the default"),
    }
    ChatTemplate::default_for(gguf, tok).context("the built-in default chat template")
}

/// Largest hot pool memoria reserves address space for (1 TiB).
const MAX_POOL_BYTES: usize = 1 << 40;

/// The hot pool's bytes: the configured budget, which must hold every namespace's running
/// requests at full context (so accepted work never fails for memory), or that plus a quarter
/// for the prefix cache, at least 64 MiB.
pub(super) fn kv_budget(
    cfg: &ServeConfig,
    model: &Model,
    max_context: usize,
) -> anyhow::Result<usize> {
    let hp = model.hparams();
    let block_bytes = KvLayout::new(hp.n_layer, hp.kv_dim(), cfg.kv_elem)
        .with_block_tokens(cfg.block_tokens)
        .block_bytes()
        .map_err(|e| anyhow::anyhow!("cache: {e}"))?;
    let running: usize = cfg
        .namespaces
        .iter()
        .map(|(_, s)| s.limits.max_concurrent)
        .sum();
    // Checked: flags and limits are range-checked, but their product may still not fit.
    let needed = max_context
        .div_ceil(cfg.block_tokens)
        .checked_add(1)
        .and_then(|b| b.checked_mul(running))
        .filter(|&b| b <= u32::MAX as usize)
        .and_then(|b| b.checked_mul(block_bytes))
        .filter(|&n| n <= MAX_POOL_BYTES);
    let Some(needed) = needed else {
        bail!(
            "the K/V pool for {running} concurrent requests (all namespaces) × {max_context} tokens would need more than {} GiB; lower -c / model.context or -np / limits.max_concurrent",
            MAX_POOL_BYTES >> 30
        );
    };
    match cfg.kv_budget_bytes {
        Some(b) if b < needed => bail!(
            "cache.budget_mb = {}: {running} concurrent requests (all namespaces) × {max_context} tokens need at least {} MiB; raise it or lower -np / -c / limits.max_concurrent",
            b >> 20,
            needed.div_ceil(1 << 20)
        ),
        Some(b) => Ok(b),
        None => Ok(needed.saturating_add(needed / 4).max(64 << 20)),
    }
}
