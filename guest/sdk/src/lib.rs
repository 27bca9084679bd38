//! memoria-guest: the Rust SDK for memoria tenant components. Ergonomic wrappers over the
//! `memoria:llm` host functions (bound with wit-bindgen): [`Session`] and its builder, a
//! streaming iterator, [`Params`], typed [`Error`]s, plus small wasi:http helpers in [`http`].
//!
//! Invariant: every handle here is a host resource of the caller's namespace; dropping a
//! [`Session`] closes the host session.

mod bindings {
    wit_bindgen::generate!({
        world: "memoria:llm/host-api",
        path: "../../wit",
    });
}

mod error;
pub mod http;
mod params;
mod session;
mod stream;

pub use error::{Error, Result};
pub use params::Params;
pub use session::{Session, SessionBuilder};
pub use stream::{Token, TokenStream};

/// The generated bindings, for what the wrappers do not cover.
pub mod raw {
    pub use crate::bindings::memoria::llm::*;
}

pub use raw::session::{FinishReason, Generation};
pub use raw::types::Usage;

/// The model, its tokenizer and chat template.
pub mod models {
    use crate::raw::models as m;
    use crate::{Error, Result};

    pub use m::{Message, ModelInfo};

    /// Models the host serves.
    pub fn list() -> Vec<ModelInfo> {
        m::list_models()
    }

    /// Tokens of `text` (with BOS when `add_special`).
    pub fn tokenize(text: &str, add_special: bool) -> Result<Vec<u32>> {
        m::tokenize(text, add_special).map_err(Error::from)
    }

    /// Text of `tokens`.
    pub fn detokenize(tokens: &[u32]) -> Result<String> {
        m::detokenize(tokens).map_err(Error::from)
    }

    /// The model's chat template applied to `(role, content)` pairs.
    pub fn chat_template(messages: &[(&str, &str)], add_generation_prompt: bool) -> Result<String> {
        let msgs: Vec<Message> = messages
            .iter()
            .map(|(r, c)| Message {
                role: r.to_string(),
                content: c.to_string(),
            })
            .collect();
        m::apply_chat_template(&msgs, add_generation_prompt).map_err(Error::from)
    }
}

/// The caller's namespace's share of the K/V cache.
pub mod cache {
    use crate::raw::cache as c;
    use crate::{Error, Result};

    pub use c::{Counters, WarmInfo};

    /// This namespace's cache counters.
    pub fn stats() -> Counters {
        c::stats()
    }

    /// Computes and pins `tokens` for `ttl_ms` (None: until restart).
    pub fn warm(tokens: &[u32], ttl_ms: Option<u64>) -> Result<WarmInfo> {
        c::warm(tokens, ttl_ms, None).map_err(Error::from)
    }
}

/// Embeddings (the host may answer `unavailable`).
pub fn embed(texts: &[String]) -> Result<Vec<Vec<f32>>> {
    raw::embeddings::embed(texts).map_err(Error::from)
}

/// Log levels for [`log`].
pub use raw::log::Level;

/// Writes a line to the host's log, tagged with the namespace.
pub fn log(level: Level, message: &str) {
    raw::log::log(level, message)
}
