//! Locates `../shared` (llama.cpp's golden outputs, test vocabularies, the stories260K models).
//! A missing folder fails loudly: tests that need it must never pass by skipping. Real models too
//! large for it (Gemma 3) come from the models folder that `memoria pull` fills. Also the tokio
//! runtime the engine tests drive their handles from.

use std::path::PathBuf;

/// The project's shared data folder: `$MEMORIA_SHARED` or `../shared` beside the checkout.
pub fn dir() -> PathBuf {
    let dir = std::env::var_os("MEMORIA_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared"));
    assert!(
        dir.join("golden").is_dir(),
        "shared test data not found at {} (expected golden/, vocab/, models/ beside the checkout; \
         set MEMORIA_SHARED to its path)",
        dir.display()
    );
    dir
}

/// A file under the shared folder, asserted to exist.
pub fn path(rel: &str) -> PathBuf {
    let p = dir().join(rel);
    assert!(p.is_file(), "shared test file missing: {}", p.display());
    p
}

/// Parses a JSON file under the shared folder.
pub fn json(rel: &str) -> serde_json::Value {
    let p = path(rel);
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A real model from the models folder (`$MEMORIA_MODELS`, default `~/.cache/memoria/models`,
/// where `memoria pull` puts them). Missing is a failure, never a skip.
pub fn real_model(file: &str) -> PathBuf {
    let dir = std::env::var_os("MEMORIA_MODELS")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/memoria/models"))
        })
        .expect("neither MEMORIA_MODELS nor HOME is set: cannot find the models folder");
    let p = dir.join(file);
    let pull = match file {
        "gemma-3-270m-q4_k_m.gguf" => "gemma3-270m",
        "SmolLM2-135M-Instruct.Q4_1.gguf" => "smollm2-135m-instruct",
        _ => "NAME",
    };
    assert!(
        p.is_file(),
        "real model missing: {} (run `memoria pull {pull}`, or set MEMORIA_MODELS to the folder \
         holding {file})",
        p.display()
    );
    p
}

/// A two-thread tokio runtime, as engine tests use to drive an `EngineHandle`.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// An engine on stories260K with prefill steps of `step_tokens` (the engine-level tests').
pub fn stories_engine(step_tokens: usize) -> memoria_sched::EngineHandle {
    let model =
        memoria_model::llama::Model::load(path("models/stories260K-f32.gguf")).expect("model");
    let tok = memoria_model::tokenizer::Tokenizer::from_gguf(model.gguf()).expect("tokenizer");
    let cfg = memoria_sched::EngineConfig {
        step_tokens,
        ..memoria_sched::EngineConfig::default()
    };
    memoria_sched::EngineHandle::start(std::sync::Arc::new(model), std::sync::Arc::new(tok), cfg)
        .expect("engine")
}

/// Registers `ns` with `e` keyed by the salt derived from `label` (replacing its entry) and
/// opens a session in it. Engine tests that compare caches give runs their own salts this way;
/// the registry is the only place a salt is kept, so the entry must be in place before `open`.
pub async fn open_salted(
    e: &memoria_sched::EngineHandle,
    ns: memoria_kv::NamespaceId,
    label: &str,
) -> memoria_sched::SessionId {
    register(e, ns, label);
    e.open(ns).await.expect("open")
}

/// Registers `ns` with `e`, keyed by the salt derived from `label`.
pub fn register(e: &memoria_sched::EngineHandle, ns: memoria_kv::NamespaceId, label: &str) {
    e.namespaces().insert(memoria_kv::NamespaceEntry::new(
        ns,
        label,
        memoria_kv::NamespaceSalt::derive(label),
    ));
}

/// Registers `ns` with `e` under the public `label`, keyed by `salt` (replacing its entry).
pub fn register_salt(
    e: &memoria_sched::EngineHandle,
    ns: memoria_kv::NamespaceId,
    label: &str,
    salt: memoria_kv::NamespaceSalt,
) {
    e.namespaces()
        .insert(memoria_kv::NamespaceEntry::new(ns, label, salt));
}
