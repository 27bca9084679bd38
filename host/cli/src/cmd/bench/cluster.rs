//! `memoria bench cluster`: the remote tier between `memoria serve` hosts sharing one
//! Valkey/Redis server, measured end to end on child processes of this binary (each host its
//! own temp store, all keys under a prefix unique to the run, deleted at the end). Phases:
//! "prefix" (TTFT on host B of a prompt host A computed, against B computing a prompt of the
//! same length; bytes fetched; fetch latency quantiles; B's text against A's cold one), "round"
//! (`--clients` streaming chats sharing a system prompt through `memoria route` over all hosts,
//! against one host alone: round time, and how many times the cluster computed the shared
//! prefix), "decode" (tokens/s of a host with the remote tier on against one with it off, over
//! several fresh pairs of processes). Each timed prefix
//! request starts with every host's disk and remote write queues empty (the hosts share this
//! machine's cores; in a cluster A's background writes run on A's). Prints figures; asserts
//! nothing about speed.

mod figures;
mod phases;

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use memoria_model::gguf::GgufFile;
use memoria_model::llama::HParams;
use memoria_model::tokenizer::Tokenizer;
use memoria_store::remote::test_server::TestServer;
use serde_json::{Value, json};

use super::procs::{Proc, Scratch};

#[derive(Debug, Args)]
pub struct ClusterArgs {
    /// GGUF model file (every host serves it).
    #[arg(short = 'm', long)]
    model: PathBuf,
    /// Hosts to start: A computes, B fetches, the round is routed over all of them.
    #[arg(long, default_value_t = 2)]
    hosts: usize,
    /// A running Valkey/Redis server (redis://HOST:PORT[/DB]). When omitted, the bench starts
    /// its own (redis-server, valkey-server or $MEMORIA_REDIS_SERVER) on a free port of
    /// 127.0.0.1 and stops it at the end. Keys go under a prefix unique to the run, deleted at
    /// the end; nothing else on the server is touched.
    #[arg(long)]
    remote: Option<String>,
    /// Prompt tokens of the prefix phase, and of the round's shared system prompt.
    #[arg(long, default_value_t = 1000)]
    prefix: usize,
    /// Repetitions of the prefix, round and decode measurements (medians reported; the decode
    /// pairs are spread over ceil(reps / 2) fresh pairs of hosts, two pairs each).
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Concurrent clients of the round.
    #[arg(long, default_value_t = 16)]
    clients: usize,
    /// Tokens of each client's question in the round.
    #[arg(long = "question-tokens", default_value_t = 20)]
    question_tokens: usize,
    /// Completion tokens per request of the prefix and round phases.
    #[arg(short = 'n', long = "max-tokens", default_value_t = 16)]
    max_tokens: usize,
    /// Tokens generated per decode measurement (after a fresh 64-token prompt).
    #[arg(long = "decode-tokens", default_value_t = 256)]
    decode_tokens: usize,
    /// `memoria route --load-scale` for the round (load that halves a host's weight).
    #[arg(long = "load-scale", default_value_t = 8.0)]
    load_scale: f64,
    /// Compute threads of each host (0: one per core).
    #[arg(short = 't', long, default_value_t = 0)]
    threads: usize,
    /// Deadline of one request, and of one child's start, seconds.
    #[arg(long = "timeout-s", default_value_t = 600)]
    timeout_s: u64,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

/// What the phases share.
pub(super) struct Setup {
    pub a: ClusterArgs,
    pub tok: Tokenizer,
    pub chat: memoria_model::chat::ChatTemplate,
    pub n_ctx: usize,
    pub url: String,
    pub dir: Scratch,
    pub deadline: Duration,
}

impl Setup {
    /// `memoria serve` on this model in `dir/NAME`, with the remote tier or without.
    pub fn host(&self, name: &str, remote: bool) -> anyhow::Result<Proc> {
        let store = self.dir.0.join(name);
        let mut args: Vec<OsString> =
            vec!["serve".into(), "-m".into(), self.a.model.clone().into()];
        args.extend(["--store".into(), store.into_os_string()]);
        args.extend(["-t".into(), self.a.threads.to_string().into()]);
        if remote {
            let cfg = self.dir.0.join("host.toml");
            args.extend(["--remote".into(), self.url.clone().into()]);
            args.extend(["--config".into(), cfg.into_os_string()]);
        }
        Proc::spawn(name, &args, &self.dir.0, self.deadline)
    }

