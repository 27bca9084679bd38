//! The OpenAI-compatible API: chat completions and completions (whole or streamed as SSE),
//! embeddings and models (llama-server's own endpoints are in `llama`). Every handler gets a [`Ctx`]
//! whose namespace was resolved from the route or key; it parses and validates the body (400s
//! name the field), checks the token budget, then takes an admission slot (429 when full).

pub mod chat;
pub(crate) mod chat_check;
pub(crate) mod chat_run;
pub(crate) mod completion_check;
pub mod completions;
pub mod embeddings;
#[cfg(test)]
mod fuzz_tests;
mod harmony_scan;
mod json;
mod logprobs;
pub use json::parse as parse_json;
pub mod models;
mod native_plan;
mod native_scan;
pub(crate) mod params;
pub mod prompt;
pub(crate) mod reasoning;
mod reasoning_stream;
pub(crate) mod run;
pub(crate) mod schema;
pub mod structured;
mod tool_scan;
mod tool_stream;
pub(crate) mod tool_syntax;
pub(crate) mod tools;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use memoria_sched::Usage;
use memoria_tenant::Namespace;
use serde_json::{Value, json};

use crate::admission::Permit;
use crate::error::ApiError;
use crate::metrics::NsMetrics;
use crate::state::AppState;

/// One request's context.
pub struct Ctx {
    pub state: Arc<AppState>,
    pub ns: Arc<Namespace>,
    pub nsm: Arc<NsMetrics>,
    pub started: Instant,
    /// Where the handler leaves its first prompt for the host's prompt observer (`None`
    /// without one).
    pub served: Option<Arc<crate::observe::ServedSlot>>,
}

impl Ctx {
    /// The context of a request in namespace `ns`.
    pub fn new(state: Arc<AppState>, ns: Arc<Namespace>, started: Instant) -> Ctx {
        let nsm = state.metrics.ns(&ns.name);
        nsm.requests.fetch_add(1, Relaxed);
        Ctx {
            state,
            ns,
            nsm,
            started,
            served: None,
        }
    }

    /// Takes a slot in the namespace's gate, or 429 at once.
    pub async fn admit(&self) -> Result<Permit, ApiError> {
        let gate = self
            .state
            .admission
            .gate(&self.ns.name, &self.ns.spec.limits);
        match gate.admit().await {
            Some(p) => Ok(p),
            None => {
                self.nsm.rejected_overload.fetch_add(1, Relaxed);
                Err(ApiError::overloaded(
                    &self.ns.name,
                    self.state.config.retry_after_s,
                ))
            }
        }
    }

    /// The longest context a request may use.
    pub fn max_context(&self) -> usize {
        self.state.config.max_context
    }

    /// The model id responses carry.
    pub fn model_id(&self) -> &str {
        &self.state.config.model_id
    }

    /// Checks a request's `model` (see [`check_model`]).
    pub fn check_model(&self, requested: Option<&str>) -> Result<(), ApiError> {
        check_model(&self.state.config, requested)
    }
}

/// Checks a request's `model`. One model is served, so by default any name is answered by it
/// (clients send placeholders such as `gpt-3.5-turbo`) and responses carry the served id; with
/// `strict_model`, only the served id or one of its aliases is accepted and any other name is
/// OpenAI's 404 `model_not_found`.
pub fn check_model(
    cfg: &crate::state::HttpConfig,
    requested: Option<&str>,
) -> Result<(), ApiError> {
    match requested {
        None => Ok(()),
        Some(_) if !cfg.strict_model => Ok(()),
        Some(m)
            if m == cfg.model_id
                || cfg.model_aliases.iter().any(|a| a == m)
                || cfg.model_file_names.iter().any(|a| a == m) =>
        {
            Ok(())
        }
        Some(m) => {
            let shown: String = m.chars().take(200).collect();
            let mut e = ApiError::not_found(format!(
                "The model `{shown}` does not exist or you do not have access to it (this server serves `{}`)",
                cfg.model_id
            ))
            .with_code("model_not_found");
            e.param = Some("model".into());
            Err(e)
        }
    }
}

/// Seconds since the Unix epoch.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A response id with `prefix` (unique within the process, distinct across restarts).
pub fn response_id(prefix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Relaxed);
    format!("{prefix}-{:x}{n:06x}", unix_now())
}

/// The `usage` object, with `prompt_tokens_details.cached_tokens`.
pub fn usage_json(u: &Usage) -> Value {
    json!({
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "total_tokens": u.prompt_tokens + u.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": u.cached_tokens},
    })
}
