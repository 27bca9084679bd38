//! memoria-http: the HTTP front of the host. A hyper 1.x server with an OpenAI-compatible API
//! (chat, completions — whole or SSE —, embeddings, models), Prometheus `/metrics`, `/stats`,
//! `/health`, an admin API behind the admin key, and tenant routes `/ns/{namespace}/...` handed
//! to the wasm runtime's [`memoria_runtime::ComponentRouter`].
//!
//! Invariants: a request's namespace comes from its route or bearer key, never from its body;
//! admission refuses with 429 at once instead of failing accepted work; every error a client
//! sees is an OpenAI error object; a client that disconnects cancels its generation.

mod access_log;
mod admin;
mod admission;
mod anthropic;
mod auth;
mod body;
mod components;
mod cors;
mod cors_proxy;
mod error;
mod framing;
mod framing_grammar;
mod framing_out;
mod llama;
mod metrics;
mod observe;
mod openai;
mod predict;
mod preface;
mod responses;
mod router;
mod routes;
mod server;
mod sessions;
mod state;
pub mod tools;
mod ui;

pub use access_log::LogLevel;
pub use cors::CorsOrigins;
pub use error::ApiError;
pub use observe::{PromptObserver, ServedPrompt, ServedSlot};
pub use openai::prompt::{chat_tokens, request_tokens};
pub use server::{Server, ShutdownReport, shutdown_signal};
pub use state::{AppState, HttpConfig, Reloader, RequestDefaults, ServerParts};
