//! `memoria bench serve`: a bounded load generator for a running `memoria serve` on the loopback
//! interface. Each round, N clients send one streaming chat request at once, all sharing a system
//! prompt of about `--system-tokens` tokens with a distinct question of about
//! `--question-tokens`; it reports wall time, throughput, time to first token (p50/p99), the
//! state-cache hit rate from `usage.prompt_tokens_details.cached_tokens`, each stream's decode
//! rate after its first token (median), 429s and errors. `--response-format` sends the same
//! `response_format` with every request (constrained decoding's cost, run beside a run without).
//! Invariants: it only ever connects to a loopback address; every request has a deadline.

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use bytes::Bytes;
use clap::Args;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpStream;

#[derive(Debug, Args)]
pub struct ServeBenchArgs {
    /// The server (loopback only).
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    url: String,
    /// Concurrent clients.
    #[arg(short = 'c', long, default_value_t = 16)]
    clients: usize,
    /// Tokens of the shared system prompt (approximate, sized with the server's /tokenize).
    #[arg(long, default_value_t = 1000)]
    system_tokens: usize,
    /// Tokens of each client's question (approximate).
    #[arg(long, default_value_t = 20)]
    question_tokens: usize,
    /// Completion tokens per request.
    #[arg(short = 'n', long = "max-tokens", default_value_t = 16)]
    max_tokens: usize,
    /// Rounds (each a new question per client; later rounds find the system prompt cached).
    #[arg(long, default_value_t = 2)]
    rounds: usize,
    /// Bearer key.
    #[arg(long = "api-key")]
    api_key: Option<String>,
    /// Deadline of one request, seconds.
    #[arg(long = "timeout-s", default_value_t = 600)]
    timeout_s: u64,
    /// A `response_format` object sent with every request, as JSON text or `@FILE`
    /// (e.g. `{"type":"json_object"}`).
    #[arg(long = "response-format")]
    response_format: Option<String>,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

/// One request's outcome.
#[derive(Debug, Default)]
struct Outcome {
    status: u16,
    ttft_s: Option<f64>,
    /// Seconds from sending to the last event.
    end_s: f64,
    prompt_tokens: u64,
    cached_tokens: u64,
    completion_tokens: u64,
    error: Option<String>,
}

pub fn main(a: ServeBenchArgs) -> anyhow::Result<()> {
    if a.clients == 0 || a.clients > 1024 || a.rounds == 0 || a.rounds > 100 {
        bail!("--clients must be 1..=1024 and --rounds 1..=100");
    }
    let addr = loopback_addr(&a.url)?;
    let format = a
        .response_format
        .as_deref()
        .map(response_format)
        .transpose()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(run(a, addr, format))
}

/// The socket address of `http://HOST:PORT`, refused unless it is a loopback address.
fn loopback_addr(url: &str) -> anyhow::Result<SocketAddr> {
    let rest = url
        .strip_prefix("http://")
        .with_context(|| format!("--url {url:?}: use http://127.0.0.1:PORT"))?;
    let hostport = rest.split('/').next().unwrap_or(rest);
    let addr = hostport
        .to_socket_addrs()
        .with_context(|| format!("--url {url:?}: not HOST:PORT"))?
        .find(|a| a.ip().is_loopback())
        .with_context(|| {
            format!("--url {url:?}: memoria bench serve only talks to loopback addresses")
        })?;
    Ok(addr)
}

/// The `--response-format` argument: JSON text or `@FILE`, an object with a `type`.
fn response_format(arg: &str) -> anyhow::Result<Value> {
    let text = match arg.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path)
            .with_context(|| format!("--response-format: reading {path}"))?,
        None => arg.to_string(),
    };
    let v: Value = serde_json::from_str(&text).context("--response-format is not JSON")?;
    if !v.get("type").is_some_and(Value::is_string) {
        bail!("--response-format: an object with a \"type\" (json_object or json_schema)");
    }
    Ok(v)
}

