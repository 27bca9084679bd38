//! The components folder: what the admin API deployed or deleted, kept so a restart serves the
//! same components. Layout: `<dir>/<namespace>/default.wasm` and `route.<key>.wasm` hold
//! deployed components; `default.removed` and `route.<key>.removed` mark a configured component
//! as deleted. Files are written to a temporary name, synced and renamed, so a crash leaves the
//! old or the new file, never a torn one; a `.wasm` beside a `.removed` wins (a deploy writes the
//! component before clearing the mark, a delete marks before removing the component).
//!
//! Invariant: namespace names and route keys are validated before they become path components
//! (lowercase letters, digits, '-' and '_' only), so no name reaches outside the folder.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::table::Slot;

/// One slot as stored.
#[derive(Debug)]
pub(crate) enum Stored {
    /// A deployed component's bytes, read from `file`.
    Component { bytes: Vec<u8>, file: PathBuf },
    /// The configured component is deleted.
    Removed,
}

/// The components folder.
#[derive(Clone, Debug)]
pub(crate) struct ComponentsDir {
    root: PathBuf,
}

fn stem(slot: &Slot) -> String {
    match slot {
        Slot::Default => "default".into(),
        Slot::Route(k) => format!("route.{k}"),
    }
}

fn slot_of(stem: &str) -> Option<Slot> {
    match stem {
        "default" => Some(Slot::Default),
        s => Slot::route(s.strip_prefix("route.")?).ok(),
    }
}

/// Writes `bytes` to `file` atomically (temporary file, fsync, rename, fsync of the folder).
fn write_atomic(file: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = file.with_extension("tmp");
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, file)?;
    sync_dir(file)
}

fn sync_dir(file: &Path) -> std::io::Result<()> {
    match file.parent() {
        Some(dir) => std::fs::File::open(dir)?.sync_all(),
        None => Ok(()),
    }
}

/// Removes `file` if it exists, then syncs its folder so the removal is durable.
fn remove_synced(file: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(file) {
        Ok(()) => sync_dir(file),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

impl ComponentsDir {
    /// Opens (creating) the folder.
    pub fn open(root: PathBuf) -> std::io::Result<ComponentsDir> {
        std::fs::create_dir_all(&root)?;
        Ok(ComponentsDir { root })
    }

    /// The folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn file(&self, ns: &str, slot: &Slot, ext: &str) -> PathBuf {
        self.root.join(ns).join(format!("{}.{ext}", stem(slot)))
    }

    /// Everything stored for namespace `ns` (nothing when its folder does not exist). Files
    /// that are not ours (other names, leftover temporary files) are skipped.
    pub fn load(&self, ns: &str) -> std::io::Result<Vec<(Slot, Stored)>> {
        let dir = self.root.join(ns);
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut out: Vec<(Slot, Stored)> = Vec::new();
        for entry in entries {
            let path = entry?.path();
            let (Some(stem), Some(ext)) = (
                path.file_stem().and_then(|s| s.to_str()),
                path.extension().and_then(|s| s.to_str()),
            ) else {
                continue;
            };
            let Some(slot) = slot_of(stem) else { continue };
            match ext {
                "wasm" => {
                    let bytes = std::fs::read(&path)?;
                    out.retain(|(s, _)| s != &slot);
                    out.push((slot, Stored::Component { bytes, file: path }));
                }
                "removed" if !out.iter().any(|(s, _)| s == &slot) => {
                    out.push((slot, Stored::Removed));
                }
                _ => {}
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// Stores a deployed component (replacing one, clearing a deletion mark).
    pub fn write(&self, ns: &str, slot: &Slot, bytes: &[u8]) -> std::io::Result<()> {
        std::fs::create_dir_all(self.root.join(ns))?;
        write_atomic(&self.file(ns, slot, "wasm"), bytes)?;
        remove_synced(&self.file(ns, slot, "removed"))
    }

    /// Marks the slot's configured component as deleted and drops any deployed one.
    pub fn mark_removed(&self, ns: &str, slot: &Slot) -> std::io::Result<()> {
        std::fs::create_dir_all(self.root.join(ns))?;
        write_atomic(&self.file(ns, slot, "removed"), b"")?;
        remove_synced(&self.file(ns, slot, "wasm"))
    }

    /// Drops the slot's deployed component and deletion mark (back to the configuration).
    pub fn clear(&self, ns: &str, slot: &Slot) -> std::io::Result<()> {
        remove_synced(&self.file(ns, slot, "wasm"))?;
        remove_synced(&self.file(ns, slot, "removed"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deploys_and_deletions_round_trip() {
        let root =
            std::env::temp_dir().join(format!("memoria-components-dir-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let dir = ComponentsDir::open(root.clone()).expect("open");
        assert!(dir.load("alpha").expect("empty").is_empty());
        let chat = Slot::Route("chat".into());
        dir.write("alpha", &Slot::Default, b"one").expect("write");
        dir.write("alpha", &chat, b"two").expect("write");
        dir.mark_removed("alpha", &Slot::Route("old".into()))
            .expect("mark");
        std::fs::write(root.join("alpha").join("junk.tmp"), b"x").expect("junk");
        std::fs::write(root.join("alpha").join("route.Bad.wasm"), b"x").expect("junk");
        let got = dir.load("alpha").expect("load");
        let summary: Vec<(Slot, Option<Vec<u8>>)> = got
            .into_iter()
            .map(|(s, st)| match st {
                Stored::Component { bytes, .. } => (s, Some(bytes)),
                Stored::Removed => (s, None),
            })
            .collect();
        assert_eq!(
            summary,
            [
                (Slot::Default, Some(b"one".to_vec())),
                (chat.clone(), Some(b"two".to_vec())),
                (Slot::Route("old".into()), None),
            ]
        );
        dir.mark_removed("alpha", &chat).expect("mark");
        dir.write("alpha", &Slot::Route("old".into()), b"three")
            .expect("write");
        dir.clear("alpha", &Slot::Default).expect("clear");
        let got: Vec<_> = dir
            .load("alpha")
            .expect("load")
            .into_iter()
            .map(|(s, st)| (s, matches!(st, Stored::Removed)))
            .collect();
        assert_eq!(got, [(chat, true), (Slot::Route("old".into()), false)]);
        let _ = std::fs::remove_dir_all(root);
    }
}
