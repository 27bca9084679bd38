//! What every request handler shares: the engine, the namespaces (swapped whole on reload), the
//! chat template, admission gates, metrics, the live-session registry and the embedding cache.
//! Invariant: namespaces are only ever resolved from configuration (route or key), never from a
//! request body; a reload swaps the `Tenants` atomically and keeps namespace ids stable.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use memoria_kv::NamespaceId;
use memoria_model::chat::ChatTemplate;
use memoria_runtime::ComponentRouter;
use memoria_sched::EngineHandle;
use memoria_tenant::{Namespace, Tenants};

use crate::admission::Admission;
use crate::metrics::Metrics;
use crate::sessions::SessionRegistry;

/// Rebuilds the namespaces from configuration (`POST /admin/reload`); the message of an error
/// names the config key at fault.
/// It gets the current namespaces, whose order (ids) the new set must keep.
pub type Reloader = Box<dyn Fn(&Tenants) -> Result<Tenants, String> + Send + Sync>;

/// Default of [`HttpConfig::max_body_memory`].
pub const DEFAULT_BODY_MEMORY: usize = 64 << 20;

/// Server settings (validated by the caller).
#[derive(Clone, Debug)]
pub struct HttpConfig {
    /// The model id `/v1/models` reports and responses carry.
    pub model_id: String,
    /// The model file (`/props`; empty for the embedded demo model).
    pub model_path: String,
    /// The configured aliases (`--alias` past the first), listed by `/v1/models`.
    pub model_aliases: Vec<String>,
    /// The model file's name and stem: a request's `model` may give them too, unlisted.
    pub model_file_names: Vec<String>,
    /// Free labels `/v1/models` lists with the model (`--tags`).
    pub model_tags: Vec<String>,
    /// Largest request body accepted (413 past it).
    pub max_body_bytes: usize,
    /// Bytes all request bodies being received may hold at once (503 past it).
    pub max_body_memory: usize,
    /// Bearer key of the `/admin` API (None: the admin API is off).
    pub admin_key: Option<String>,
    /// Namespace of OpenAI requests that carry no key (open hosts) or the `--api-key` key.
    pub default_namespace: String,
    /// How long shutdown waits for in-flight requests.
    pub shutdown_timeout: Duration,
    /// Seconds a 429 asks the client to wait.
    pub retry_after_s: u64,
    /// Longest context of one request (the engine's `max_context`).
    pub max_context: usize,
    /// Largest component the admin API accepts (413 past it).
    pub max_component_bytes: usize,
    /// How long a client may take to send each request head (and idle between requests).
    pub header_timeout: Duration,
    /// Time every request body gets, on top of what its bytes earn at `min_body_rate`.
    pub body_timeout: Duration,
    /// Bytes per second a slow body must average past `body_timeout` (at least 1).
    pub min_body_rate: u64,
    /// Connections served at once; more are answered 503 and closed at once.
    pub max_connections: usize,
    /// Whether `GET /ui` serves the status page (404 otherwise).
    pub status_page: bool,
    /// Whether a request's `model` must name the served model (OpenAI's 404 otherwise); when
    /// false, any name is answered by the one served model, as llama-server does.
    pub strict_model: bool,
    /// Origins whose pages may call the API from a browser (CORS).
    pub cors_origins: crate::cors::CorsOrigins,
    /// What the server logs to stderr after start-up.
    pub log_level: crate::access_log::LogLevel,
    /// Sampling and length defaults for requests that do not set them (`--temp`, `-n`, ...).
    pub defaults: RequestDefaults,
    /// Whether `GET /slots` is served (llama-server's `--slots`).
    pub slots: bool,
    /// Whether `/metrics` adds llama-server's `llamacpp:*` families (its `--metrics`).
    pub llama_metrics: bool,
    /// Vertex AI's prediction route (`AIP_PREDICT_ROUTE` when `AIP_MODE=PREDICTION`; None: off).
    pub predict_route: Option<String>,
    /// Where stored responses are kept across restarts (`<store>/responses`; None: memory only).
    pub responses_dir: Option<std::path::PathBuf>,
    /// Server-side tools (`/tools`, llama-server's `--tools` and MCP servers; None: off).
    pub tools: Option<Arc<crate::tools::Tools>>,
    /// Whether `/cors-proxy` fetches URLs for the web UI (`--ui-mcp-proxy`; 403 otherwise).
    pub cors_proxy: bool,
}

