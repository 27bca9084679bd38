//! `memoria:llm/embeddings`: mean-pooled, L2-normalised final hidden states of the served model
//! (`Model::embed`), computed on the blocking pool so no runtime thread waits on the forward
//! pass. Each text must fit the model's context; at most [`MAX_TEXTS`] texts per call.

use crate::TenantState;
use crate::bindings::WitError;
use crate::bindings::memoria::llm::embeddings::Host;

/// Most texts per call.
pub const MAX_TEXTS: usize = 64;

impl Host for TenantState {
    async fn embed(
        &mut self,
        texts: Vec<String>,
    ) -> wasmtime::Result<Result<Vec<Vec<f32>>, WitError>> {
        let bytes: usize = texts.iter().map(String::len).sum();
        if bytes > self.max_call_bytes() {
            return Ok(Err(WitError::InvalidArgument(format!(
                "{bytes} bytes of text exceed max_host_call_bytes = {}",
                self.max_call_bytes()
            ))));
        }
        if texts.len() > MAX_TEXTS {
            return Ok(Err(WitError::InvalidArgument(format!(
                "at most {MAX_TEXTS} texts per call"
            ))));
        }
        let engine = self.ns.host.engine.clone();
        let n_ctx = engine.model().hparams().n_ctx_train;
        let mut batches = Vec::with_capacity(texts.len());
        for (i, t) in texts.iter().enumerate() {
            let tokens = engine.tokenizer().encode(t, true, false);
            if tokens.len() > n_ctx {
                return Ok(Err(WitError::ContextOverflow(format!(
                    "text {i} has {} tokens; the model's context is {n_ctx}",
                    tokens.len()
                ))));
            }
            batches.push(tokens);
        }
        let model = engine.model().clone();
        let r = tokio::task::spawn_blocking(move || {
            batches
                .iter()
                .map(|t| model.embed(t, 512))
                .collect::<Result<Vec<_>, _>>()
        })
        .await;
        Ok(match r {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(WitError::InvalidArgument(format!("{e:#}"))),
            Err(e) => Err(WitError::Unavailable(format!("embedding task: {e}"))),
        })
    }
}