async fn run(a: ServeBenchArgs, addr: SocketAddr, format: Option<Value>) -> anyhow::Result<()> {
    let key = a.api_key.clone();
    let system = sized_text(addr, key.as_deref(), a.system_tokens, 0).await?;
    let mut rounds = Vec::new();
    for r in 0..a.rounds {
        let mut questions = Vec::with_capacity(a.clients);
        for i in 0..a.clients {
            let seed = 1 + (r * a.clients + i) as u64;
            questions.push(sized_text(addr, key.as_deref(), a.question_tokens, seed).await?);
        }
        let started = Instant::now();
        let tasks: Vec<_> = questions
            .into_iter()
            .map(|q| {
                let mut body = json!({
                    "messages": [{"role": "system", "content": system}, {"role": "user", "content": q}],
                    "max_tokens": a.max_tokens,
                    "temperature": 0,
                    "stream": true,
                    "stream_options": {"include_usage": true},
                });
                if let Some(f) = &format {
                    body["response_format"] = f.clone();
                }
                let key = key.clone();
                let deadline = Duration::from_secs(a.timeout_s);
                tokio::spawn(async move {
                    match tokio::time::timeout(deadline, chat(addr, key.as_deref(), body)).await {
                        Ok(Ok(o)) => o,
                        Ok(Err(e)) => Outcome { error: Some(format!("{e:#}")), ..Outcome::default() },
                        Err(_) => Outcome { error: Some("deadline passed".into()), ..Outcome::default() },
                    }
                })
            })
            .collect();
        let mut outcomes = Vec::with_capacity(tasks.len());
        for t in tasks {
            outcomes.push(t.await.unwrap_or_else(|e| Outcome {
                error: Some(e.to_string()),
                ..Outcome::default()
            }));
        }
        rounds.push(summarise(r + 1, started.elapsed().as_secs_f64(), &outcomes));
    }
    let stats = get_json(addr, key.as_deref(), "/stats").await.ok();
    let report = json!({
        "url": a.url,
        "clients": a.clients,
        "system_tokens": a.system_tokens,
        "question_tokens": a.question_tokens,
        "max_tokens": a.max_tokens,
        "response_format": format,
        "rounds": rounds,
        "server_state_cache": stats.as_ref().and_then(|s| s.get("state_cache")).cloned(),
    });
    if a.json {
        println!("{report}");
    } else {
        println!(
            "memoria bench serve: {} clients, ~{} system + ~{} question tokens, {} completion tokens",
            a.clients, a.system_tokens, a.question_tokens, a.max_tokens
        );
        println!(
            "round   wall_s   req/s   gen_tok/s  decode_tok/s  ttft_p50_s  ttft_p99_s  hit_rate  ok  429  errors"
        );
        for r in &rounds {
            println!(
                "{:>5} {:>8.2} {:>7.2} {:>11.1} {:>13.1} {:>11.3} {:>11.3} {:>9.3} {:>3} {:>4} {:>7}",
                r["round"],
                f(&r["wall_s"]),
                f(&r["requests_per_s"]),
                f(&r["completion_tokens_per_s"]),
                f(&r["decode_tokens_per_s_p50"]),
                f(&r["ttft_p50_s"]),
                f(&r["ttft_p99_s"]),
                f(&r["hit_rate"]),
                r["ok"],
                r["rejected_429"],
                r["errors"]
            );
        }
        for r in &rounds {
            if let Some(e) = r["first_error"].as_str() {
                println!("round {}: first error: {e}", r["round"]);
            }
        }
    }
    Ok(())
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or(0.0)
}

fn summarise(round: usize, wall_s: f64, outs: &[Outcome]) -> Value {
    let ok: Vec<&Outcome> = outs
        .iter()
        .filter(|o| o.status == 200 && o.error.is_none())
        .collect();
    let rejected = outs.iter().filter(|o| o.status == 429).count();
    let errors = outs.len() - ok.len() - rejected;
    let mut ttft: Vec<f64> = ok.iter().filter_map(|o| o.ttft_s).collect();
    ttft.sort_by(f64::total_cmp);
    let pct = |p: f64| {
        if ttft.is_empty() {
            0.0
        } else {
            ttft[((ttft.len() - 1) as f64 * p).round() as usize]
        }
    };
    // Each stream's rate after its first token: the tokens that followed over the time they took.
    let mut decode: Vec<f64> = ok
        .iter()
        .filter_map(|o| {
            let after = o.end_s - o.ttft_s?;
            (o.completion_tokens > 1 && after > 0.0)
                .then(|| (o.completion_tokens - 1) as f64 / after)
        })
        .collect();
    decode.sort_by(f64::total_cmp);
    let decode_p50 = decode.get(decode.len() / 2).copied().unwrap_or(0.0);
    let prompt: u64 = ok.iter().map(|o| o.prompt_tokens).sum();
    let cached: u64 = ok.iter().map(|o| o.cached_tokens).sum();
    let completion: u64 = ok.iter().map(|o| o.completion_tokens).sum();
    json!({
        "round": round,
        "wall_s": wall_s,
        "ok": ok.len(),
        "rejected_429": rejected,
        "errors": errors,
        "requests_per_s": ok.len() as f64 / wall_s.max(1e-9),
        "completion_tokens_per_s": completion as f64 / wall_s.max(1e-9),
        "decode_tokens_per_s_p50": decode_p50,
        "ttft_p50_s": pct(0.5),
        "ttft_p99_s": pct(0.99),
        "prompt_tokens": prompt,
        "cached_tokens": cached,
        "hit_rate": if prompt == 0 { 0.0 } else { cached as f64 / prompt as f64 },
        "first_error": outs.iter().find_map(|o| o.error.clone()),
    })
}

