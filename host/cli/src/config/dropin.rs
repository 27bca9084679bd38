//! The llama-server drop-in settings of `memoria serve`, flags over `host.toml`: server-wide
//! sampling and length defaults (`[sampling]`, `--temp`, `-n`, ...), CORS origins, the log level,
//! model names (aliases, tags, strictness) and `/slots`. Errors name the key or flag to fix.

use anyhow::{Context, bail};
use memoria_http::{CorsOrigins, LogLevel, RequestDefaults};
use memoria_sched::sampling::SamplingParams;
use serde::Deserialize;

use crate::cmd::serve_flags::DropInArgs;

/// `[sampling]`: defaults for requests that do not set these fields.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSampling {
    pub temperature: Option<f32>,
    pub top_k: Option<usize>,
    pub top_p: Option<f32>,
    pub min_p: Option<f32>,
    pub repeat_penalty: Option<f32>,
    pub repeat_last_n: Option<usize>,
    pub presence_penalty: Option<f32>,
    pub frequency_penalty: Option<f32>,
    /// -1: a different seed per request.
    pub seed: Option<i64>,
    /// Tokens generated when a request sets no limit (-1: until the context is full).
    pub n_predict: Option<i64>,
}

/// The resolved drop-in settings.
#[derive(Clone, Debug)]
pub struct DropIn {
    pub defaults: RequestDefaults,
    pub cors_origins: CorsOrigins,
    pub log_level: LogLevel,
    pub strict_model: bool,
    /// `--alias` names (the id is the first alphabetically), or the file's `[model] aliases`.
    pub aliases: Vec<String>,
    pub tags: Vec<String>,
    /// Whether `GET /slots` is served.
    pub slots: bool,
}

/// Comma-separated names, trimmed, empty ones dropped.
fn names(list: &str) -> Vec<String> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// Merges the flags over the file's `[sampling]`, `[server]` and `[model]` keys.
pub fn resolve(
    sampling: &RawSampling,
    server: &super::file::RawServer,
    model: &super::file::RawModel,
    a: &DropInArgs,
) -> anyhow::Result<DropIn> {
    let mut p = SamplingParams::default();
    let pick_f = |flag: Option<f32>, file: Option<f32>| flag.or(file);
    if let Some(t) = pick_f(a.temp, sampling.temperature) {
        p.temperature = t.max(0.0);
    }
    if let Some(v) = a.top_k.or(sampling.top_k) {
        p.top_k = v;
    }
    if let Some(v) = pick_f(a.top_p, sampling.top_p) {
        p.top_p = v;
    }
    if let Some(v) = pick_f(a.min_p, sampling.min_p) {
        p.min_p = v;
    }
    if let Some(v) = pick_f(a.repeat_penalty, sampling.repeat_penalty) {
        p.repeat_penalty = v;
    }
    if let Some(v) = a.repeat_last_n.or(sampling.repeat_last_n) {
        p.repeat_last_n = v;
    }
    if let Some(v) = pick_f(a.presence_penalty, sampling.presence_penalty) {
        p.presence_penalty = v;
    }
    if let Some(v) = pick_f(a.frequency_penalty, sampling.frequency_penalty) {
        p.frequency_penalty = v;
    }
    let seed = a.seed.or(sampling.seed);
    let random_seed = seed.is_some_and(|s| s < 0);
    if let Some(s) = seed.filter(|s| *s >= 0) {
        p.seed = s.unsigned_abs();
    }
    p.validate()
        .map_err(|e| anyhow::anyhow!("sampling.{} / --{}: {e}", e.field, e.field))?;
    let n_predict = match a.n_predict.or(sampling.n_predict) {
        None => None,
        Some(n) if n < 0 => None,
        Some(0) => bail!("sampling.n_predict / -n: 0 would generate nothing; use -1 for no limit"),
        Some(n) => Some(usize::try_from(n).unwrap_or(usize::MAX)),
    };
    let cors = a
        .cors_origins
        .clone()
        .or(server.cors_origins.clone())
        .unwrap_or_else(|| "*".into());
    let cors_origins = CorsOrigins::parse(&cors)
        .map_err(|e| anyhow::anyhow!("server.cors_origins / --cors-origins: {e}"))?;
    let no_thinking = match a
        .reasoning
        .as_deref()
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        None | Some("auto" | "on" | "true" | "1" | "enabled") => false,
        Some("off" | "false" | "0" | "disabled") => true,
        Some(other) => bail!("--reasoning {other:?}: use on, off or auto"),
    };
    let log_level = match (a.log_disable, a.verbose, &a.log_level, &server.log_level) {
        (true, _, _, _) => LogLevel::Error,
        (_, true, _, _) => LogLevel::Debug,
        (_, _, Some(l), _) | (_, _, None, Some(l)) => LogLevel::parse(l)
            .map_err(|e| anyhow::anyhow!("server.log_level / --log-level: {e}"))?,
        _ => LogLevel::Info,
    };
    let mut aliases = match &a.alias {
        Some(list) => names(list),
        None => Vec::new(),
    };
    aliases.sort();
    aliases.dedup();
    if aliases.iter().any(|n| n.len() > 256) {
        bail!("--alias: each name needs at most 256 characters");
    }
    let tags = match &a.tags {
        Some(list) => names(list),
        None => model.tags.clone().unwrap_or_default(),
    };
    Ok(DropIn {
        defaults: RequestDefaults {
            sampling: p,
            n_predict,
            random_seed,
            no_thinking,
        },
        cors_origins,
        log_level,
        strict_model: a.strict_model_name || model.strict_name.unwrap_or(false),
        aliases,
        tags,
        slots: !a.no_slots,
    })
}

