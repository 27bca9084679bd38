//! Authentication of remote values: every value this host writes to Valkey/Redis carries a tag,
//! keyed BLAKE3 over the Redis key and the value, under a key the hosts share and the server
//! never sees (`[store.remote] auth_key_file`, `--remote-key-file`); a value read back is used
//! only when its tag verifies under the key it was read from. So whoever can write to the
//! server, but does not hold the key, cannot make a host use anything (an altered K/V payload
//! with its unkeyed checksum recomputed, a value copied under another key, a session record).
//!
//! ```text
//! stored value = value || tag (32 bytes)
//! tag          = BLAKE3-keyed(mac_key, "memoria remote value v1" || len(key): u64 LE || key || value)
//! mac_key      = BLAKE3-derive_key("memoria remote value auth v1", key material)
//! ```
//!
//! The same key material seeds the namespace salts of a host with a remote tier
//! ([`RemoteKey::salt_secret`]): hosts share blocks only when they share the key file.
//! Invariants: the key material never leaves the host and is never formatted (`Debug` is
//! redacted); tags are compared in constant time.

use std::path::Path;

use memoria_kv::SaltSecret;

/// Least key material accepted, bytes (a 256-bit key; `openssl rand -hex 32` gives 64).
pub const MIN_KEY_BYTES: usize = 32;
/// Most key material read from a key file, bytes.
pub const MAX_KEY_BYTES: usize = 4096;
/// Bytes a tag adds to every stored value.
pub const TAG_BYTES: usize = 32;

const MAC_CONTEXT: &str = "memoria remote value auth v1";
const SALT_CONTEXT: &str = "memoria namespace salt secret v1";
const TAG_DOMAIN: &[u8] = b"memoria remote value v1";

/// The hosts' shared key for remote values.
#[derive(Clone, PartialEq, Eq)]
pub struct RemoteKey {
    mac: [u8; 32],
    salt: [u8; 32],
}

impl std::fmt::Debug for RemoteKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RemoteKey(..)")
    }
}

/// How to make a key file, for error messages.
pub const KEY_HINT: &str = "generate one with `openssl rand -hex 32 > remote.key && chmod 600 \
     remote.key` (or `head -c 32 /dev/urandom | xxd -p -c 64`) and give every host sharing the \
     remote tier the same file";

impl RemoteKey {
    /// A key from its material: at least [`MIN_KEY_BYTES`] bytes (surrounding whitespace is
    /// not part of it), at most [`MAX_KEY_BYTES`].
    pub fn from_material(material: &[u8]) -> Result<RemoteKey, String> {
        let m = material.trim_ascii();
        if m.len() < MIN_KEY_BYTES {
            return Err(format!(
                "the remote key holds {} bytes; it needs at least {MIN_KEY_BYTES}: {KEY_HINT}",
                m.len()
            ));
        }
        if m.len() > MAX_KEY_BYTES {
            return Err(format!(
                "the remote key holds {} bytes; at most {MAX_KEY_BYTES} are accepted",
                m.len()
            ));
        }
        Ok(RemoteKey {
            mac: blake3::derive_key(MAC_CONTEXT, m),
            salt: blake3::derive_key(SALT_CONTEXT, m),
        })
    }

    /// Reads the key file at `path` (see [`RemoteKey::from_material`]). A file others than its
    /// owner may read is accepted, with a warning in the second value.
    pub fn load(path: &Path) -> Result<(RemoteKey, Option<String>), String> {
        let what =
            |e: &dyn std::fmt::Display| format!("the remote key file {}: {e}", path.display());
        let meta = std::fs::metadata(path).map_err(|e| what(&e))?;
        if !meta.is_file() {
            return Err(what(&"not a file"));
        }
        if meta.len() > MAX_KEY_BYTES as u64 + 64 {
            return Err(what(&format!(
                "{} bytes; a key file holds at most {MAX_KEY_BYTES}",
                meta.len()
            )));
        }
        let bytes = std::fs::read(path).map_err(|e| what(&e))?;
        let key = RemoteKey::from_material(&bytes).map_err(|e| what(&e))?;
        let warning = open_to_others(&meta).then(|| {
            format!(
                "the remote key file {} can be read by other users; `chmod 600` it",
                path.display()
            )
        });
        Ok((key, warning))
    }