    /// `memoria route` over `hosts`.
    pub fn route(&self, hosts: &[Proc]) -> anyhow::Result<Proc> {
        let mut args: Vec<OsString> =
            vec!["route".into(), "-m".into(), self.a.model.clone().into()];
        for h in hosts {
            args.extend(["--backend".into(), format!("http://{}", h.addr).into()]);
        }
        args.extend(["--load-scale".into(), self.a.load_scale.to_string().into()]);
        Proc::spawn("route", &args, &self.dir.0, self.deadline)
    }
}

fn check(a: &ClusterArgs, n_ctx: usize) -> anyhow::Result<()> {
    if !(2..=8).contains(&a.hosts) {
        bail!("--hosts {}: use 2 to 8", a.hosts);
    }
    if !(1..=50).contains(&a.reps) {
        bail!("--reps {}: use 1 to 50", a.reps);
    }
    if !(1..=256).contains(&a.clients) {
        bail!("--clients {}: use 1 to 256", a.clients);
    }
    if a.prefix < 40 {
        bail!(
            "--prefix {}: use at least 40 tokens (a few 16-token blocks)",
            a.prefix
        );
    }
    if a.max_tokens == 0 || a.decode_tokens < 2 || a.question_tokens == 0 {
        bail!("--max-tokens and --question-tokens must be positive, --decode-tokens at least 2");
    }
    if !(a.load_scale.is_finite() && a.load_scale > 0.0) {
        bail!("--load-scale {}: must be a positive number", a.load_scale);
    }
    if !(1..=86_400).contains(&a.timeout_s) {
        bail!("--timeout-s {}: use 1 to 86400", a.timeout_s);
    }
    if a.prefix + a.max_tokens + 8 > n_ctx {
        bail!(
            "--prefix {} + --max-tokens {} exceeds the model's context of {n_ctx} tokens",
            a.prefix,
            a.max_tokens
        );
    }
    if 64 + a.decode_tokens > n_ctx {
        bail!(
            "--decode-tokens {}: 64 prompt tokens + that exceed the context {n_ctx}",
            a.decode_tokens
        );
    }
    Ok(())
}

/// A key prefix of `[A-Za-z0-9._-]`, unique to this run.
fn key_prefix() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("bench-cluster-{}-{nanos}", std::process::id())
}

/// A fresh key file for the run's hosts (256 bits from the kernel, hex, owner-only).
fn write_key_file(path: &std::path::Path) -> anyhow::Result<()> {
    use std::io::{Read, Write};
    let mut key = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut key))
        .context("reading /dev/urandom for the hosts' remote key")?;
    let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
    opts.open(path)
        .and_then(|mut f| f.write_all(hex.as_bytes()))
        .with_context(|| format!("writing {}", path.display()))
}

/// Deletes every key under `prefix:` (SCAN + UNLINK): the number deleted.
fn clear_prefix(url: &str, prefix: &str) -> anyhow::Result<usize> {
    let client = redis::Client::open(url).with_context(|| format!("--remote {url}"))?;
    let mut conn = client
        .get_connection_with_timeout(Duration::from_secs(5))
        .with_context(|| format!("connecting to {url}"))?;
    conn.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut cursor = 0u64;
    let mut n = 0;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(format!("{prefix}:*"))
            .arg("COUNT")
            .arg(1000)
            .query(&mut conn)?;
        if !keys.is_empty() {
            let _: u64 = redis::cmd("UNLINK").arg(&keys).query(&mut conn)?;
            n += keys.len();
        }
        cursor = next;
        if cursor == 0 {
            return Ok(n);
        }
    }
}

