//! `memoria serve`'s llama-server drop-in flags: server-wide sampling and length defaults
//! (`--temp`, `--seed`, `-n`, `--top-k`, ...), model names (`--alias`, `--tags`,
//! `--strict-model-name`), CORS, the log level, `--chat-template-file`, and llama-server's flags
//! that mean nothing on a CPU host (`-ngl`, `-fa`, `--jinja`, `-b`, `--mlock`, ...), accepted and
//! ignored so llama-server command lines run unchanged.

use std::path::PathBuf;

use clap::Args;

/// llama-server's flags that `memoria serve` takes too.
#[derive(Clone, Debug, Default, Args)]
pub struct DropInArgs {
    /// Names the model answers to and `/v1/models` lists, comma-separated (the id is the first
    /// in alphabetical order, as llama-server's).
    #[arg(short = 'a', long = "alias")]
    pub alias: Option<String>,
    /// Free labels `/v1/models` lists with the model, comma-separated.
    #[arg(long = "tags")]
    pub tags: Option<String>,
    /// Answer a request naming another model with OpenAI's 404 `model_not_found` (default: any
    /// name is answered by the served model).
    #[arg(long = "strict-model-name")]
    pub strict_model_name: bool,
    /// Origins whose pages may call the API from a browser: `*` (default), `localhost`, `none`
    /// or a comma-separated list of origins (https://app.example.com).
    #[arg(long = "cors-origins")]
    pub cors_origins: Option<String>,
    /// What is logged to stderr after start-up: error, warn, info (default: a line per request
    /// and per generation) or debug.
    #[arg(long = "log-level")]
    pub log_level: Option<String>,
    /// Log errors only (llama-server's `--log-disable`).
    #[arg(long = "log-disable")]
    pub log_disable: bool,
    /// Log at debug level (llama-server's `--verbose`); chat answers then carry `__verbose`.
    #[arg(short = 'v', long = "verbose")]
    pub verbose: bool,
    /// llama-server's `--reasoning`: `auto` (default) and `on` render the chat template with
    /// `enable_thinking` true, `off` with it false (a request's `chat_template_kwargs` wins).
    #[arg(long = "reasoning", value_name = "on|off|auto")]
    pub reasoning: Option<String>,
    /// Speculative decoding of the default namespace, as llama-server's `--spec-type`: `none`
    /// turns it off; `auto` (memoria's default) or any of llama-server's n-gram types
    /// (`ngram-mod`, ...) drafts from the session's context and the namespace's memory.
    #[arg(long = "spec-type", value_name = "none|auto|ngram-mod|...")]
    pub spec_type: Option<String>,
    /// Most draft tokens verified per step in the default namespace (1-32; llama-server's
    /// `--spec-draft-n-max` / `--spec-ngram-mod-n-max`).
    #[arg(long = "spec-draft-n-max", visible_alias = "spec-ngram-mod-n-max")]
    pub draft_max: Option<usize>,
    /// Default temperature of requests that set none (0: greedy).
    #[arg(long = "temp")]
    pub temp: Option<f32>,
    /// Default seed of requests that set none (-1: a different seed per request).
    #[arg(short = 's', long = "seed", allow_negative_numbers = true)]
    pub seed: Option<i64>,
    /// Tokens generated when a request sets no limit (-1: until the context is full).
    #[arg(
        short = 'n',
        long = "n-predict",
        visible_alias = "predict",
        allow_negative_numbers = true
    )]
    pub n_predict: Option<i64>,
    /// Default top-k (0: off).
    #[arg(long = "top-k")]
    pub top_k: Option<usize>,
    /// Default top-p (1: off).
    #[arg(long = "top-p")]
    pub top_p: Option<f32>,
    /// Default min-p (0: off).
    #[arg(long = "min-p")]
    pub min_p: Option<f32>,
    /// Default repetition penalty (1: off).
    #[arg(long = "repeat-penalty")]
    pub repeat_penalty: Option<f32>,
    /// Tokens the penalties look back over (0: penalties off).
    #[arg(long = "repeat-last-n")]
    pub repeat_last_n: Option<usize>,
    /// Default presence penalty (0: off).
    #[arg(long = "presence-penalty")]
    pub presence_penalty: Option<f32>,
    /// Default frequency penalty (0: off).
    #[arg(long = "frequency-penalty")]
    pub frequency_penalty: Option<f32>,
    /// A Jinja chat template file, instead of the model's.
    #[arg(long = "chat-template-file", conflicts_with = "chat_template")]
    pub chat_template_file: Option<PathBuf>,
    /// Where slot saves go (llama-server's flag): memoria keeps them in its session store, so
    /// this is `--store DIR` when no store is given.
    #[arg(long = "slot-save-path")]
    pub slot_save_path: Option<PathBuf>,
    /// Answer `GET /slots` with 501, as llama-server without `--slots`.
    #[arg(long = "no-slots", conflicts_with = "slots")]
    pub no_slots: bool,
    /// Serve `GET /slots` (the default).
    #[arg(long = "slots")]
    pub slots: bool,
    /// Turn the status page (`/ui`, `/`) off.
    #[arg(long = "no-ui", visible_alias = "no-webui")]
    pub no_ui: bool,
    /// K cache type (llama-server's `-ctk`): as --cache-type.
    #[arg(long = "cache-type-k", value_parser = super::run::parse_kv)]
    pub cache_type_k: Option<memoria_kv::KvElem>,
    /// V cache type (llama-server's `-ctv`): must equal the K cache type.
    #[arg(long = "cache-type-v", value_parser = super::run::parse_kv)]
    pub cache_type_v: Option<memoria_kv::KvElem>,
    /// Serve `/cors-proxy?url=...`, which fetches any http(s) URL for the web UI's MCP client
    /// (llama-server's flag): do not turn on where clients are not trusted with the host's
    /// network. Off by default (403).
    #[arg(long = "ui-mcp-proxy", visible_alias = "webui-mcp-proxy")]
    pub ui_mcp_proxy: bool,
    #[command(flatten)]
    pub ignored: Ignored,
}

