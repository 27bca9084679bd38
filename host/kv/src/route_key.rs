//! Routing keys: the chain a router (`memoria route`) hashes a prompt with to pick a host. The
//! blocks are the hosts' blocks (same block size, same [`BlockHash::chain`] step), but the root
//! is public:
//!
//! ```text
//! route_root = H("memoria-route-root-v1" || block_tokens: u32 LE || label)
//! ```
//!
//! where `label` is the request's route label (the `{namespace}` of `/ns/{namespace}/...`, empty
//! for the plain `/v1` routes). A host's own keys start from a root that includes its namespace
//! salt, which never leaves the host, so routing keys and host keys never coincide: a routing
//! key is a function of what the client sent and public constants only, and reveals nothing
//! about a host's salts or cache keys.

use crate::hash::BlockHash;

const ROUTE_ROOT_DOMAIN: &[u8] = b"memoria-route-root-v1";

/// The root of the routing chain for `label` at `block_tokens` tokens per block.
pub fn route_root(label: &str, block_tokens: usize) -> BlockHash {
    let mut h = blake3::Hasher::new();
    h.update(ROUTE_ROOT_DOMAIN);
    h.update(
        &u32::try_from(block_tokens)
            .unwrap_or(u32::MAX)
            .to_le_bytes(),
    );
    h.update(label.as_bytes());
    BlockHash(*h.finalize().as_bytes())
}

/// The routing keys of `tokens`' first full blocks (at most `max_blocks`), each chained from the
/// one before it and the first from [`route_root`]. A `block_tokens` of 0 gives no keys.
pub fn route_chain(
    label: &str,
    block_tokens: usize,
    tokens: &[u32],
    max_blocks: usize,
) -> Vec<BlockHash> {
    if block_tokens == 0 {
        return Vec::new();
    }
    let mut prev = route_root(label, block_tokens);
    tokens
        .chunks_exact(block_tokens)
        .take(max_blocks)
        .map(|block| {
            prev = BlockHash::chain(&prev, block);
            prev
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::{ModelFingerprint, NamespaceSalt};
    use crate::layout::KvElem;

    #[test]
    fn equal_prefixes_share_keys_and_labels_separate_them() {
        let a: Vec<u32> = (0..40).collect();
        let mut b = a.clone();
        b[20] = 999;
        let ka = route_chain("", 16, &a, 8);
        let kb = route_chain("", 16, &b, 8);
        assert_eq!(ka.len(), 2);
        assert_eq!(ka[0], kb[0]);
        assert_ne!(ka[1], kb[1]);
        assert_ne!(route_chain("t1", 16, &a, 8)[0], ka[0]);
        assert_ne!(route_chain("", 8, &a, 8)[0], ka[0]);
        assert_eq!(route_chain("", 16, &a, 1).len(), 1);
        assert!(route_chain("", 0, &a, 8).is_empty());
        assert!(route_chain("", 16, &a[..15], 8).is_empty());
    }

    #[test]
    fn routing_keys_are_not_host_keys() {
        let tokens: Vec<u32> = (0..16).collect();
        let root = BlockHash::root(
            &ModelFingerprint::of(b"m"),
            KvElem::F16,
            16,
            &NamespaceSalt::derive("shared"),
        );
        assert_ne!(
            BlockHash::chain(&root, &tokens),
            route_chain("", 16, &tokens, 1)[0]
        );
        assert_ne!(root, route_root("", 16));
    }
}
