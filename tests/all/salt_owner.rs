//! One namespace registry: a namespace's salt has one owner. Outside the registry
//! (`memoria_kv::registry`, filled by `memoria_tenant`'s derivation) no host source constructs
//! a `NamespaceSalt`, except the store's decoders reading this host's own records back; the
//! HTTP and runtime crates never name a salt at all (they pass namespace ids), and a chain root is
//! derived from a salt only at the listed sites.

use std::path::{Path, PathBuf};

/// Where a salt may be constructed (non-test code): its definition, the derivation that fills
/// the registry (`Isolation::salt` is private to `memoria-tenant`, so the compiler keeps its
/// callers there), and the store's record decoders.
const ALLOWED: &[&str] = &[
    "host/kv/src/hash.rs",
    "host/tenant/src/isolation.rs",
    "host/store/src/codec.rs",
    "host/store/src/session.rs",
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read_dir").flatten() {
        let p = entry.path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The non-test code of `src/` files: test files skipped, `#[cfg(test)]` test modules cut,
/// comments dropped.
fn production_code() -> Vec<(String, String)> {
    let root = root();
    let mut files = Vec::new();
    for krate in std::fs::read_dir(root.join("host"))
        .expect("host/")
        .flatten()
    {
        let src = krate.path().join("src");
        if src.is_dir() {
            sources(&src, &mut files);
        }
    }
    assert!(files.len() > 100, "found only {} sources", files.len());
    files
        .into_iter()
        .filter_map(|p| {
            let rel = p
                .strip_prefix(&root)
                .ok()?
                .to_string_lossy()
                .replace('\\', "/");
            let name = p.file_name()?.to_string_lossy().into_owned();
            if name.ends_with("_tests.rs") || name == "tests.rs" || rel.contains("/tests/") {
                return None;
            }
            let text = std::fs::read_to_string(&p).ok()?;
            // Cut at the test module (a `#[cfg(test)]` on a `mod` or a `#[path]`d one), not at a
            // test-only item above it.
            let tail = text
                .match_indices("#[cfg(test)]")
                .map(|(i, _)| i)
                .find(|&i| {
                    let next = text[i + "#[cfg(test)]".len()..].trim_start();
                    next.starts_with("mod ") || next.starts_with("#[path")
                })
                .unwrap_or(text.len());
            let code = &text[..tail];
            let code: Vec<&str> = code
                .lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .collect();
            Some((rel, code.join("\n")))
        })
        .collect()
}

#[test]
fn nothing_outside_the_registry_constructs_a_salt() {
    let mut found = Vec::new();
    for (rel, code) in production_code() {
        if ALLOWED.contains(&rel.as_str()) {
            continue;
        }
        for needle in ["NamespaceSalt(", "NamespaceSalt::derive"] {
            if code.contains(needle) {
                found.push(format!("{rel}: {needle}"));
            }
        }
    }
    assert!(
        found.is_empty(),
        "salts constructed outside the registry: {found:#?}"
    );
}

#[test]
fn http_and_runtime_never_hold_a_salt() {
    let mut found = Vec::new();
    for (rel, code) in production_code() {
        let consumer = rel.starts_with("host/http/") || rel.starts_with("host/runtime/");
        if consumer && (code.contains("NamespaceSalt") || code.contains(".salt")) {
            found.push(rel);
        }
    }
    assert!(
        found.is_empty(),
        "salts held by http or the runtime: {found:?}"
    );
}

/// Where a chain root is derived from a salt (non-test code), with how many sites each file
/// has: the registry computes every registered namespace's root once per model shape (and
/// answers the store's root-of-salt and salt-of-root look-ups); the pool's helper serves tests;
/// a session record read without a registry (tools checking a store file) checks its chain
/// from the salt it holds. The block codec derives none: a host-form block is checked by its
/// salt, a shared-form one by its root, both from the registry. A new site fails here: take the
/// root from the registry instead.
const ROOT_SITES: &[(&str, usize)] = &[
    ("host/kv/src/registry.rs", 1),
    ("host/kv/src/pool.rs", 1),
    ("host/store/src/session.rs", 1),
];

#[test]
fn chain_roots_are_derived_only_where_listed() {
    let mut found: Vec<(String, usize)> = Vec::new();
    for (rel, code) in production_code() {
        let n = code.matches("BlockHash::root(").count() + code.matches(".root_hash(").count();
        if n > 0 {
            found.push((rel, n));
        }
    }
    found.sort();
    let mut expected: Vec<(String, usize)> = ROOT_SITES
        .iter()
        .map(|(f, n)| (f.to_string(), *n))
        .collect();
    expected.sort();
    assert_eq!(found, expected, "sites deriving a chain root from a salt");
}
