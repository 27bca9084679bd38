//! The standing fault suite's long run: every fuzz harness (GGUF reader, block codec and
//! session records, HTTP framing and the OpenAI schema, the WIT host calls from a guest) with
//! `MEMORIA_FUZZ_CASES` cases each (default 100,000; the tests run a few thousand), in the
//! release profile. `cargo bench -p memoria-benches --bench fuzz_long`; exits non-zero on the
//! first harness that fails, with its output.

use std::process::{Command, ExitCode};
use std::time::Instant;

/// Cases per harness when `MEMORIA_FUZZ_CASES` is not set.
const DEFAULT_CASES: &str = "100000";

/// (package, cargo test selection, name filter) of each harness.
const HARNESSES: &[(&str, &[&str], &str)] = &[
    ("memoria-model", &["--test", "fuzz_gguf"], ""),
    ("memoria-store", &["--test", "fuzz_records"], ""),
    ("memoria-http", &["--lib"], "fuzz"),
    ("memoria-tests", &["--test", "all"], "hostcalls"),
];

fn main() -> ExitCode {
    // `cargo test --benches` runs this binary without `--bench`: the long run is for `cargo bench`.
    if !std::env::args().any(|a| a == "--bench") {
        println!("fuzz_long: run with `cargo bench -p memoria-benches --bench fuzz_long`");
        return ExitCode::SUCCESS;
    }
    let cases = std::env::var(memoria_fuzz::CASES_VAR).unwrap_or_else(|_| DEFAULT_CASES.into());
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    for (package, selection, filter) in HARNESSES {
        let start = Instant::now();
        let mut cmd = Command::new(&cargo);
        cmd.args(["test", "--release", "-p", package])
            .args(*selection)
            .env(memoria_fuzz::CASES_VAR, &cases);
        if !filter.is_empty() {
            cmd.args(["--", filter]);
        }
        println!("fuzz_long: {package} {selection:?} {filter} with {cases} cases");
        match cmd.status() {
            Ok(s) if s.success() => println!(
                "fuzz_long: {package} passed in {:.1} s",
                start.elapsed().as_secs_f64()
            ),
            Ok(s) => {
                eprintln!("fuzz_long: {package} failed ({s})");
                return ExitCode::FAILURE;
            }
            Err(e) => {
                eprintln!("fuzz_long: cannot run {cargo}: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}