pub fn main(a: ClusterArgs) -> anyhow::Result<()> {
    let file =
        GgufFile::open(&a.model).with_context(|| format!("opening {}", a.model.display()))?;
    let hp = HParams::from_gguf(&file).with_context(|| format!("reading {}", a.model.display()))?;
    check(&a, hp.n_ctx_train)?;
    let tok = Tokenizer::from_gguf(&file)
        .with_context(|| format!("reading the tokenizer of {}", a.model.display()))?;
    let chat = crate::cmd::serve::chat_template_for(None, &file, &tok)?;
    drop(file);
    // Our own server when none is given; it lives until the end of main.
    let (own, url) = match &a.remote {
        Some(u) => (None, u.clone()),
        None => {
            let s =
                TestServer::start().map_err(|e| anyhow::anyhow!("starting a Redis server: {e}"))?;
            let u = s.url();
            (Some(s), u)
        }
    };
    let dir = Scratch::new("cluster")?;
    let key_prefix = key_prefix();
    let key_file = dir.0.join("remote.key");
    write_key_file(&key_file)?;
    std::fs::write(
        dir.0.join("host.toml"),
        format!(
            "[store.remote]\nkey_prefix = \"{key_prefix}\"\nauth_key_file = {:?}\n",
            key_file.display().to_string()
        ),
    )?;
    let deadline = Duration::from_secs(a.timeout_s);
    let setup = Setup {
        n_ctx: hp.n_ctx_train,
        tok,
        chat,
        url: url.clone(),
        dir,
        deadline,
        a,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let result = rt.block_on(phases::run(&setup));
    let cleared = clear_prefix(&url, &key_prefix);
    drop(own);
    let mut report = result?;
    report["remote"] = json!({
        "url": url,
        "started_by_bench": setup.a.remote.is_none(),
        "key_prefix": key_prefix,
        "keys_deleted_after": cleared.as_ref().ok(),
    });
    if let Err(e) = cleared {
        eprintln!("memoria bench cluster: could not delete the keys under {key_prefix}: {e:#}");
    }
    if setup.a.json {
        println!("{report}");
    } else {
        print_table(&report);
    }
    Ok(())
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

fn print_table(r: &Value) {
    let p = &r["prefix"];
    let (one, cl) = (&r["round"]["one_host"], &r["round"]["cluster"]);
    let d = &r["decode"];
    println!(
        "memoria bench cluster: {} hosts, {} threads each, remote {}",
        r["hosts"], r["threads"], r["remote"]["url"]
    );
    println!(
        "prefix  {} tokens, {} reps (medians)",
        p["prompt_tokens"], p["reps"]
    );
    println!(
        "  TTFT on B  remote {:>9.1} ms   compute {:>9.1} ms   speedup {:>6.1}x",
        f(&p["ttft_remote_ms"]),
        f(&p["ttft_compute_ms"]),
        f(&p["speedup"])
    );
    println!(
        "  B computed {} tokens, {} from remote ({} cached in usage); fetched {} bytes",
        p["b_computed_tokens"], p["b_remote_tokens"], p["b_cached_tokens"], p["bytes_fetched"]
    );
    println!(
        "  fetch p50 {:.2} ms  p99 {:.2} ms  mean {:.2} ms ({} lookups, {} MGET runs; quantiles from histogram buckets)",
        f(&p["fetch_p50_ms"]),
        f(&p["fetch_p99_ms"]),
        f(&p["fetch_mean_ms"]),
        p["fetches"],
        p["mget_runs"]
    );
    println!("  same text as A's cold run: {}", p["same_text"]);
    println!(
        "round   {} clients, ~{} system + ~{} question tokens, {} rounds each way alternating (the median round shown)",
        r["round"]["clients"],
        r["round"]["system_tokens"],
        r["round"]["question_tokens"],
        r["round"]["rounds"]
    );
    println!("  where         wall_s  ttft_p50_s  computed_tokens  prefix_computed_x  ok");
    for (name, x) in [("one host", one), ("route", cl)] {
        println!(
            "  {:<10} {:>9.2} {:>11.3} {:>16.0} {:>18.2} {:>3}",
            name,
            f(&x["wall_s"]),
            f(&x["ttft_p50_s"]),
            f(&x["computed_tokens"]),
            f(&x["prefix_computations"]),
            x["ok"]
        );
    }
    println!(
        "  route / one host: {:.2}x the median wall time; per backend {}; prefix computed at most {:.2}x in a routed round",
        f(&r["round"]["route_over_one_host"]),
        cl["per_backend"],
        f(&r["round"]["cluster_prefix_computations_max"])
    );
    println!(
        "decode  {} tokens: remote on {:.1} t/s, off {:.1} t/s, slowdown {:.1}% (median of the pairs: {:.1}%; {} process pairs; {} blocks written meanwhile)",
        d["tokens"],
        f(&d["tokens_per_s_remote_on"]),
        f(&d["tokens_per_s_remote_off"]),
        f(&d["slowdown_pct"]),
        f(&d["pair_slowdown_pct"]),
        d["process_pairs"],
        d["remote_writes_during"]
    );
}
