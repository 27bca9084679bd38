//! llama-server's slots on memoria's one shared pool: a slot is one of the requests the
//! namespace may run at once (`-np`), `GET /slots` lists them (busy ones first, from the
//! admission gate), and each slot remembers the tokens of its last native completion so that
//! `POST /slots/{id}?action=save|restore|erase` maps onto memoria's session store: a save
//! writes those tokens' state under the name `slot:{filename}` in the namespace (durable with
//! `--store` or `--slot-save-path`), a restore brings a saved state back into the pool, where
//! the next prompt sharing its prefix finds it, and an erase forgets the slot's record.

use std::sync::Mutex;
use std::time::Instant;

use bytes::Bytes;
use memoria_tenant::Namespace;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::body::{Response, ok_json};
use crate::error::ApiError;
use crate::state::AppState;

/// The most slots remembered (ids past it are refused).
const MAX_SLOTS: usize = 4096;

/// The tokens each slot's last native completion left in the context.
#[derive(Default)]
pub struct SlotTable {
    slots: Mutex<Vec<Option<Vec<u32>>>>,
}

impl SlotTable {
    /// Records the context `tokens` of slot `id` (ignored past [`MAX_SLOTS`]).
    pub fn record(&self, id: usize, tokens: Vec<u32>) {
        if id >= MAX_SLOTS {
            return;
        }
        let mut s = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        if s.len() <= id {
            s.resize(id + 1, None);
        }
        s[id] = Some(tokens);
    }

    fn get(&self, id: usize) -> Option<Vec<u32>> {
        let s = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        s.get(id).cloned().flatten()
    }

    fn erase(&self, id: usize) -> usize {
        let mut s = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        s.get_mut(id).and_then(Option::take).map_or(0, |t| t.len())
    }
}

/// How many slots the default namespace has (its `max_concurrent`).
pub fn count(state: &AppState) -> usize {
    state
        .default_namespace()
        .map_or(1, |ns| ns.spec.limits.max_concurrent.max(1))
}

/// `GET /slots`.
pub fn list(state: &AppState, ns: &Namespace) -> Result<Response, ApiError> {
    if !state.config.slots {
        return Err(ApiError::not_implemented(
            "this server does not list its slots (started with --no-slots)",
        ));
    }
    let n = ns.spec.limits.max_concurrent.max(1);
    let busy = state.admission.gate(&ns.name, &ns.spec.limits).running();
    let slots: Vec<Value> = (0..n)
        .map(|i| {
            json!({
                "id": i,
                "id_task": if i < busy { 0 } else { -1 },
                "n_ctx": state.config.max_context,
                "speculative": false,
                "is_processing": i < busy,
                "n_past": state.slots.get(i).map_or(0, |t| t.len()),
            })
        })
        .collect();
    Ok(ok_json(&Value::Array(slots)))
}

#[derive(Deserialize)]
struct FileRequest {
    filename: Option<String>,
}

/// `POST /slots/{id}?action=...`.
pub async fn action(
    state: &AppState,
    ns: &Namespace,
    id: &str,
    query: Option<&str>,
    body: &Bytes,
) -> Result<Response, ApiError> {
    let id: usize = id
        .parse()
        .ok()
        .filter(|&i| i < MAX_SLOTS)
        .ok_or_else(|| ApiError::invalid("id_slot", format!("{id:?} is not a slot id")))?;
    let action = query
        .unwrap_or("")
        .split('&')
        .find_map(|kv| kv.strip_prefix("action="))
        .unwrap_or("");
    let started = Instant::now();
    let ms = || started.elapsed().as_secs_f64() * 1e3;
    if action == "erase" {
        let n = state.slots.erase(id);
        return Ok(ok_json(&json!({"id_slot": id, "n_erased": n})));
    }
    if !matches!(action, "save" | "restore") {
        return Err(ApiError::invalid(
            "action",
            format!("action {action:?}: use save, restore or erase"),
        ));
    }
    let req: FileRequest = if body.iter().all(u8::is_ascii_whitespace) {
        FileRequest { filename: None }
    } else {
        crate::openai::parse_json(body)?
    };
    let filename = req.filename.filter(|f| valid_file_name(f)).ok_or_else(|| {
        ApiError::invalid("filename", "`filename` must be a plain file name (no path)")
    })?;
    let name = format!("slot:{filename}");
    let engine = &state.engine;
    if action == "save" {
        let Some(tokens) = state.slots.get(id).filter(|t| !t.is_empty()) else {
            return Err(ApiError::invalid(
                "id_slot",
                format!("slot {id} holds nothing to save (no completion ran in it)"),
            ));
        };
        let session = engine.open(ns.id).await?;
        let saved = async {
            engine.append(ns.id, session, tokens.clone()).await?;
            engine.prefill(ns.id, session).await?;
            engine.save(ns.id, session, &name).await
        }
        .await;
        let _ = engine.close(ns.id, session).await;
        saved?;
        return Ok(ok_json(&json!({
            "id_slot": id,
            "filename": filename,
            "n_saved": tokens.len(),
            "n_written": tokens.len() * 4,
            "timings": {"save_ms": ms()},
        })));
    }
    let session = engine.restore(ns.id, &name).await?;
    let restored = async {
        let tokens = engine.tokens(ns.id, session).await?;
        engine.prefill(ns.id, session).await?;
        Ok::<_, memoria_sched::EngineError>(tokens)
    }
    .await;
    let _ = engine.close(ns.id, session).await;
    let tokens = restored?;
    let n = tokens.len();
    state.slots.record(id, tokens);
    Ok(ok_json(&json!({
        "id_slot": id,
        "filename": filename,
        "n_restored": n,
        "n_read": n * 4,
        "timings": {"restore_ms": ms()},
    })))
}

/// llama-server's rule: a plain name, no separators or parent references.
fn valid_file_name(f: &str) -> bool {
    !f.is_empty()
        && f.len() <= 255
        && f != "."
        && f != ".."
        && !f.contains(['/', '\\', '\0'])
        && !f.chars().any(char::is_control)
}
