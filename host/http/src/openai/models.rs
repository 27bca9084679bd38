//! `GET /v1/models` (also `/models`) and `GET /v1/models/{id}`: the one model this host serves,
//! with its aliases (found by its id or an alias; a retrieve by any other name is 404 even when
//! requests may name any model).

use serde_json::{Value, json};

use crate::body::{Response, ok_json};
use crate::error::ApiError;
use crate::state::{AppState, HttpConfig};

fn model_object(state: &AppState) -> Value {
    let created = super::unix_now().saturating_sub(state.started.elapsed().as_secs());
    let hp = state.engine.model().hparams();
    let cfg = &state.config;
    let mut aliases = vec![cfg.model_id.clone()];
    aliases.extend(cfg.model_aliases.iter().cloned());
    json!({
        "id": cfg.model_id,
        "object": "model",
        "created": created,
        "owned_by": "memoria",
        "aliases": aliases,
        "tags": cfg.model_tags,
        "meta": {
            "n_ctx": cfg.max_context,
            "n_ctx_train": hp.n_ctx_train,
            "n_embd": hp.n_embd,
            "n_vocab": hp.n_vocab,
        },
    })
}

/// The list.
pub fn list(state: &AppState) -> Response {
    ok_json(&json!({"object": "list", "data": [model_object(state)]}))
}

/// One model by id.
pub fn get(state: &AppState, id: &str) -> Result<Response, ApiError> {
    let strict = HttpConfig {
        strict_model: true,
        ..state.config.clone()
    };
    super::check_model(&strict, Some(id))?;
    Ok(ok_json(&model_object(state)))
}