/// The text of `--chat-template-file`, or `--chat-template`'s value.
pub fn chat_template(
    flag: Option<&str>,
    file: Option<&std::path::Path>,
) -> anyhow::Result<Option<String>> {
    match file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("--chat-template-file {}", path.display()))?;
            if text.len() > 1 << 20 {
                bail!("--chat-template-file {}: over 1 MiB", path.display());
            }
            Ok(Some(text))
        }
        None => Ok(flag.map(str::to_string)),
    }
}

/// `--spec-type`: `Some(Off)` for `none`, `Some(Auto)` for `auto` or llama-server's n-gram
/// types (comma-separated like llama-server's; any of them means drafting from n-grams), an
/// error for its draft-model types.
pub fn speculation(a: &DropInArgs) -> anyhow::Result<Option<memoria_tenant::SpeculationMode>> {
    use memoria_tenant::SpeculationMode;
    let Some(list) = &a.spec_type else {
        return Ok(None);
    };
    let mut mode = SpeculationMode::Off;
    for t in list.split(',').map(|t| t.trim().to_ascii_lowercase()) {
        match t.as_str() {
            "none" => {}
            "auto" | "ngram-simple" | "ngram-map-k" | "ngram-map-k4v" | "ngram-mod"
            | "ngram-cache" => mode = SpeculationMode::Auto,
            other if other.starts_with("draft-") => bail!(
                "--spec-type {other}: memoria drafts from n-grams of the session's context and its namespace's memory (use auto or an ngram type); draft models are not supported"
            ),
            other => {
                bail!("--spec-type {other:?}: use none, auto or an ngram type (ngram-mod, ...)")
            }
        }
    }
    Ok(Some(mode))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_win_and_values_are_checked() {
        let file = RawSampling {
            temperature: Some(0.5),
            n_predict: Some(32),
            seed: Some(7),
            ..RawSampling::default()
        };
        let server = super::super::file::RawServer::default();
        let model = super::super::file::RawModel::default();
        let a = DropInArgs {
            temp: Some(0.0),
            alias: Some("b, a,,b".into()),
            ..DropInArgs::default()
        };
        let d = resolve(&file, &server, &model, &a).expect("valid");
        assert_eq!(d.defaults.sampling.temperature, 0.0);
        assert_eq!(d.defaults.sampling.seed, 7);
        assert_eq!(d.defaults.n_predict, Some(32));
        assert_eq!(d.aliases, ["a", "b"]);
        assert_eq!(d.cors_origins, CorsOrigins::Any);
        let bad = DropInArgs {
            top_p: Some(2.0),
            ..DropInArgs::default()
        };
        assert!(resolve(&file, &server, &model, &bad).is_err());
        let unlimited = DropInArgs {
            n_predict: Some(-1),
            seed: Some(-1),
            ..DropInArgs::default()
        };
        let d = resolve(&file, &server, &model, &unlimited).expect("valid");
        assert_eq!(d.defaults.n_predict, None);
        assert!(d.defaults.random_seed);
    }

    #[test]
    fn spec_type_maps_llama_server_types_to_the_namespace_mode() {
        use memoria_tenant::SpeculationMode::{Auto, Off};
        let mode = |t: &str| {
            speculation(&DropInArgs {
                spec_type: Some(t.into()),
                ..DropInArgs::default()
            })
        };
        assert_eq!(speculation(&DropInArgs::default()).expect("unset"), None);
        assert_eq!(mode("none").expect("none"), Some(Off));
        assert_eq!(mode("ngram-mod").expect("ngram-mod"), Some(Auto));
        assert_eq!(mode("none,ngram-simple").expect("list"), Some(Auto));
        assert_eq!(mode("auto").expect("auto"), Some(Auto));
        let e = mode("draft-simple").expect_err("draft model").to_string();
        assert!(e.contains("draft models are not supported"), "{e}");
        assert!(mode("fast").is_err());
    }

    #[test]
    fn reasoning_off_renders_templates_without_thinking_and_a_bad_value_is_refused() {
        let file = RawSampling::default();
        let server = super::super::file::RawServer::default();
        let model = super::super::file::RawModel::default();
        for (value, no_thinking) in [
            ("auto", Some(false)),
            ("on", Some(false)),
            ("off", Some(true)),
            ("maybe", None),
        ] {
            let a = DropInArgs {
                reasoning: Some(value.into()),
                ..DropInArgs::default()
            };
            match (resolve(&file, &server, &model, &a), no_thinking) {
                (Ok(d), Some(want)) => assert_eq!(d.defaults.no_thinking, want, "{value}"),
                (Err(e), None) => assert!(e.to_string().contains("--reasoning"), "{e}"),
                (r, _) => panic!("{value}: {:?}", r.map(|d| d.defaults.no_thinking)),
            }
        }
    }
}
