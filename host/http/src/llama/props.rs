//! `GET /props`: llama-server's description of the server: the default generation settings
//! (the server-wide defaults of `--temp`, `-n`, ...), the slots (requests the default
//! namespace runs at once), the model's path, its chat template and special tokens.

use serde_json::json;

use super::format::generation_settings;
use crate::body::{Response, ok_json};
use crate::state::AppState;

/// The answer.
pub fn get(state: &AppState) -> Response {
    let cfg = &state.config;
    let tok = state.engine.tokenizer();
    let d = &cfg.defaults;
    let params = generation_settings(&d.sampling, d.n_predict, &[], false, false, tok);
    ok_json(&json!({
        "default_generation_settings": {
            "id": 0,
            "id_task": -1,
            "n_ctx": cfg.max_context,
            "speculative": false,
            "is_processing": false,
            "params": params,
        },
        "total_slots": super::slots::count(state),
        "model_alias": cfg.model_id,
        "model_path": cfg.model_path,
        "chat_template": state.chat.source(),
        "bos_token": state.chat.bos_token(),
        "eos_token": state.chat.eos_token(),
        "build_info": concat!("memoria ", env!("CARGO_PKG_VERSION")),
        "modalities": {"vision": false, "audio": false},
        "is_sleeping": false,
        "cors_proxy_enabled": cfg.cors_proxy,
    }))
}
