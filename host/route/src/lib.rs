//! `memoria route`: an OpenAI-compatible front door for several `memoria serve` hosts. It
//! loads the model's tokenizer and chat template (a vocab-only GGUF is enough), tokenizes each
//! request exactly as the hosts do, keys its first block with the routing chain
//! (`memoria_kv::route_key`: the hosts' block hash under a public root, never a host's salt),
//! and sends it to the backend that wins rendezvous hashing on that key, weighted by load
//! (queue depth polled from `/stats` plus the router's own in-flight count), so equal prefixes
//! meet on one host and one hot host is not flooded. Backends failing `/health` leave the table;
//! a refused connection marks one down and the request goes to the next-ranked.
//!
//! With `--events redis://...` (or `--events-cluster` on a Redis Cluster) the hosts' events
//! (`memoria_store::remote::events`) say which routing keys each holds, and in which tier: a
//! request goes to the host holding the longest prefix of its chain (all blocks), weighted by
//! load, and only hosts whose liveness key exists are routable.
//!
//! Module map: `key` (request → routing key), `rank` (rendezvous ranking), `table` (backends
//! and their state), `poll` (health and load), `events` and `prefix` (following host events),
//! `upstream` (hyper client), `proxy` (one request), `headers`, `body`, `metrics`, `listen`
//! (the accept loop).

mod body;
mod events;
mod headers;
mod key;
mod listen;
mod metrics;
mod poll;
mod pool;
mod prefix;
mod proxy;
mod rank;
mod recent;
mod table;
mod upstream;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use memoria_model::chat::ChatTemplate;
use memoria_model::gguf::GgufFile;
use memoria_model::tokenizer::Tokenizer;

use table::{Backend, Table};

#[derive(Debug, Args)]
pub struct RouteArgs {
    /// GGUF model or vocab-only file whose tokenizer and chat template the hosts use.
    #[arg(short = 'm', long)]
    model: PathBuf,
    /// A host's base URL, e.g. http://10.0.0.5:8080 (repeat for each host).
    #[arg(long = "backend", required = true)]
    backends: Vec<String>,
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Port (0: any free port; the address is printed).
    #[arg(long, default_value_t = 8000)]
    port: u16,
    /// Chat template by built-in name, as the hosts' `--chat-template` (default: the model's).
    #[arg(long = "chat-template")]
    chat_template: Option<String>,
    /// Tokens per K/V block on the hosts (`[cache] block_tokens`).
    #[arg(long = "block-tokens", default_value_t = 16)]
    block_tokens: usize,
    /// Load (queued plus in-flight requests) that halves a backend's rendezvous weight.
    #[arg(long = "load-scale", default_value_t = 8.0)]
    load_scale: f64,
    /// Milliseconds between health and load polls of each backend.
    #[arg(long = "poll-ms", default_value_t = 1000)]
    poll_ms: u64,
    /// Bearer key for the hosts' `/stats` (their admin key), when they require one.
    #[arg(long = "stats-key")]
    stats_key: Option<String>,
    /// Largest request body accepted, in bytes.
    #[arg(long = "max-body-bytes", default_value_t = 4 << 20)]
    max_body_bytes: usize,
    /// Seconds to wait for a host's response head (generation included when not streamed).
    #[arg(long = "timeout-s", default_value_t = 600)]
    timeout_s: u64,
    /// Connections served at once.
    #[arg(long = "max-connections", default_value_t = 1024)]
    max_connections: usize,
    /// The hosts' events server (their `[store.remote] url` with `events = true`), e.g.
    /// redis://10.0.0.9:6379: route to the host holding the longest prefix of the prompt, and
    /// only to hosts whose liveness key exists. Without it: rendezvous on the first block.
    #[arg(long)]
    events: Option<String>,
    /// The same on a Redis Cluster (the hosts' `[store.remote] cluster`): its seed nodes,
    /// comma-separated or the flag repeated, e.g. redis://10.0.0.1:7000,redis://10.0.0.2:7000
    /// (instead of --events).
    #[arg(
        long = "events-cluster",
        value_delimiter = ',',
        conflicts_with = "events"
    )]
    events_cluster: Vec<String>,
    /// The hosts' `[store.remote] key_prefix`.
    #[arg(long = "events-prefix", default_value = "memoria")]
    events_prefix: String,
}

/// Seconds a client has to send a request head, and then its body (serve's defaults).
const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);
/// Connecting to a host: past this it counts as refused and the next one is tried.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Open exchanges may finish for this long after SIGTERM.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// Picks the chat template for a model: a configured name or source, or the model's own.
pub type ChatTemplateFor =
    dyn Fn(Option<&str>, &GgufFile, &Tokenizer) -> anyhow::Result<ChatTemplate>;

/// What the router takes from the binary it runs in: the chat-template policy `serve` applies
/// (so both tokenize a request the same way) and the server's async runtime.
pub struct Host<'a> {
    /// The chat template for the model (a configured name or source, or the model's own).
    pub chat_template: &'a ChatTemplateFor,
    /// The async runtime the router runs on.
    pub runtime: &'a dyn Fn() -> anyhow::Result<tokio::runtime::Runtime>,
}

