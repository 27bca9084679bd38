//! The architectures of `golden/archs/` (random-weight models of qwen3, qwen3moe, phi3, gemma2,
//! granite, smollm3, olmo2, gpt-oss and a llama control, each as an F16 file and a quantized
//! copy): teacher-forced agreement with llama.cpp at the README's floors (`fidelity`), and the
//! session memory unchanged for every one of them (`sessions`: cached = recomputed = batched =
//! forked = restored, bit for bit).

mod fidelity;
mod sessions;

use memoria_model::llama::Model;

use crate::shared;

/// Every architecture of the golden set: (folder, quantized file stem).
pub const ARCHS: [(&str, &str); 9] = [
    ("llama", "llama-q8_0"),
    ("qwen3", "qwen3-q4_k_m"),
    ("qwen3moe", "qwen3moe-q4_k_m"),
    ("phi3", "phi3-q8_0"),
    ("gemma2", "gemma2-q4_k_m"),
    ("granite", "granite-q8_0"),
    ("smollm3", "smollm3-q8_0"),
    ("olmo2", "olmo2-q8_0"),
    ("gpt-oss", "gpt-oss-mxfp4"),
];

/// `golden/archs/{arch}/{stem}.gguf`, loaded.
pub fn load(arch: &str, stem: &str) -> Model {
    let p = shared::path(&format!("golden/archs/{arch}/{stem}.gguf"));
    Model::load(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The teacher-forcing sequences of `{stem}.forced-kvf16.json` (prompt + llama.cpp's greedy
/// continuation), with llama.cpp's top-5 log-probabilities at every position.
pub fn golden(arch: &str, stem: &str) -> serde_json::Value {
    shared::json(&format!("golden/archs/{arch}/{stem}.forced-kvf16.json"))
}

/// The token ids of every sequence of the golden file.
pub fn sequences(arch: &str, stem: &str) -> Vec<Vec<u32>> {
    golden(arch, stem)["results"]
        .as_array()
        .expect("results[]")
        .iter()
        .map(|r| serde_json::from_value(r["sequence"].clone()).expect("sequence"))
        .collect()
}
