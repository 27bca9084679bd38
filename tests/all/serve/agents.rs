//! The APIs agents speak, driven by the official clients against `memoria serve` with
//! SmolLM2-135M-Instruct: Anthropic's Messages API (`tests/python/anthropic_api.py`, the
//! `anthropic` package) and OpenAI's Responses API (`tests/python/responses_api.py`, the
//! `openai` package), including `previous_response_id` continuing from the cache across a
//! restart with `--store`.

use std::process::Command;

use super::server::{Server, temp_dir};

fn smollm() -> String {
    crate::shared::path("models/SmolLM2-135M-Instruct.Q4_1.gguf")
        .to_str()
        .expect("utf-8 path")
        .to_string()
}

/// Runs `script ARGS` against `s`; returns its stdout, asserting it ends with `ok`.
fn run_script(script: &str, s: &Server, args: &[&str]) -> String {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let path = format!("{}/python/{script}", env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(&python)
        .arg(path)
        .arg(format!("http://{}", s.addr))
        .args(args)
        .output()
        .expect("run the python client (pip install openai anthropic)");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && stdout.trim_end().ends_with("ok"),
        "{script} {args:?}:\nstdout: {stdout}\nstderr: {}\nserver: {}",
        String::from_utf8_lossy(&out.stderr),
        s.stderr()
    );
    stdout
}

#[test]
fn serve_anthropic_messages_with_the_official_client() {
    let m = smollm();
    let key = "anthropic-test-key";
    let s = Server::start(
        "anthropic",
        &["-m", &m, "-c", "2048", "--parallel", "2", "--api-key", key],
    );
    run_script("anthropic_api.py", &s, &[key]);
}

#[test]
fn serve_openai_responses_with_the_official_client() {
    let m = smollm();
    let s = Server::start("responses", &["-m", &m, "-c", "2048", "--parallel", "2"]);
    let out = run_script("responses_api.py", &s, &["all"]);
    eprintln!("{out}");
}

#[test]
fn serve_responses_continue_from_the_store_after_a_restart() {
    let m = smollm();
    let store = temp_dir("responses-restart").join("store");
    let _ = std::fs::remove_dir_all(&store);
    let store = store.to_str().expect("utf-8 path").to_string();
    let args = ["-m", &m, "-c", "2048", "--parallel", "2", "--store", &store];
    let first = Server::start("responses-restart-a", &args);
    let out = run_script("responses_api.py", &first, &["before"]);
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix("id "))
        .expect("the response id");
    let parts: Vec<&str> = line.split_whitespace().collect();
    // A clean stop (SIGTERM): the store is flushed as in production.
    let mut first = first;
    let pid = first.child.id().to_string();
    let st = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(st.success());
    let exit = first.child.wait().expect("wait for the server");
    assert!(exit.success(), "{exit:?}: {}", first.stderr());
    let second = Server::start("responses-restart-b", &args);
    let out = run_script(
        "responses_api.py",
        &second,
        &["after", parts[0], parts[1], parts[2]],
    );
    eprintln!("{out}");
}
