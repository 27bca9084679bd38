//! The `memoria:llm` host functions, one file per interface, all implemented on
//! [`TenantState`](crate::TenantState) and all async (they await the engine, never block).
//! `shadow` re-registers the functions that take bulk arguments so their sizes are checked
//! against `max_host_call_bytes` before anything is copied out of guest memory.

pub mod cache;
pub mod embeddings;
pub mod log;
pub mod models;
mod pad;
pub mod session;
mod shadow;
pub mod stream;

use wasmtime::component::{HasSelf, Linker};

use crate::TenantState;
use crate::bindings::memoria::llm;

/// Adds WASI p2, wasi:http (types only; outbound requests are denied by the hooks) and
/// `memoria:llm` to `linker`.
pub fn add_to_linker(linker: &mut Linker<TenantState>) -> wasmtime::Result<()> {
    wasmtime_wasi::p2::add_to_linker_async(linker)?;
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(linker)?;
    llm::types::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    llm::models::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    llm::session::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    llm::embeddings::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    llm::cache::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    llm::log::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    linker.allow_shadowing(true);
    shadow::add_bounded(linker)?;
    linker.allow_shadowing(false);
    Ok(())
}

impl llm::types::Host for TenantState {}