/// The server-wide defaults of a request's generation settings.
#[derive(Clone, Debug, Default)]
pub struct RequestDefaults {
    /// Sampling settings a request's own fields override.
    pub sampling: memoria_sched::sampling::SamplingParams,
    /// Tokens generated when a request sets no limit (None: until the context is full).
    pub n_predict: Option<usize>,
    /// A request without a seed gets a fresh one (llama-server's `--seed -1`) instead of
    /// `sampling.seed`.
    pub random_seed: bool,
    /// `--reasoning off`: templates are rendered with `enable_thinking` false (else true,
    /// unless a request's `chat_template_kwargs` sets it), as llama-server renders them.
    pub no_thinking: bool,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            model_id: "memoria".into(),
            model_path: String::new(),
            model_aliases: Vec::new(),
            model_file_names: Vec::new(),
            model_tags: Vec::new(),
            max_body_bytes: 4 << 20,
            max_body_memory: DEFAULT_BODY_MEMORY,
            admin_key: None,
            default_namespace: "shared".into(),
            shutdown_timeout: Duration::from_secs(30),
            retry_after_s: 1,
            max_context: 2048,
            max_component_bytes: 64 << 20,
            header_timeout: Duration::from_secs(30),
            body_timeout: Duration::from_secs(30),
            min_body_rate: 1024,
            max_connections: 1024,
            status_page: true,
            strict_model: false,
            cors_origins: crate::cors::CorsOrigins::Any,
            log_level: crate::access_log::LogLevel::Info,
            defaults: RequestDefaults::default(),
            slots: true,
            llama_metrics: false,
            predict_route: None,
            responses_dir: None,
            tools: None,
            cors_proxy: false,
        }
    }
}

/// Everything the server is built from.
pub struct ServerParts {
    pub engine: EngineHandle,
    pub tenants: Tenants,
    pub config: HttpConfig,
    /// The model's chat template (or ChatML).
    pub chat: ChatTemplate,
    /// Tenant components for `/ns/{namespace}/...` (None: those routes serve only `/v1`).
    pub router: Option<Arc<dyn ComponentRouter>>,
    pub reloader: Option<Reloader>,
    /// The engine's lower tiers, for their metrics (None: hot pool only).
    pub store: Option<Arc<memoria_store::TierStack>>,
    /// The first-token padding estimate, shared with the components' runtime.
    pub hit_pad: Arc<memoria_tenant::HitPad>,
    /// The embeddings' padding estimate, shared with the components' runtime.
    pub embed_pad: Arc<memoria_tenant::HitPad>,
    /// Told of every chat or completion answered 2xx (host events), if any.
    pub observer: Option<Arc<dyn crate::PromptObserver>>,
}

/// Shared state of a running server.
pub struct AppState {
    pub engine: EngineHandle,
    pub config: HttpConfig,
    pub chat: ChatTemplate,
    pub router: Option<Arc<dyn ComponentRouter>>,
    pub reloader: Option<Reloader>,
    pub store: Option<Arc<memoria_store::TierStack>>,
    tenants: RwLock<Arc<Tenants>>,
    pub admission: Admission,
    pub metrics: Metrics,
    /// Bytes of request bodies being received (bounded by `config.max_body_memory`).
    pub bodies: crate::body::BodyBudget,
    pub sessions: SessionRegistry,
    /// Stored Responses API answers (`previous_response_id`).
    pub responses: crate::responses::store::ResponseStore,
    /// What each llama-server slot last held (`/slots`).
    pub slots: crate::llama::slots::SlotTable,
    /// Compiled `response_format`s (structured outputs).
    pub structured: crate::openai::structured::StructuredOutputs,
    /// The recompute-time estimate that padded namespaces release first tokens by (shared
    /// with the components' runtime).
    pub hit_pad: Arc<memoria_tenant::HitPad>,
    /// The same padding for embeddings, with its own estimate (a vector costs what a forward
    /// pass over its tokens costs, not a first token).
    pub embed_pad: Arc<memoria_tenant::HitPad>,
    /// Told of every chat or completion answered 2xx (host events), if any.
    pub observer: Option<Arc<dyn crate::PromptObserver>>,
    pub started: Instant,
    /// When this process started, in Unix seconds (`Process-Start-Time-Unix`).
    pub started_unix: u64,
    pub shutting_down: AtomicBool,
    /// Serialises config reloads.
    pub admin_lock: tokio::sync::Mutex<()>,
}

