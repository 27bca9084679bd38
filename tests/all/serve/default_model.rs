//! `memoria serve` without `-m`: the first `memoria pull` catalogue model in the models folder
//! (`$MEMORIA_MODELS`, catalogue order: SmolLM2 first), else the embedded demo model; stderr
//! says which.

use serde_json::json;

use super::client::{get, post};
use super::server::{Server, temp_dir};
use crate::shared;

#[test]
fn serve_without_a_model_and_an_empty_models_folder_serves_the_demo() {
    let models = temp_dir("default-empty").join("models");
    std::fs::create_dir_all(&models).expect("models folder");
    let s = Server::start_with_models("default-empty", &[], &models);
    let err = s.stderr();
    assert!(
        err.contains("no `memoria pull` model") && err.contains("RANDOM"),
        "{err}"
    );
    let r = get(s.addr, "/v1/models", &[]);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["data"][0]["id"], "memoria-demo-random");
}

#[test]
fn serve_without_a_model_prefers_smollm2_from_the_models_folder() {
    let models = temp_dir("default-smollm2").join("models");
    std::fs::create_dir_all(&models).expect("models folder");
    let link = models.join("SmolLM2-135M-Instruct.Q4_1.gguf");
    std::fs::remove_file(&link).ok();
    std::os::unix::fs::symlink(
        shared::path("models/SmolLM2-135M-Instruct.Q4_1.gguf"),
        &link,
    )
    .expect("link SmolLM2 into the models folder");
    // A Gemma file of the catalogue size is present too: SmolLM2 comes first in the catalogue.
    let gemma = std::fs::File::create(models.join("gemma-3-270m-q4_k_m.gguf")).expect("gemma");
    gemma.set_len(253_113_024).expect("sparse gemma-sized file");
    let s = Server::start_with_models("default-smollm2", &[], &models);
    let err = s.stderr();
    assert!(err.contains("serving smollm2-135m-instruct from"), "{err}");
    let r = get(s.addr, "/v1/models", &[]);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["data"][0]["id"], "smollm2-135m-instruct");
    let r = post(
        s.addr,
        "/v1/chat/completions",
        // A question, not "The capital of France is": on that opening llama.cpp's own greedy
        // reply from this model is French small talk without "Paris".
        &json!({
            "messages": [{"role": "user", "content": "What is the capital of France? Answer in one sentence."}],
            "max_tokens": 24,
            "temperature": 0,
        }),
        &[],
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let text = r.json()["choices"][0]["message"]["content"]
        .as_str()
        .expect("content")
        .to_string();
    assert!(text.contains("Paris"), "{text:?}");
}
