//! The OpenAI API as applications use it, driven by the official `openai` package
//! against `memoria serve` with SmolLM2-135M-Instruct (tests/python/openai_api.py): validation
//! as OpenAI does it, logit_bias, logprobs in both shapes (plain and streamed), n > 1 from one
//! prompt computation, best_of, prompt arrays, and batch invariance of bias and log-probs.

use std::process::Command;

use super::server::Server;

/// Runs `openai_api.py MODE` against a fresh SmolLM2 server.
fn run_script(name: &str, mode: &str) {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let smollm = crate::shared::path("models/SmolLM2-135M-Instruct.Q4_1.gguf");
    let path = smollm.to_str().expect("utf-8 path");
    let s = Server::start(name, &["-m", path, "-c", "512", "--parallel", "16"]);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/python/openai_api.py");
    let file_name = smollm
        .file_name()
        .and_then(|n| n.to_str())
        .expect("file name");
    let out = Command::new(&python)
        .arg(script)
        .arg(format!("http://{}", s.addr))
        .arg(file_name)
        .arg(mode)
        .output()
        .expect("run the python client (pip install openai)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{stdout}");
    assert!(
        out.status.success() && stdout.trim_end().ends_with("ok"),
        "openai_api.py {mode}:\nstdout: {stdout}\nstderr: {}\nserver: {}",
        String::from_utf8_lossy(&out.stderr),
        s.stderr()
    );
}

#[test]
fn serve_openai_api_validation_bias_logprobs_n_and_prompt_arrays() {
    run_script("api-features", "features");
}

#[test]
fn serve_logit_bias_and_logprobs_are_batch_invariant() {
    run_script("api-invariance", "invariance");
}
