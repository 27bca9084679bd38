//! `memoria bench speculate --addr HOST:PORT`: the same workloads against a running server's
//! `/v1/chat/completions` (memoria's, or llama-server's with or without `--spec-type`), decode
//! speed read from the answer's llama-server `timings` (`predicted_per_second`, `draft_n`,
//! `draft_n_accepted`). Each request is sent twice, with `"speculation": "off"` and without (a
//! server that does not know the field answers both the same way, which the table then shows).

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::{Value, json};

use super::workloads::Workload;
use crate::cmd::bench::client::Client;

/// One answer's figures.
pub struct Answer {
    pub text: String,
    pub tokens: usize,
    pub tps: f64,
    pub drafted: usize,
    pub accepted: usize,
}

/// Asks `addr` for `w` at `temperature` (seeded), with speculation off or left to the server.
pub async fn ask(
    addr: SocketAddr,
    w: &Workload,
    ntg: usize,
    temperature: f32,
    off: bool,
) -> anyhow::Result<Answer> {
    let client = Client::new(addr, Duration::from_secs(600));
    let mut body = json!({
        "messages": [{"role": "user", "content": w.message}],
        "max_tokens": ntg,
        "temperature": temperature,
        "seed": 42,
    });
    if off {
        body["speculation"] = "off".into();
    }
    let v = client.post("/v1/chat/completions", &body).await?;
    let t = &v["timings"];
    let count = |x: &Value| x.as_u64().map_or(0, |n| n as usize);
    Ok(Answer {
        text: v["choices"][0]["message"]["content"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        tokens: count(&v["usage"]["completion_tokens"]),
        tps: t["predicted_per_second"].as_f64().unwrap_or(0.0),
        drafted: count(&t["draft_n"]),
        accepted: count(&t["draft_n_accepted"]),
    })
}
