//! `memoria:llm/embeddings`: mean-pooled, L2-normalised final hidden states of the served model,
//! from the engine's embedding cache (the one the OpenAI endpoint fills, keyed by the
//! namespace's salt) or computed by the engine in its steps (`EngineHandle::embed`). Each text
//! must fit the model's context; at most [`MAX_TEXTS`] texts per call. In a namespace with
//! `hit_timing = "pad"` the answer leaves no earlier than computing it would have taken, as on
//! the OpenAI side, so a cached vector cannot be told by its timing.

use std::time::Instant;

use crate::TenantState;
use crate::bindings::WitError;
use crate::bindings::memoria::llm::embeddings::Host;
use crate::errors::from_engine;

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
        let mut inputs = Vec::with_capacity(texts.len());
        for (i, t) in texts.iter().enumerate() {
            let tokens = engine.tokenizer().encode(t, true, false);
            if tokens.len() > n_ctx {
                return Ok(Err(WitError::ContextOverflow(format!(
                    "text {i} has {} tokens; the model's context is {n_ctx}",
                    tokens.len()
                ))));
            }
            if tokens.is_empty() {
                return Ok(Err(WitError::InvalidArgument(format!(
                    "text {i} has no tokens"
                ))));
            }
            inputs.push(tokens);
        }
        let ns = self.ns.ns.clone();
        let started = Instant::now();
        let out = match engine.embed(ns.id, &inputs).await {
            Ok(out) => out,
            Err(e) => return Ok(Err(from_engine(e))),
        };
        let prompt: usize = inputs.iter().map(Vec::len).sum();
        let computed = memoria_sched::handle::computed_tokens(&inputs, &out);
        let pad = &self.ns.host.embed_pad;
        if computed > 0 {
            pad.observe(prompt, computed, started.elapsed());
        }
        if ns.spec.pads_hits() {
            let at = pad.release_at(started, prompt, Instant::now());
            tokio::time::sleep_until(at.into()).await;
        }
        Ok(Ok(out.into_iter().map(|e| e.vector.to_vec()).collect()))
    }
}
