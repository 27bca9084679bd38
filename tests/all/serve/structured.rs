//! Structured outputs: the official `openai` package's `parse` with Pydantic models
//! against `memoria serve` with SmolLM2 (tests/python/openai_structured.py): every answer parses
//! and validates, on chat and completions; a refused keyword is named in the 400; a constrained
//! request gives the same text alone and among 15 concurrent others. Tool calls
//! (tests/python/openai_tools.py): a weather-tool round trip, plain and streamed.

use std::process::Command;

use super::server::Server;

#[test]
fn serve_structured_outputs_parse_and_validate_through_the_openai_client() {
    run_script("structured", "openai_structured.py");
}

#[test]
fn serve_tool_calls_round_trip_through_the_openai_client() {
    run_script("tools", "openai_tools.py");
}

/// Runs `tests/python/SCRIPT BASE_URL MODEL` against a fresh SmolLM2 server.
fn run_script(name: &str, script: &str) {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let smollm = crate::shared::path("models/SmolLM2-135M-Instruct.Q4_1.gguf");
    let path = smollm.to_str().expect("utf-8 path");
    let s = Server::start(name, &["-m", path, "-c", "1024", "--parallel", "16"]);
    let script = format!("{}/python/{script}", env!("CARGO_MANIFEST_DIR"));
    let model = smollm
        .file_stem()
        .and_then(|n| n.to_str())
        .expect("file stem");
    let out = Command::new(&python)
        .arg(&script)
        .arg(format!("http://{}", s.addr))
        .arg(model)
        .output()
        .expect("run the python client (pip install openai)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.trim_end().ends_with("ok"),
        "{script}:\nstdout: {stdout}\nstderr: {}\nserver: {}",
        String::from_utf8_lossy(&out.stderr),
        s.stderr()
    );
}
