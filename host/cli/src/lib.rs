//! `memoria`: the command-line front end. Parses flags (clap) and dispatches to one module per
//! subcommand under `cmd/`. A library so the integration tests can build the same binary.

mod cmd;
mod config;
pub mod heap;
mod load;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// memoria: a serverless LLM host with a shared session-state memory.
#[derive(Debug, Parser)]
#[command(name = "memoria", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Generate text from a prompt with a GGUF model.
    Run(cmd::run::RunArgs),
    /// Tokenize text with a model's (or a vocab-only file's) tokenizer.
    Tokenize(cmd::tokenize::TokenizeArgs),
    /// Print a GGUF file's metadata and tensors.
    Inspect(cmd::inspect::InspectArgs),
    /// Top-k log-probabilities after every position of a sequence (teacher forcing).
    Logprobs(cmd::logprobs::LogprobsArgs),
    /// Perplexity of a text file, as llama-perplexity computes it.
    Perplexity(cmd::perplexity::PerplexityArgs),
    /// Fetch a model (catalogue name or GGUF URL) into the models folder.
    Pull(cmd::pull::PullArgs),
    /// Measure prompt processing and generation speed, like llama-bench.
    Bench(cmd::bench::BenchArgs),
    /// Model file tools.
    #[command(subcommand)]
    Model(cmd::synth::ModelCommand),
    /// Serve the OpenAI-compatible API, metrics and admin API (the host).
    Serve(Box<cmd::serve::ServeArgs>),
    /// Route OpenAI requests to several hosts by prompt prefix and load.
    Route(memoria_route::RouteArgs),
    /// Inspect, verify, compact or clear a persistent prefix-state store.
    #[command(subcommand)]
    Store(cmd::store::StoreCommand),
}

/// Runs the CLI with the process arguments; the binary's whole `main`.
pub fn main() -> ExitCode {
    let _ = heap::keep_freed_memory();
    let cli = Cli::parse_from(llama_server_flags(std::env::args_os()));
    if let Err(e) = memoria_kernels::simd::check_forced() {
        eprintln!("error: {e}");
        return ExitCode::FAILURE;
    }
    if !matches!(cli.command, Command::Serve(_) | Command::Route(_)) {
        quiet_broken_pipe();
    }
    let result = match cli.command {
        Command::Run(a) => cmd::run::main(a),
        Command::Tokenize(a) => cmd::tokenize::main(a),
        Command::Inspect(a) => cmd::inspect::main(a),
        Command::Logprobs(a) => cmd::logprobs::main(a),
        Command::Perplexity(a) => cmd::perplexity::main(a),
        Command::Pull(a) => cmd::pull::main(a),
        Command::Bench(a) => cmd::bench::main(a),
        Command::Model(c) => cmd::synth::main(c),
        Command::Serve(a) => cmd::serve::main(*a),
        Command::Route(a) => memoria_route::main(
            a,
            memoria_route::Host {
                chat_template: &cmd::serve::chat_template_for,
                runtime: &cmd::server_runtime,
            },
        ),
        Command::Store(c) => cmd::store::main(c),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", error_chain(&e));
            ExitCode::FAILURE
        }
    }
}

/// An error and its causes on one line, `outer: cause: ...`, each cause said once: a cause
/// whose text its outer message already quotes (an OS error in `path: {source}`) is not
/// repeated.
pub fn error_chain(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

/// A command whose output is piped into one that stops reading (`memoria inspect M | head`)
/// ends quietly, as other command-line tools do, instead of panicking in `println!`. The
/// servers keep Rust's default (SIGPIPE ignored: a client's closed socket is an error to handle).
fn quiet_broken_pipe() {
    // SAFETY: restoring the default disposition of SIGPIPE before any thread is started.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// `memoria serve` accepts llama-server's multi-letter short flags (`-np`, `-ngl`, `-fa`, ...;
/// clap's short flags are one letter).
fn llama_server_flags(args: impl Iterator<Item = std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    let mut v: Vec<std::ffi::OsString> = args.collect();
    if v.get(1).is_some_and(|a| a == "serve") {
        for a in v.iter_mut().skip(2) {
            if let Some((_, long)) = cmd::serve_flags::SHORT_FLAGS.iter().find(|(s, _)| a == s) {
                *a = (*long).into();
            }
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::error_chain;

    /// An error that quotes its source in its own message, as `#[error("..: {source}")]` does.
    #[derive(Debug)]
    struct Quoting {
        source: std::io::Error,
    }

    impl std::fmt::Display for Quoting {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "components folder /x: {}", self.source)
        }
    }

    impl std::error::Error for Quoting {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.source)
        }
    }

    #[test]
    fn each_cause_is_printed_once() {
        let io = || std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let e = anyhow::Error::new(Quoting { source: io() }).context("starting the runtime");
        let text = error_chain(&e);
        assert_eq!(text.matches(&io().to_string()).count(), 1, "{text}");
        assert!(
            text.starts_with("starting the runtime: components folder /x: "),
            "{text}"
        );
        let plain = anyhow::Error::new(io()).context("reading x");
        assert_eq!(error_chain(&plain), format!("reading x: {}", io()));
    }
}
