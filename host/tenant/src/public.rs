//! A namespace's public prefixes (`public_prefixes = ["text", {file = "path"}, ...]`): texts an
//! operator declares public, whose whole K/V blocks isolated namespaces declaring the same text
//! share (see `memoria_kv::PublicChain`). Resolved to texts once, at configuration load; files
//! are read then (relative paths from the working directory), each size-checked first.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::TenantError;

/// Most prefixes one namespace may declare.
pub const MAX_PUBLIC_PREFIXES: usize = 16;
/// Largest prefix text, in bytes (inline or from a file).
pub const MAX_PUBLIC_PREFIX_BYTES: u64 = 256 << 10;

/// One declared prefix as written in host.toml.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum PublicPrefix {
    /// The text itself.
    Text(String),
    /// A UTF-8 file holding the text.
    File(PrefixFile),
}

/// `{file = "path"}`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrefixFile {
    pub file: PathBuf,
}

fn bad(ns: &str, why: String) -> TenantError {
    TenantError::BadPublicPrefix {
        ns: ns.to_string(),
        why,
    }
}

fn read_file(ns: &str, path: &Path) -> Result<String, TenantError> {
    let shown = path.display();
    let len = std::fs::metadata(path)
        .map_err(|e| bad(ns, format!("{shown}: {e}")))?
        .len();
    if len > MAX_PUBLIC_PREFIX_BYTES {
        return Err(bad(
            ns,
            format!("{shown}: {len} bytes, at most {MAX_PUBLIC_PREFIX_BYTES}"),
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| bad(ns, format!("{shown}: {e}")))?;
    if bytes.len() as u64 > MAX_PUBLIC_PREFIX_BYTES {
        return Err(bad(
            ns,
            format!("{shown}: grew past {MAX_PUBLIC_PREFIX_BYTES} bytes"),
        ));
    }
    String::from_utf8(bytes).map_err(|_| bad(ns, format!("{shown}: not UTF-8 text")))
}

/// The texts of `declared`, checked: at most [`MAX_PUBLIC_PREFIXES`], each non-empty and at
/// most [`MAX_PUBLIC_PREFIX_BYTES`]; files are read now.
pub fn resolve(ns: &str, declared: &[PublicPrefix]) -> Result<Vec<String>, TenantError> {
    if declared.len() > MAX_PUBLIC_PREFIXES {
        return Err(bad(
            ns,
            format!("{} prefixes, at most {MAX_PUBLIC_PREFIXES}", declared.len()),
        ));
    }
    declared
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let text = match p {
                PublicPrefix::Text(t) => t.clone(),
                PublicPrefix::File(f) => read_file(ns, &f.file)?,
            };
            if text.is_empty() {
                return Err(bad(ns, format!("entry {i} is empty")));
            }
            if text.len() as u64 > MAX_PUBLIC_PREFIX_BYTES {
                return Err(bad(
                    ns,
                    format!(
                        "entry {i}: {} bytes, at most {MAX_PUBLIC_PREFIX_BYTES}",
                        text.len()
                    ),
                ));
            }
            Ok(text)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct Doc {
        p: Vec<PublicPrefix>,
    }

    #[test]
    fn texts_and_files_resolve_and_are_checked() {
        let dir = std::env::temp_dir().join(format!("memoria-public-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let f = dir.join("system.txt");
        std::fs::write(&f, "You are a helpful support assistant.").expect("write");
        let toml_text = format!("p = [\"inline\", {{file = {:?}}}]", f.display().to_string());
        let doc: Doc = toml::from_str(&toml_text).expect("parse");
        assert_eq!(
            resolve("a", &doc.p).expect("resolve"),
            ["inline", "You are a helpful support assistant."]
        );
        let big = dir.join("big.txt");
        std::fs::write(&big, vec![b'x'; MAX_PUBLIC_PREFIX_BYTES as usize + 1]).expect("write");
        let err = resolve("a", &[PublicPrefix::File(PrefixFile { file: big })]).expect_err("big");
        assert!(err.to_string().contains("at most"), "{err}");
        let err = resolve("a", &[PublicPrefix::Text(String::new())]).expect_err("empty");
        assert_eq!(
            err.to_string(),
            "namespaces.a.public_prefixes: entry 0 is empty"
        );
        let missing = PublicPrefix::File(PrefixFile {
            file: dir.join("nope.txt"),
        });
        assert!(resolve("a", &[missing]).is_err());
        let many = vec![PublicPrefix::Text("x".into()); MAX_PUBLIC_PREFIXES + 1];
        assert!(resolve("a", &many).is_err());
        assert!(toml::from_str::<Doc>("p = [{path = \"x\"}]").is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
