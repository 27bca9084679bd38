//! The operator's log on stderr: one line per answered request (method, path, status, time) and
//! one per finished generation (prompt tokens, cached, prompt and generation speed), as
//! llama-server prints them, when `--log-level` is `info` or `debug` (the default is `info`).
//! Never a request's body or key.

use std::time::{Duration, Instant};

use http::{Method, StatusCode};

use crate::state::AppState;

/// How much the server writes to stderr after start-up.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    /// Errors only.
    Error,
    /// Errors and warnings.
    Warn,
    /// Warnings, one line per request and one per generation.
    #[default]
    Info,
    /// As `info`, with requests' routing details.
    Debug,
}

impl LogLevel {
    /// Reads `error`, `warn`, `info` or `debug`.
    pub fn parse(s: &str) -> Result<LogLevel, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "error" | "none" | "off" => Ok(LogLevel::Error),
            "warn" | "warning" => Ok(LogLevel::Warn),
            "info" => Ok(LogLevel::Info),
            "debug" | "trace" => Ok(LogLevel::Debug),
            other => Err(format!(
                "{other:?} is not a log level: use error, warn, info or debug"
            )),
        }
    }
}

/// One line for an answered request (the head of a streamed one: its body may still run).
pub fn log(state: &AppState, method: &Method, path: &str, status: StatusCode, started: Instant) {
    if state.config.log_level < LogLevel::Info {
        return;
    }
    let shown: String = path.chars().take(200).collect();
    eprintln!(
        "memoria: {method} {shown} {} {:.1} ms",
        status.as_u16(),
        ms(started.elapsed())
    );
}

/// What one generation took, for its log line.
pub struct GenerationTimes {
    pub route: &'static str,
    pub namespace: String,
    pub prompt_tokens: usize,
    pub cached_tokens: usize,
    pub completion_tokens: usize,
    /// From the request's arrival to its first output.
    pub prompt: Duration,
    /// From the first output to the last.
    pub generation: Duration,
}

/// One line for a finished generation: llama-server's `prompt eval time` and `eval time`.
pub fn generation(state: &AppState, t: &GenerationTimes) {
    if state.config.log_level < LogLevel::Info {
        return;
    }
    let computed = t.prompt_tokens.saturating_sub(t.cached_tokens);
    eprintln!(
        "memoria: {} ns={} prompt {} tokens ({} cached) in {:.1} ms ({:.1} t/s), generated {} in {:.1} ms ({:.1} t/s)",
        t.route,
        t.namespace,
        t.prompt_tokens,
        t.cached_tokens,
        ms(t.prompt),
        per_second(computed, t.prompt),
        t.completion_tokens,
        ms(t.generation),
        per_second(t.completion_tokens.saturating_sub(1), t.generation),
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Tokens per second (0 when no time passed).
pub fn per_second(tokens: usize, d: Duration) -> f64 {
    let s = d.as_secs_f64();
    if s > 0.0 { tokens as f64 / s } else { 0.0 }
}
