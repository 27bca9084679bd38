//! The namespaces of a configuration: their order (a reload keeps ids), the default namespace and
//! the flags that apply to it, warnings for short keys, and their validation into [`Tenants`].

use anyhow::{Context, bail};
use memoria_tenant::{Isolation, NamespaceSpec, Tenants};

use super::{Overrides, RawConfig, ServeConfig};

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
    if let Some(mode) = super::dropin::speculation(&o.dropin)? {
        d.speculation = mode;
    }
    if let Some(n) = o.dropin.draft_max {
        d.draft_max = Some(n);
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