/// llama-server flags with no meaning here, accepted so its command lines run unchanged:
/// memoria runs on the CPU (no layers to offload, its own attention kernels), always batches
/// continuously, always renders the model's Jinja template, always serves `/metrics` (with
/// `--metrics`, llama-server's families too) and embeddings, always maps the weights, and always lets a request use the whole context of
/// one request (`--kv-unified`).
#[derive(Clone, Debug, Default, Args)]
pub struct Ignored {
    /// Ignored: layers on a GPU (memoria runs on the CPU).
    #[arg(long = "n-gpu-layers", visible_alias = "gpu-layers", value_name = "N")]
    pub n_gpu_layers: Option<String>,
    /// Ignored: flash attention (memoria's attention kernels are its own).
    #[arg(long = "flash-attn", num_args = 0..=1, default_missing_value = "on", value_name = "on|off|auto")]
    pub flash_attn: Option<String>,
    /// Ignored: the model's Jinja template is always used.
    #[arg(long = "jinja")]
    pub jinja: bool,
    /// Ignored (see --jinja).
    #[arg(long = "no-jinja")]
    pub no_jinja: bool,
    /// Ignored: the engine plans its own steps (`[cache] step_tokens`).
    #[arg(short = 'b', long = "batch-size", value_name = "N")]
    pub batch_size: Option<usize>,
    /// Ignored (see --batch-size).
    #[arg(long = "ubatch-size", value_name = "N")]
    pub ubatch_size: Option<usize>,
    /// Ignored: weights are mapped and, where interleaved, copied at load.
    #[arg(long = "mlock")]
    pub mlock: bool,
    /// Ignored (see --mlock).
    #[arg(long = "no-mmap")]
    pub no_mmap: bool,
    /// Ignored: batching is always continuous.
    #[arg(long = "cont-batching")]
    pub cont_batching: bool,
    /// Ignored (see --cont-batching).
    #[arg(long = "no-cont-batching")]
    pub no_cont_batching: bool,
    /// Adds llama-server's `llamacpp:*` families to `/metrics` (always served, with
    /// memoria's own families).
    #[arg(long = "metrics")]
    pub metrics: bool,
    /// Ignored: embeddings are always served.
    #[arg(long = "embedding", visible_alias = "embeddings")]
    pub embedding: bool,
    /// Ignored: every request may use the whole per-request context (`-c`).
    #[arg(long = "kv-unified")]
    pub kv_unified: bool,
    /// Ignored: nothing is downloaded at start.
    #[arg(long = "offline")]
    pub offline: bool,
    /// Ignored: there is no warm-up pass.
    #[arg(long = "no-warmup")]
    pub no_warmup: bool,
    /// Ignored: the prompt cache is one shared pool, with no per-slot copies to save or clear.
    #[arg(long = "cache-idle-slots")]
    pub cache_idle_slots: bool,
    /// Ignored: the prompt cache lives in the K/V pool, sized by `[cache] budget_mb`, not in a
    /// separate host-memory cache.
    #[arg(long = "cache-ram", value_name = "MiB", allow_hyphen_values = true)]
    pub cache_ram: Option<i64>,
    /// Ignored: sampling always runs on the host, with the same results.
    #[arg(long = "backend-sampling", visible_alias = "backend_sampling")]
    pub backend_sampling: bool,
    /// Ignored (see --cache-idle-slots).
    #[arg(long = "no-cache-idle-slots")]
    pub no_cache_idle_slots: bool,
}

/// llama-server's multi-letter short flags, rewritten to their long forms before parsing
/// (clap's short flags are one letter).
pub const SHORT_FLAGS: &[(&str, &str)] = &[
    ("-np", "--parallel"),
    ("-ngl", "--n-gpu-layers"),
    ("-fa", "--flash-attn"),
    ("-ub", "--ubatch-size"),
    ("-ctk", "--cache-type-k"),
    ("-ctv", "--cache-type-v"),
    ("-cb", "--cont-batching"),
    ("-nocb", "--no-cont-batching"),
    ("-kvu", "--kv-unified"),
    ("-rea", "--reasoning"),
    ("-cram", "--cache-ram"),
];
