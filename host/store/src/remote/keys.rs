//! Remote key layout: `{prefix}:{namespace label}:{64 hex digits of the block hash}` for blocks
//! and `{prefix}:{namespace label}:session:{hex of the name's bytes}` for saved sessions (the
//! codec's module doc describes them beside the value formats). Labels and prefixes are
//! restricted to `[A-Za-z0-9._-]`, 1..=64 bytes, so a key always splits back into its parts (a
//! block key has three, a session key four) and an operator can `SCAN MATCH prefix:label:*` or
//! ACL-fence one tenant. No key holds a hash tag (`{...}`: `{` and `}` cannot occur in a label or
//! a prefix), so on a Redis Cluster keys spread over the slots by their whole name.

use memoria_kv::BlockHash;

/// Longest label or prefix, bytes.
pub const MAX_LABEL: usize = 64;

/// Checks a namespace label or key prefix.
pub fn check_label(s: &str) -> Result<(), String> {
    if s.is_empty() || s.len() > MAX_LABEL {
        return Err(format!("{s:?} must be 1..={MAX_LABEL} bytes"));
    }
    if let Some(c) = s
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(format!(
            "{s:?} holds {c:?}; only A-Z a-z 0-9 . _ - are allowed"
        ));
    }
    Ok(())
}

/// The key of one block.
pub fn block_key(prefix: &str, label: &str, hash: &BlockHash) -> String {
    let mut k = String::with_capacity(prefix.len() + label.len() + 66);
    k.push_str(prefix);
    k.push(':');
    k.push_str(label);
    k.push(':');
    push_hex(&mut k, &hash.0);
    k
}

/// The key of one saved session (the name in hex, so any name makes a plain key).
pub fn session_key(prefix: &str, label: &str, name: &str) -> String {
    let mut k = String::with_capacity(prefix.len() + label.len() + 10 + 2 * name.len());
    k.push_str(prefix);
    k.push(':');
    k.push_str(label);
    k.push_str(":session:");
    push_hex(&mut k, name.as_bytes());
    k
}

fn push_hex(k: &mut String, bytes: &[u8]) {
    for &b in bytes {
        k.push(char::from(b"0123456789abcdef"[usize::from(b >> 4)]));
        k.push(char::from(b"0123456789abcdef"[usize::from(b & 15)]));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_have_three_parts_and_labels_are_restricted() {
        let k = block_key("memoria", "team-a", &BlockHash([0xab; 32]));
        assert_eq!(k, format!("memoria:team-a:{}", "ab".repeat(32)));
        assert!(check_label("team_a.1-x").is_ok());
        assert!(check_label("").is_err());
        assert!(check_label("a:b").is_err());
        assert!(check_label("a b").is_err());
        assert!(check_label(&"x".repeat(65)).is_err());
    }

    #[test]
    fn session_keys_have_four_parts_whatever_the_name() {
        assert_eq!(
            session_key("memoria", "team-a", "a:b"),
            "memoria:team-a:session:613a62"
        );
        let k = session_key("p", "l", "chat 1/é");
        assert_eq!(k.split(':').count(), 4);
        assert!(k.bytes().all(|c| c.is_ascii_graphic()));
    }
}