const WORDS: &[&str] = &[
    "the", "river", "mountain", "quiet", "bright", "garden", "story", "light", "morning", "city",
    "window", "paper", "friend", "ocean", "green", "music", "forest", "simple", "answer", "stone",
    "winter", "market", "little", "road", "cloud", "honest", "table", "summer", "voice", "north",
];

/// Deterministic text of about `tokens` tokens with the server's tokenizer.
async fn sized_text(
    addr: SocketAddr,
    key: Option<&str>,
    tokens: usize,
    seed: u64,
) -> anyhow::Result<String> {
    let words = |n: usize| -> String {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut out = if seed == 0 {
            String::from("You are a careful assistant.")
        } else {
            format!("Question {seed}:")
        };
        for _ in 0..n {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            out.push(' ');
            out.push_str(WORDS[(s % WORDS.len() as u64) as usize]);
        }
        out
    };
    let mut n = tokens.max(1);
    for _ in 0..4 {
        let text = words(n);
        let got = count_tokens(addr, key, &text).await?;
        if got == tokens || got == 0 {
            return Ok(text);
        }
        n = (n * tokens / got).max(1);
    }
    Ok(words(n))
}

async fn count_tokens(addr: SocketAddr, key: Option<&str>, text: &str) -> anyhow::Result<usize> {
    let (status, body) = request(
        addr,
        key,
        "POST",
        "/tokenize",
        json!({"content": text}).to_string(),
    )
    .await?;
    let v = read_json(status, body).await?;
    Ok(v["tokens"].as_array().map_or(0, Vec::len))
}

async fn get_json(addr: SocketAddr, key: Option<&str>, path: &str) -> anyhow::Result<Value> {
    let (status, body) = request(addr, key, "GET", path, String::new()).await?;
    read_json(status, body).await
}

async fn read_json(status: u16, body: Incoming) -> anyhow::Result<Value> {
    let bytes = body.collect().await?.to_bytes();
    if status != 200 {
        bail!("HTTP {status}: {}", String::from_utf8_lossy(&bytes));
    }
    Ok(serde_json::from_slice(&bytes)?)
}

async fn request(
    addr: SocketAddr,
    key: Option<&str>,
    method: &str,
    path: &str,
    body: String,
) -> anyhow::Result<(u16, Incoming)> {
    let stream = TcpStream::connect(addr)
        .await
        .with_context(|| format!("connecting to {addr}"))?;
    stream.set_nodelay(true)?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    let mut req = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header("host", addr.to_string())
        .header("content-type", "application/json");
    if let Some(k) = key {
        req = req.header("authorization", format!("Bearer {k}"));
    }
    let resp = sender
        .send_request(req.body(Full::new(Bytes::from(body)))?)
        .await?;
    Ok((resp.status().as_u16(), resp.into_body()))
}

/// One streaming chat request.
async fn chat(addr: SocketAddr, key: Option<&str>, body: Value) -> anyhow::Result<Outcome> {
    let started = Instant::now();
    let (status, body) =
        request(addr, key, "POST", "/v1/chat/completions", body.to_string()).await?;
    let mut out = Outcome {
        status,
        ..Outcome::default()
    };
    if status != 200 {
        let bytes = body.collect().await?.to_bytes();
        if status != 429 {
            out.error = Some(format!(
                "HTTP {status}: {}",
                String::from_utf8_lossy(&bytes)
            ));
        }
        return Ok(out);
    }
    let mut done = false;
    let mut events = super::client::SseReader::new(body);
    while let Some(data) = events.next().await? {
        if data == "[DONE]" {
            done = true;
            continue;
        }
        let v: Value = serde_json::from_str(&data).context("an SSE chunk is not JSON")?;
        if let Some(e) = v.get("error") {
            out.error = Some(e.to_string());
        }
        let content = &v["choices"][0]["delta"]["content"];
        if out.ttft_s.is_none() && content.as_str().is_some_and(|s| !s.is_empty()) {
            out.ttft_s = Some(started.elapsed().as_secs_f64());
        }
        if let Some(u) = v.get("usage").filter(|u| !u.is_null()) {
            out.prompt_tokens = u["prompt_tokens"].as_u64().unwrap_or(0);
            out.completion_tokens = u["completion_tokens"].as_u64().unwrap_or(0);
            out.cached_tokens = u["prompt_tokens_details"]["cached_tokens"]
                .as_u64()
                .unwrap_or(0);
        }
    }
    if !done && out.error.is_none() {
        out.error = Some("the stream ended without [DONE]".into());
    }
    out.end_s = started.elapsed().as_secs_f64();
    if out.ttft_s.is_none() {
        out.ttft_s = Some(out.end_s);
    }
    Ok(out)
}
