//! Issue 14, structured outputs: the official `openai` package's `parse` with Pydantic models
//! against `memoria serve` with SmolLM2 (tests/python/openai_structured.py): every answer parses
//! and validates, on chat and completions; a refused keyword is named in the 400; a constrained
//! request gives the same text alone and among 15 concurrent others.

use std::process::Command;

use super::server::Server;

#[test]
fn serve_structured_outputs_parse_and_validate_through_the_openai_client() {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let smollm = crate::shared::path("models/SmolLM2-135M-Instruct.Q4_1.gguf");
    let path = smollm.to_str().expect("utf-8 path");
    let s = Server::start(
        "structured",
        &["-m", path, "-c", "1024", "--parallel", "16"],
    );
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/python/openai_structured.py");
    let model = smollm
        .file_stem()
        .and_then(|n| n.to_str())
        .expect("file stem");
    let out = Command::new(&python)
        .arg(script)
        .arg(format!("http://{}", s.addr))
        .arg(model)
        .output()
        .expect("run the python client (pip install openai)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.trim_end().ends_with("ok"),
        "openai_structured.py:\nstdout: {stdout}\nstderr: {}\nserver: {}",
        String::from_utf8_lossy(&out.stderr),
        s.stderr()
    );
}
