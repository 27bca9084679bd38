//! Reading bulk host-call arguments straight from guest memory with a size check first: the
//! guest's `(pointer, length)` is inspected in place (wasmtime's `WasmStr` / `WasmList` do not
//! copy), and only arguments within the namespace's `max_host_call_bytes` are copied out.
//! wasmtime's `ResourceLimiter` does not cover these host-side allocations; this does.

use std::sync::atomic::Ordering::Relaxed;

use wasmtime::StoreContextMut;
use wasmtime::component::{WasmList, WasmStr};

use crate::TenantState;
use crate::bindings::WitError;

/// Accounts an argument of `bytes` against the limit; refuses (and counts) when over.
fn admit(
    store: &StoreContextMut<'_, TenantState>,
    bytes: usize,
    what: &str,
) -> Result<(), WitError> {
    let max = store.data().max_call_bytes();
    let stats = &store.data().ns.host.stats;
    if bytes > max {
        stats.host_call_refused.fetch_add(1, Relaxed);
        return Err(WitError::InvalidArgument(format!(
            "{what} of {bytes} bytes exceeds this namespace's max_host_call_bytes = {max}"
        )));
    }
    stats.host_call_bytes.fetch_add(bytes as u64, Relaxed);
    Ok(())
}

/// The string, copied only if within the limit.
pub fn string(
    store: &StoreContextMut<'_, TenantState>,
    s: &WasmStr,
    what: &str,
) -> wasmtime::Result<Result<String, WitError>> {
    let text = s.to_str(store)?;
    if let Err(e) = admit(store, text.len(), what) {
        return Ok(Err(e));
    }
    Ok(Ok(text.into_owned()))
}

/// The token list, copied only if within the limit.
pub fn tokens(
    store: &StoreContextMut<'_, TenantState>,
    l: &WasmList<u32>,
    what: &str,
) -> wasmtime::Result<Result<Vec<u32>, WitError>> {
    let bytes = l.len().saturating_mul(4);
    if let Err(e) = admit(store, bytes, what) {
        return Ok(Err(e));
    }
    Ok(Ok(l
        .as_le_slice(store)
        .iter()
        .map(|t| u32::from_le(*t))
        .collect()))
}

/// A list of strings, copied only if their total is within the limit.
pub fn strings(
    store: &mut StoreContextMut<'_, TenantState>,
    l: &WasmList<WasmStr>,
    what: &str,
) -> wasmtime::Result<Result<Vec<String>, WitError>> {
    let mut bytes = l.len().saturating_mul(8);
    if let Err(e) = admit(store, bytes, what) {
        return Ok(Err(e));
    }
    let views = l
        .iter(&mut *store)?
        .collect::<wasmtime::Result<Vec<WasmStr>>>()?;
    for s in &views {
        bytes = bytes.saturating_add(s.to_str(&*store)?.len());
    }
    if let Err(e) = admit(store, bytes, what) {
        return Ok(Err(e));
    }
    let mut out = Vec::with_capacity(views.len());
    for s in &views {
        out.push(s.to_str(&*store)?.into_owned());
    }
    Ok(Ok(out))
}