    /// The secret this host's namespace salts are derived with (see the module doc).
    pub fn salt_secret(&self) -> SaltSecret {
        SaltSecret::new(self.salt)
    }

    fn tag(&self, key: &str, value: &[u8]) -> blake3::Hash {
        let mut h = blake3::Hasher::new_keyed(&self.mac);
        h.update(TAG_DOMAIN);
        h.update(&(key.len() as u64).to_le_bytes());
        h.update(key.as_bytes());
        h.update(value);
        h.finalize()
    }

    /// `value` with its tag for `key` appended (what is stored under `key`).
    pub fn seal(&self, key: &str, mut value: Vec<u8>) -> Vec<u8> {
        let tag = self.tag(key, &value);
        value.extend_from_slice(tag.as_bytes());
        value
    }

    /// The value stored under `key` without its tag, if the tag verifies (`None`: too short, or
    /// written without this key, altered, or copied from another key).
    pub fn open(&self, key: &str, mut stored: Vec<u8>) -> Option<Vec<u8>> {
        let at = stored.len().checked_sub(TAG_BYTES)?;
        let tag: [u8; TAG_BYTES] = stored[at..].try_into().ok()?;
        stored.truncate(at);
        // `blake3::Hash` equality is constant-time.
        (self.tag(key, &stored) == blake3::Hash::from(tag)).then_some(stored)
    }
}

#[cfg(unix)]
fn open_to_others(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o077 != 0
}

#[cfg(not(unix))]
fn open_to_others(_: &std::fs::Metadata) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(m: &str) -> RemoteKey {
        RemoteKey::from_material(m.as_bytes()).expect("key")
    }

    #[test]
    fn a_sealed_value_opens_only_under_its_key_with_the_same_material() {
        let k = key(&"ab".repeat(32));
        let sealed = k.seal("p:shared:01", b"value".to_vec());
        assert_eq!(sealed.len(), 5 + TAG_BYTES);
        assert_eq!(
            k.open("p:shared:01", sealed.clone()).as_deref(),
            Some(&b"value"[..])
        );
        assert_eq!(k.open("p:shared:02", sealed.clone()), None, "another key");
        assert_eq!(
            key(&"cd".repeat(32)).open("p:shared:01", sealed.clone()),
            None
        );
        let mut altered = sealed.clone();
        altered[0] ^= 1;
        assert_eq!(k.open("p:shared:01", altered), None);
        assert_eq!(
            k.open("p:shared:01", sealed[..TAG_BYTES - 1].to_vec()),
            None
        );
        // Whitespace around the material is not part of it (a key file's newline).
        assert_eq!(key(&format!("{}\n", "ab".repeat(32))), k);
        assert_eq!(format!("{k:?}"), "RemoteKey(..)");
        assert_ne!(k.salt_secret(), key(&"cd".repeat(32)).salt_secret());
    }

    #[test]
    fn short_or_huge_material_is_refused_with_how_to_make_a_key() {
        let e = RemoteKey::from_material(b"short").unwrap_err();
        assert!(
            e.contains("at least 32") && e.contains("openssl rand"),
            "{e}"
        );
        assert!(RemoteKey::from_material(&vec![b'x'; MAX_KEY_BYTES + 1]).is_err());
        let dir = std::env::temp_dir().join(format!("memoria-key-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("k");
        std::fs::write(&f, "ab".repeat(32)).unwrap();
        let (k, _) = RemoteKey::load(&f).expect("load");
        assert_eq!(k, key(&"ab".repeat(32)));
        let e = RemoteKey::load(&dir.join("missing")).unwrap_err();
        assert!(e.contains("missing"), "{e}");
        assert!(RemoteKey::load(&dir).unwrap_err().contains("not a file"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