/// Runs the router until SIGTERM or SIGINT.
pub fn main(a: RouteArgs, h: Host<'_>) -> anyhow::Result<()> {
    let host: IpAddr = a
        .host
        .parse()
        .with_context(|| format!("--host {:?} is not an IP address", a.host))?;
    if !(1..=memoria_kv::MAX_BLOCK_TOKENS).contains(&a.block_tokens) {
        bail!(
            "--block-tokens {}: use 1 to {}",
            a.block_tokens,
            memoria_kv::MAX_BLOCK_TOKENS
        );
    }
    if !(a.load_scale.is_finite() && a.load_scale > 0.0) {
        bail!("--load-scale {}: must be a positive number", a.load_scale);
    }
    if !(10..=60_000).contains(&a.poll_ms) {
        bail!("--poll-ms {}: use 10 to 60000", a.poll_ms);
    }
    if !(1..=86_400).contains(&a.timeout_s) {
        bail!("--timeout-s {}: use 1 to 86400", a.timeout_s);
    }
    if a.max_body_bytes < 1024 {
        bail!(
            "--max-body-bytes {}: must be at least 1024",
            a.max_body_bytes
        );
    }
    if !(1..=1 << 20).contains(&a.max_connections) {
        bail!(
            "--max-connections {}: use 1 to {}",
            a.max_connections,
            1 << 20
        );
    }
    let mut backends = Vec::with_capacity(a.backends.len());
    for b in &a.backends {
        let b = Backend::parse(b)?;
        if backends.iter().any(|o: &Backend| o.url == b.url) {
            bail!("--backend {} is given twice", b.url);
        }
        backends.push(b);
    }
    let file =
        GgufFile::open(&a.model).with_context(|| format!("opening {}", a.model.display()))?;
    let tokenizer = Tokenizer::from_gguf(&file)
        .with_context(|| format!("reading the tokenizer of {}", a.model.display()))?;
    let chat = (h.chat_template)(a.chat_template.as_deref(), &file, &tokenizer)?;
    let events_from = match (&a.events, a.events_cluster.is_empty()) {
        (Some(url), _) => Some(memoria_store::Endpoint::Server(url.clone())),
        (None, false) => Some(memoria_store::Endpoint::Cluster(a.events_cluster.clone())),
        (None, true) => None,
    };
    let events_described = events_from.as_ref().map(memoria_store::Endpoint::describe);
    let follower = events_from
        .map(|endpoint| {
            memoria_store::remote::events::Follower::new(
                endpoint,
                &a.events_prefix,
                Duration::from_millis(a.poll_ms.clamp(200, 2000)),
            )
        })
        .transpose()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let table = Arc::new(Table {
        backends,
        load_scale: a.load_scale,
    });
    let event_counters = follower
        .as_ref()
        .map(|_| Arc::new(events::EventCounters::default()));
    let route = Arc::new(proxy::Route {
        table: table.clone(),
        tokenizer: Arc::new(tokenizer),
        chat: Arc::new(chat),
        block_tokens: a.block_tokens,
        limits: proxy::Limits {
            max_body_bytes: a.max_body_bytes,
            body_timeout: CLIENT_TIMEOUT,
            connect_timeout: CONNECT_TIMEOUT,
            response_timeout: Duration::from_secs(a.timeout_s),
        },
        counters: metrics::Counters::default(),
        events: event_counters.clone(),
    });
    let interval = Duration::from_millis(a.poll_ms);
    let poll_cfg = poll::PollConfig {
        interval,
        timeout: interval.max(Duration::from_millis(500)),
        stats_key: a.stats_key.clone(),
    };
    let listen_cfg = listen::ListenConfig {
        max_connections: a.max_connections,
        header_timeout: CLIENT_TIMEOUT,
        drain_timeout: DRAIN_TIMEOUT,
    };
    let rt = (h.runtime)()?;
    rt.block_on(async move {
        let addr = SocketAddr::new(host, a.port);
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("binding {addr}"))?;
        poll::poll_all(&table, &poll_cfg).await;
        poll::spawn(table.clone(), poll_cfg);
        if let (Some(mut f), Some(c)) = (follower, event_counters) {
            events::round(&mut f, &table, &c).await;
            events::spawn(f, table.clone(), c, interval);
        }
        println!("memoria: listening on http://{}", listener.local_addr()?);
        eprintln!(
            "memoria route: {} backends ({} up), block {} tokens, {}; Ctrl-C or SIGTERM stops",
            table.backends.len(),
            table.up_count(),
            a.block_tokens,
            match &events_described {
                Some(u) => format!("events from {u}"),
                None => "rendezvous on the first block".to_string(),
            }
        );
        let drained =
            listen::run(listener, route, listen_cfg, memoria_http::shutdown_signal()).await;
        if drained {
            eprintln!("memoria route: stopped");
        } else {
            eprintln!("memoria route: stopped after the drain timeout with exchanges still open");
        }
        Ok(())
    })
}
