//! `memoria store clear --namespace NAME --config FILE`: NAME is a namespace of the
//! configuration, resolved to the salt the server registers for it (same derivation, same
//! policy), so an isolated namespace's blocks are cleared alone and a shared one's with every
//! shared namespace's; an unknown name is refused with the names it could be.

use std::path::Path;
use std::sync::Arc;

use memoria_model::llama::Model;
use memoria_model::tokenizer::Tokenizer;
use memoria_sched::{EngineConfig, EngineHandle};
use memoria_store::{StoreOptions, TierStack};
use memoria_tenant::{NamespaceSpec, Tenants};
use serde_json::Value;

use super::{memoria, model, s, temp_store};

const CONFIG: &str = "[namespaces.alpha]\nisolation = \"isolated\"\n\n\
                      [namespaces.beta]\nisolation = \"isolated\"\n\n\
                      [namespaces.gamma]\nisolation = \"shared\"\n";

/// Computes `tokens` in namespace `name` of `CONFIG` over the store in `dir`, registered as
/// the server registers it.
fn compute(dir: &Path, name: &str, tokens: Vec<u32>) {
    let m = Model::load(model()).expect("model");
    let t = Tokenizer::from_gguf(m.gguf()).expect("tokenizer");
    let stack = Arc::new(TierStack::open(dir, StoreOptions::default()).expect("store"));
    let cfg = EngineConfig {
        store: Some(stack.clone()),
        ..EngineConfig::default()
    };
    let e = EngineHandle::start(Arc::new(m), Arc::new(t), cfg).expect("engine");
    let doc: toml::Table = toml::from_str(CONFIG).expect("toml");
    let specs = doc["namespaces"]
        .as_table()
        .expect("[namespaces]")
        .iter()
        .map(|(n, v)| {
            let spec: NamespaceSpec = v.clone().try_into().expect("spec");
            (n.clone(), spec)
        })
        .collect();
    let tenants = Tenants::new(specs).expect("tenants");
    e.register_namespaces(tenants.registry_table())
        .expect("register");
    let ns = tenants.get(name).expect("namespace").id;
    crate::shared::runtime().block_on(async {
        let id = e.open(ns).await.expect("open");
        e.append(ns, id, tokens).await.expect("append");
        e.prefill(ns, id).await.expect("prefill");
        e.close(ns, id).await.expect("close");
    });
    e.shutdown();
    stack.flush().expect("flush");
}

fn blocks(dir: &Path) -> u64 {
    let out = memoria(&["store", "stats", "--json", "--store", s(dir)]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    v["blocks"].as_u64().expect("blocks")
}

fn clear(dir: &Path, config: &Path, name: &str) -> (Option<u64>, String) {
    let out = memoria(&[
        "store",
        "clear",
        "--json",
        "--config",
        s(config),
        "--namespace",
        name,
        "--store",
        s(dir),
    ]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    if !out.status.success() {
        return (None, err);
    }
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    (v["blocks"].as_u64(), err)
}

#[test]
fn store_clear_names_a_configured_namespace() {
    let dir = temp_store("clear-config");
    std::fs::create_dir_all(&dir).expect("dir");
    let config = dir.with_extension("toml");
    std::fs::write(&config, CONFIG).expect("config");
    compute(
        &dir,
        "alpha",
        (0..70).map(|i| 1 + (i * 37 + 11) % 500).collect(),
    );
    let alpha = blocks(&dir);
    assert!(alpha >= 4, "alpha stored {alpha} blocks");
    compute(
        &dir,
        "gamma",
        (0..50).map(|i| 3 + (i * 41 + 5) % 500).collect(),
    );
    let gamma = blocks(&dir) - alpha;
    assert!(gamma >= 3, "gamma stored {gamma} blocks");

    let (none, _) = clear(&dir, &config, "beta");
    assert_eq!(none, Some(0), "beta (isolated) holds nothing");
    // `shared` is the default namespace the server adds: it shares gamma's salt and blocks.
    let (shared, note) = clear(&dir, &config, "shared");
    assert_eq!(shared, Some(gamma));
    assert!(note.contains("is shared: its blocks"), "{note}");
    let (own, _) = clear(&dir, &config, "alpha");
    assert_eq!(own, Some(alpha));
    assert_eq!(blocks(&dir), 0);

    let (refused, why) = clear(&dir, &config, "nobody");
    assert_eq!(refused, None);
    assert!(why.contains("nobody") && why.contains("alpha"), "{why}");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(&config);
}
