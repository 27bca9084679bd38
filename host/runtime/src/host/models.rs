//! `memoria:llm/models`: the served model, tokenizer and chat template.

use memoria_model::chat::ChatMessage;

use crate::TenantState;
use crate::bindings::WitError;
use crate::bindings::memoria::llm::models::{Host, Message, ModelInfo};

impl TenantState {
    /// Checks token ids against the vocabulary.
    pub(crate) fn check_tokens(&self, tokens: &[u32]) -> Result<(), WitError> {
        let n = self.ns.host.engine.tokenizer().n_vocab();
        match tokens.iter().find(|&&t| t as usize >= n) {
            Some(t) => Err(WitError::InvalidArgument(format!(
                "token id {t} is outside the vocabulary (0..{n})"
            ))),
            None => Ok(()),
        }
    }
}

impl Host for TenantState {
    async fn list_models(&mut self) -> wasmtime::Result<Vec<ModelInfo>> {
        let engine = &self.ns.host.engine;
        let hp = engine.model().hparams();
        Ok(vec![ModelInfo {
            id: self.ns.host.model_id.clone(),
            context_length: u32::try_from(hp.n_ctx_train).unwrap_or(u32::MAX),
            vocab_size: u32::try_from(engine.tokenizer().n_vocab()).unwrap_or(u32::MAX),
        }])
    }

    async fn tokenize(
        &mut self,
        text: String,
        add_special: bool,
    ) -> wasmtime::Result<Result<Vec<u32>, WitError>> {
        Ok(Ok(self.ns.host.engine.tokenizer().encode(
            &text,
            add_special,
            false,
        )))
    }

    async fn detokenize(&mut self, tokens: Vec<u32>) -> wasmtime::Result<Result<String, WitError>> {
        if let Err(e) = self.check_tokens(&tokens) {
            return Ok(Err(e));
        }
        Ok(Ok(self
            .ns
            .host
            .engine
            .tokenizer()
            .decode(&tokens, false, false)))
    }

    async fn apply_chat_template(
        &mut self,
        messages: Vec<Message>,
        add_generation_prompt: bool,
    ) -> wasmtime::Result<Result<String, WitError>> {
        let msgs: Vec<ChatMessage> = messages
            .into_iter()
            .map(|m| ChatMessage::new(m.role, m.content))
            .collect();
        Ok(self
            .ns
            .host
            .template
            .render(&msgs, add_generation_prompt)
            .map_err(|e| WitError::InvalidArgument(format!("chat template: {e:#}"))))
    }
}
