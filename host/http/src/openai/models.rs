//! `GET /v1/models` and `GET /v1/models/{id}`: the one model this host serves (found by its
//! id or an alias).

use serde_json::{Value, json};

use crate::body::{Response, ok_json};
use crate::error::ApiError;
use crate::state::AppState;

fn model_object(state: &AppState) -> Value {
    let created = super::unix_now().saturating_sub(state.started.elapsed().as_secs());
    let hp = state.engine.model().hparams();
    json!({
        "id": state.config.model_id,
        "object": "model",
        "created": created,
        "owned_by": "memoria",
        "meta": {
            "n_ctx": state.config.max_context,
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
    super::check_model(&state.config, Some(id))?;
    Ok(ok_json(&model_object(state)))
}