impl AppState {
    /// Requests waiting on this host: the engine's queue plus every namespace's admission queue
    /// (what `/stats` reports as `engine.queue_depth` and `admission[].queued`).
    pub fn queue_depth(&self) -> u64 {
        let engine = self.engine.stats().snapshot().queue_depth;
        self.admission
            .snapshot()
            .iter()
            .map(|(_, g)| u64::try_from(g.queued()).unwrap_or(u64::MAX))
            .fold(engine, u64::saturating_add)
    }

    /// Builds the shared state and registers the namespaces with the engine.
    pub fn new(parts: ServerParts) -> AppState {
        register_namespaces(&parts.engine, &parts.chat, &parts.tenants);
        let responses =
            crate::responses::store::ResponseStore::new(parts.config.responses_dir.clone());
        AppState {
            bodies: crate::body::BodyBudget::new(parts.config.max_body_memory),
            structured: Default::default(),
            hit_pad: parts.hit_pad,
            embed_pad: parts.embed_pad,
            observer: parts.observer,
            engine: parts.engine,
            config: parts.config,
            chat: parts.chat,
            router: parts.router,
            reloader: parts.reloader,
            store: parts.store,
            tenants: RwLock::new(Arc::new(parts.tenants)),
            admission: Admission::default(),
            metrics: Metrics::default(),
            sessions: SessionRegistry::default(),
            slots: Default::default(),
            responses,
            started: Instant::now(),
            started_unix: crate::openai::unix_now(),
            shutting_down: AtomicBool::new(false),
            admin_lock: tokio::sync::Mutex::new(()),
        }
    }

    /// The current namespaces.
    pub fn tenants(&self) -> Arc<Tenants> {
        self.tenants
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Replaces the namespaces (after [`AppState::check_tenants`]).
    pub fn replace_tenants(&self, new: Arc<Tenants>) -> Result<(), String> {
        self.check_tenants(&new)?;
        register_namespaces(&self.engine, &self.chat, &new);
        *self.tenants.write().unwrap_or_else(|e| e.into_inner()) = new;
        Ok(())
    }

    /// Refuses a set of namespaces that renames or drops a namespace, or moves its id, since
    /// live sessions and cached blocks are keyed by id.
    pub fn check_tenants(&self, new: &Tenants) -> Result<(), String> {
        let old = self.tenants();
        for ns in old.iter() {
            match new.get(&ns.name) {
                Some(n) if n.id == ns.id => {}
                Some(_) => {
                    return Err(format!(
                        "namespaces.{}: its position changed; add new namespaces after existing ones or restart",
                        ns.name
                    ));
                }
                None => {
                    return Err(format!(
                        "namespaces.{}: removing a namespace needs a restart",
                        ns.name
                    ));
                }
            }
        }
        Ok(())
    }

    /// The name of namespace `id` (for metric labels); public prefixes' blocks are counted
    /// under `(public)`, a label no namespace name can take.
    pub fn namespace_name(&self, id: NamespaceId) -> String {
        if id == memoria_kv::PublicChain::OWNER {
            return "(public)".into();
        }
        self.tenants()
            .iter()
            .find(|n| n.id == id)
            .map_or_else(|| format!("ns{}", id.0), |n| n.name.clone())
    }

    /// Whether any namespace has keys (then every `/v1` request needs one).
    pub fn auth_required(&self) -> bool {
        self.tenants().iter().any(|n| !n.spec.api_keys.is_empty())
    }

    /// The default namespace.
    pub fn default_namespace(&self) -> Option<Arc<Namespace>> {
        self.tenants().get(&self.config.default_namespace).cloned()
    }
}

/// Registers the namespaces with the engine (the registry table: ids, labels, salts,
/// priorities, caps), then each namespace's public prefixes, by id.
fn register_namespaces(engine: &EngineHandle, chat: &ChatTemplate, tenants: &Tenants) {
    let _ = engine.register_namespaces(tenants.registry_table());
    for ns in tenants.iter() {
        // Public prefixes, as the token forms they take in rendered prompts (none clears).
        let forms = ns
            .public_prefixes
            .iter()
            .flat_map(|t| memoria_sched::public::prefix_tokens(engine.tokenizer(), chat, t))
            .collect();
        let _ = engine.set_public_prefixes(ns.id, forms);
    }
}
