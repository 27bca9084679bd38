//! Loading tenant components: validate the bytes (a component, not random bytes or a core
//! module), compile once per distinct binary (optionally through an on-disk cache of compiled
//! code), link against the host's imports, and check the wasi:http export. Every refusal names
//! the file and the reason.
//!
//! Invariant: a `ProxyPre` handed out has all of its imports satisfied by the host linker.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use wasmtime::Engine;
use wasmtime::component::{Component, Linker};
use wasmtime_wasi_http::p2::bindings::ProxyPre;

use crate::TenantState;

/// Why a component was refused.
#[derive(Debug, thiserror::Error)]
pub enum ComponentError {
    #[error("{path}: cannot read the component: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: not a WebAssembly binary (it does not start with \"\\0asm\")")]
    NotWasm { path: String },
    #[error(
        "{path}: a core WebAssembly module, not a component; build it with `cargo build --target wasm32-wasip2` \
         (or wrap it with `wasm-tools component new`)"
    )]
    CoreModule { path: String },
    #[error("{path}: unknown WebAssembly version or layer {header:02x?}")]
    UnknownVersion { path: String, header: [u8; 4] },
    #[error("{path}: invalid component: {msg}")]
    Invalid { path: String, msg: String },
    #[error("{path}: unsatisfied import: {msg}")]
    Unsatisfied { path: String, msg: String },
    #[error("{path}: does not export wasi:http/incoming-handler@0.2: {msg}")]
    NoHandler { path: String, msg: String },
}

/// Checks that `bytes` start like a WebAssembly component (cheap; compiling checks the rest).
pub fn validate_component(path: &str, bytes: &[u8]) -> Result<(), ComponentError> {
    let path = path.to_string();
    if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
        return Err(ComponentError::NotWasm { path });
    }
    let header: [u8; 4] = [bytes[4], bytes[5], bytes[6], bytes[7]];
    match header {
        [0x0d, 0x00, 0x01, 0x00] => Ok(()),
        [0x01, 0x00, 0x00, 0x00] => Err(ComponentError::CoreModule { path }),
        _ => Err(ComponentError::UnknownVersion { path, header }),
    }
}

/// A compiled, linked component and what identifies it.
#[derive(Clone)]
pub(crate) struct Compiled {
    pub pre: ProxyPre<TenantState>,
    /// blake3 of the component's bytes.
    pub digest: [u8; 32],
    /// Size of the component's bytes.
    pub bytes: usize,
}

/// Compiles and links components, once per distinct binary.
pub struct Compiler {
    engine: Engine,
    linker: Linker<TenantState>,
    cache_dir: Option<PathBuf>,
    loaded: Mutex<HashMap<[u8; 32], Compiled>>,
}

impl std::fmt::Debug for Compiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compiler")
            .field("cache_dir", &self.cache_dir)
            .finish_non_exhaustive()
    }
}

impl Compiler {
    pub fn new(
        engine: Engine,
        linker: Linker<TenantState>,
        cache_dir: Option<PathBuf>,
    ) -> Compiler {
        Compiler {
            engine,
            linker,
            cache_dir,
            loaded: Mutex::default(),
        }
    }

    pub fn linker(&self) -> &Linker<TenantState> {
        &self.linker
    }

    /// Loads the component at `path`.
    pub fn load_file(&self, path: &Path) -> Result<Compiled, ComponentError> {
        let label = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|source| ComponentError::Read {
            path: label.clone(),
            source,
        })?;
        self.load_bytes(&label, &bytes)
    }

    /// Loads a component from memory; `label` names it in errors.
    pub fn load_bytes(&self, label: &str, bytes: &[u8]) -> Result<Compiled, ComponentError> {
        validate_component(label, bytes)?;
        let key = *blake3::hash(bytes).as_bytes();
        if let Some(c) = self
            .loaded
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
        {
            return Ok(c.clone());
        }
        let component = self.compile(label, bytes, &key)?;
        let pre =
            self.linker
                .instantiate_pre(&component)
                .map_err(|e| ComponentError::Unsatisfied {
                    path: label.into(),
                    msg: format!("{e:#}"),
                })?;
        let pre = ProxyPre::new(pre).map_err(|e| ComponentError::NoHandler {
            path: label.into(),
            msg: format!("{e:#}"),
        })?;
        let compiled = Compiled {
            pre,
            digest: key,
            bytes: bytes.len(),
        };
        self.loaded
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, compiled.clone());
        Ok(compiled)
    }

    /// Forgets compiled components other than `in_use` (after a replace or delete), in memory
    /// and in the cache folder, so redeploying does not grow either without bound.
    pub fn retain(&self, in_use: &HashSet<[u8; 32]>) {
        self.loaded
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|k, _| in_use.contains(k));
        let Some(entries) = self
            .cache_dir
            .as_ref()
            .and_then(|d| std::fs::read_dir(d).ok())
        else {
            return;
        };
        let keep: HashSet<String> = in_use
            .iter()
            .map(|k| format!("{}.cwasm", blake3::Hash::from(*k).to_hex()))
            .collect();
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let ours = name.len() == 64 + 6 && name.ends_with(".cwasm");
            if ours && !keep.contains(name.as_ref()) {
                // A file another process still maps stays readable to it after the unlink.
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }

    /// Compiles, or reuses compiled code from the cache folder.
    fn compile(
        &self,
        label: &str,
        bytes: &[u8],
        key: &[u8; 32],
    ) -> Result<Component, ComponentError> {
        let cached = self
            .cache_dir
            .as_ref()
            .map(|d| d.join(format!("{}.cwasm", blake3::Hash::from(*key).to_hex())));
        if let Some(file) = cached.as_ref().filter(|f| f.is_file()) {
            // SAFETY: the cache folder is written only by this function, from code wasmtime
            // compiled on this host; wasmtime still checks the engine configuration and version
            // in the file's header and refuses a mismatch (we then recompile).
            if let Ok(c) = unsafe { Component::deserialize_file(&self.engine, file) } {
                return Ok(c);
            }
        }
        let component =
            Component::new(&self.engine, bytes).map_err(|e| ComponentError::Invalid {
                path: label.into(),
                msg: format!("{e:#}"),
            })?;
        if let (Some(file), Ok(code)) = (cached, component.serialize()) {
            let tmp = file.with_extension("tmp");
            if std::fs::write(&tmp, code).is_ok() {
                let _ = std::fs::rename(&tmp, &file);
            }
        }
        Ok(component)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_say_what_the_bytes_are() {
        assert!(matches!(
            validate_component("a", b"hello"),
            Err(ComponentError::NotWasm { .. })
        ));
        assert!(matches!(
            validate_component("a", b"\0asm\x01\0\0\0"),
            Err(ComponentError::CoreModule { .. })
        ));
        assert!(matches!(
            validate_component("a", b"\0asm\x0d\0\x01\0"),
            Ok(())
        ));
        let e = validate_component("x.wasm", b"\0asm\x02\0\0\0").expect_err("unknown");
        assert!(
            e.to_string()
                .starts_with("x.wasm: unknown WebAssembly version"),
            "{e}"
        );
    }
}
