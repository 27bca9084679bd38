//! `response_format` → the engine's token constraint (structured outputs): the model's vocabulary
//! is indexed once, on first use; formats are compiled once per content and kept (bounded); both
//! run off the async runtime's threads. A schema outside the supported subset is a 400 naming
//! the field or keyword.

use std::sync::{Arc, OnceLock};

use memoria_constrain::{Constraint, ConstraintCache, ResponseFormat, Vocab};
use memoria_model::tokenizer::Tokenizer;

use crate::error::ApiError;
use crate::state::AppState;

/// Compiled formats kept per server (each with its own mask cache).
const FORMATS_KEPT: usize = 64;
/// Masks cached per compiled format: 8 MiB is about 1,300 states of a 49k vocabulary.
const MASK_BYTES_PER_FORMAT: usize = 8 << 20;

/// The server's constraint cache, built on first use from the model's vocabulary.
#[derive(Default)]
pub struct StructuredOutputs(OnceLock<Result<ConstraintCache, String>>);

impl StructuredOutputs {
    fn cache(&self, tok: &Tokenizer) -> Result<&ConstraintCache, ApiError> {
        self.0
            .get_or_init(|| {
                let pieces: Vec<Vec<u8>> = (0..tok.n_vocab() as u32)
                    .map(|id| tok.token_to_piece(id, false))
                    .collect();
                Vocab::new(&pieces, tok.eog_ids())
                    .map(|v| ConstraintCache::new(Arc::new(v), FORMATS_KEPT, MASK_BYTES_PER_FORMAT))
                    .map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(|e| {
                ApiError::invalid(
                    "response_format",
                    format!(
                        "structured outputs are not available with this model's vocabulary: {e}"
                    ),
                )
            })
    }
}

/// The constraint for a request's `response_format` (`None` for plain text).
pub async fn constraint(
    state: &Arc<AppState>,
    format: Option<ResponseFormat>,
) -> Result<Option<Arc<Constraint>>, ApiError> {
    let Some(format) = format else {
        return Ok(None);
    };
    let state = state.clone();
    tokio::task::spawn_blocking(move || {
        let cache = state.structured.cache(state.engine.tokenizer())?;
        // A grammar too large for the automaton is the `grammar` field's fault.
        let param = |e: &memoria_constrain::ConstrainError| match format {
            ResponseFormat::Gbnf(_) => "grammar".to_owned(),
            _ => e.param(),
        };
        cache
            .get(&format)
            .map_err(|e| ApiError::invalid(param(&e), e.to_string()))
    })
    .await
    .map_err(|e| ApiError::internal(format!("compiling response_format: {e}")))?
}
