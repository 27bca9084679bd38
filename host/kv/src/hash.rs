//! The block hash chain, a stable format: these keys are stored on disk and shared across hosts,
//! so every byte fed to the hash below is part of the format and must never change silently
//! (bump the `-v1` domain strings instead).
//!
//! `H` is BLAKE3 (32-byte output), over the concatenation of:
//!
//! ```text
//! root = H("memoria-kv-root-v1" || model_fingerprint[32] || elem_name || block_tokens: u32 LE
//!          || namespace_salt[32])
//! h_i  = H("memoria-kv-block-v1" || h_{i-1}[32] || token_0: u32 LE || ... || token_{B-1}: u32 LE)
//! ```
//!
//! `elem_name` is the ASCII of [`crate::KvElem::name`] (`f32`, `f16`, `q8_0`, `q4_0`), with no
//! length prefix: the fixed-size fields around it keep the encoding unambiguous. `h_{-1}` is the
//! root. Two sequences share block `i` exactly when they share the model, element type, block size,
//! namespace salt and all tokens up to the end of block `i`. Never `DefaultHasher`.
//!
//! # Public prefixes (isolated namespaces sharing what is public)
//!
//! A namespace may declare public prefixes (see [`crate::PublicChain`]). Its chain then starts
//! under the **common root** `root_c` (the root of the common salt, the one `shared` namespaces
//! use) and stays there for every leading block whose hash is one of the declared prefixes'
//! whole blocks under `root_c`; those blocks are exactly the shared namespace's blocks of the
//! same tokens, so every namespace declaring the prefix holds one copy. The first block that
//! leaves the declaration (and every block after it) is private, chained from
//!
//! ```text
//! fork = H("memoria-kv-private-v1" || root_ns[32] || p_last[32])
//! ```
//!
//! where `root_ns` is the namespace's own root and `p_last` the hash of the last public block:
//! a private block's hash is `H(fork, tokens)`, never the bare public chain continued, so a
//! private block of one namespace can never equal another namespace's (or the shared
//! namespace's) block of the same tokens. With no leading public block the chain is the plain
//! one from `root_ns` (unchanged format). Partial tails after public blocks hang under `fork`
//! too. The salt only enters through `root_ns`, a one-way hash; it never leaves the host.
//!
//! # Tail keys (partial blocks kept on disk)
//!
//! A retained partial tail (a finished sequence's unfilled last block) has no block hash of
//! its own; the local disk tier keeps at most one per parent, under
//!
//! ```text
//! tail = H("memoria-kv-tail-v1" || parent[32])
//! ```
//!
//! where `parent` is the hash the tail continues ([`BlockHash::parent_at`]): the root, the
//! private fork, or the previous whole block. The parent chains from the namespace's root, so
//! tail keys are isolated exactly as blocks are.

use std::fmt;

use crate::layout::KvElem;

const ROOT_DOMAIN: &[u8] = b"memoria-kv-root-v1";
const BLOCK_DOMAIN: &[u8] = b"memoria-kv-block-v1";
const PRIVATE_DOMAIN: &[u8] = b"memoria-kv-private-v1";
const TAIL_DOMAIN: &[u8] = b"memoria-kv-tail-v1";
const SALT_CONTEXT: &str = "memoria-kv namespace salt v1";
const KEYED_SALT_DOMAIN: &[u8] = b"memoria-kv namespace salt v2";

/// Key of a full block (or of the chain's root).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BlockHash(pub [u8; 32]);

/// Identity of the model whose K/V the blocks hold (e.g. a hash of the GGUF's tensors and hparams).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ModelFingerprint(pub [u8; 32]);

/// Per-namespace salt: namespaces with equal salts share cached blocks, others never do.
/// The host derives it from configuration, never from a request, and keeps it in the namespace
/// registry (`registry`); its `Debug` is redacted so it cannot reach a log.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct NamespaceSalt(pub [u8; 32]);

impl fmt::Debug for NamespaceSalt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("NamespaceSalt(..)")
    }
}

/// A host secret namespace salts are derived with (see [`NamespaceSalt::derive_keyed`]): with it,
/// a salt cannot be computed from a namespace's name. Hosts that share a remote tier share it
/// (it comes from the tier's key file). Its `Debug` is redacted.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct SaltSecret([u8; 32]);

impl SaltSecret {
    /// A secret of 32 bytes (derived from key material by its owner).
    pub fn new(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }
}

impl fmt::Debug for SaltSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SaltSecret(..)")
    }
}

impl ModelFingerprint {
    /// Fingerprint of arbitrary identifying bytes (BLAKE3 of them).
    pub fn of(bytes: &[u8]) -> Self {
        Self(*blake3::hash(bytes).as_bytes())
    }
}

impl NamespaceSalt {
    /// Salt derived from a configuration label: BLAKE3 `derive_key("memoria-kv namespace salt v1", label)`.
    pub fn derive(label: &str) -> Self {
        Self(blake3::derive_key(SALT_CONTEXT, label.as_bytes()))
    }

    /// Salt derived from a host secret and a configuration label: BLAKE3 keyed with the
    /// secret over `"memoria-kv namespace salt v2" || label`. Without the secret it cannot be
    /// computed from the label.
    pub fn derive_keyed(secret: &SaltSecret, label: &str) -> Self {
        let mut h = blake3::Hasher::new_keyed(&secret.0);
        h.update(KEYED_SALT_DOMAIN);
        h.update(label.as_bytes());
        Self(*h.finalize().as_bytes())
    }
}

impl BlockHash {
    /// The chain's root `h_{-1}` for one model, element type, block size and namespace salt.
    pub fn root(
        model: &ModelFingerprint,
        elem: KvElem,
        block_tokens: usize,
        salt: &NamespaceSalt,
    ) -> Self {
        let mut h = blake3::Hasher::new();
        h.update(ROOT_DOMAIN);
        h.update(&model.0);
        h.update(elem.name().as_bytes());
        // Layouts cap block_tokens far below u32::MAX; saturate rather than wrap for odd callers.
        h.update(
            &u32::try_from(block_tokens)
                .unwrap_or(u32::MAX)
                .to_le_bytes(),
        );
        h.update(&salt.0);
        Self(*h.finalize().as_bytes())
    }

    /// `h_i` from `h_{i-1}` and block `i`'s tokens.
    pub fn chain(prev: &BlockHash, tokens: &[u32]) -> Self {
        CHAINED.with(|c| c.set(c.get().wrapping_add(1)));
        let mut h = blake3::Hasher::new();
        h.update(BLOCK_DOMAIN);
        h.update(&prev.0);
        for t in tokens {
            h.update(&t.to_le_bytes());
        }
        Self(*h.finalize().as_bytes())
    }

    /// The parent of a namespace's first private block after a public run: `root_ns` is the
    /// namespace's own root, `public_last` the last public block's hash (see the module doc).
    pub fn private_fork(root_ns: &BlockHash, public_last: &BlockHash) -> Self {
        let mut h = blake3::Hasher::new();
        h.update(PRIVATE_DOMAIN);
        h.update(&root_ns.0);
        h.update(&public_last.0);
        Self(*h.finalize().as_bytes())
    }

    /// The hash that block `i` of a chain (or the partial tail at `i`) continues: the root for
    /// the first, the private fork right after a leading public run of `n_public` blocks, else
    /// whole block `i - 1`'s hash in `hashes`.
    ///
    /// # Panics
    /// If `i > hashes.len()`.
    pub fn parent_at(root: &BlockHash, hashes: &[BlockHash], n_public: usize, i: usize) -> Self {
        if i == 0 {
            *root
        } else if i == n_public {
            BlockHash::private_fork(root, &hashes[i - 1])
        } else {
            hashes[i - 1]
        }
    }

    /// The key a partial tail continuing `parent` is kept under on disk (see the module doc).
    pub fn tail_key(parent: &BlockHash) -> Self {
        let mut h = blake3::Hasher::new();
        h.update(TAIL_DOMAIN);
        h.update(&parent.0);
        Self(*h.finalize().as_bytes())
    }

    /// Lower-case hex, for logs and store keys.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl fmt::Debug for BlockHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BlockHash({})", &self.to_hex()[..16])
    }
}

impl fmt::Display for BlockHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

thread_local! {
    static CHAINED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Block chain hashes ([`BlockHash::chain`]) computed on this thread so far: the engine
/// reports its own thread's count, so a test can pin how often a prompt is hashed.
pub fn chain_hashes_here() -> u64 {
    CHAINED.with(std::cell::Cell::get)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyed_salts_need_the_secret() {
        let (a, b) = (SaltSecret::new([1; 32]), SaltSecret::new([2; 32]));
        let s = NamespaceSalt::derive_keyed(&a, "isolated:team");
        assert_eq!(s, NamespaceSalt::derive_keyed(&a, "isolated:team"));
        assert_ne!(s, NamespaceSalt::derive_keyed(&b, "isolated:team"));
        assert_ne!(s, NamespaceSalt::derive_keyed(&a, "isolated:other"));
        assert_ne!(s, NamespaceSalt::derive("isolated:team"));
        assert_eq!(format!("{a:?}"), "SaltSecret(..)");
    }

    #[test]
    fn chain_depends_on_every_input() {
        let m = ModelFingerprint([1; 32]);
        let s = NamespaceSalt::derive("shared");
        let r = BlockHash::root(&m, KvElem::F16, 16, &s);
        assert_ne!(r, BlockHash::root(&m, KvElem::F32, 16, &s));
        assert_ne!(r, BlockHash::root(&m, KvElem::F16, 32, &s));
        assert_ne!(
            r,
            BlockHash::root(&m, KvElem::F16, 16, &NamespaceSalt::derive("t1"))
        );
        assert_ne!(
            r,
            BlockHash::root(&ModelFingerprint([2; 32]), KvElem::F16, 16, &s)
        );
        let a = BlockHash::chain(&r, &[1, 2, 3]);
        assert_eq!(a, BlockHash::chain(&r, &[1, 2, 3]));
        assert_ne!(a, BlockHash::chain(&r, &[1, 2, 4]));
        assert_ne!(BlockHash::chain(&a, &[1]), BlockHash::chain(&r, &[1]));
    }

    #[test]
    fn known_values_never_change() {
        let root = BlockHash::root(
            &ModelFingerprint([0; 32]),
            KvElem::F16,
            16,
            &NamespaceSalt::derive("shared"),
        );
        let h0 = BlockHash::chain(&root, &(0..16).collect::<Vec<u32>>());
        assert_eq!(
            root.to_hex(),
            "1f9bd541997e3c748e954af61cd54b41162280fa51c1d96ea5e4596116abb684"
        );
        assert_eq!(
            h0.to_hex(),
            "869984e273ed60b2636cc808ddf94243caae9b2110b92cba9e85be8af16ce529"
        );
    }

    #[test]
    fn format_matches_the_documented_bytes() {
        let m = ModelFingerprint([7; 32]);
        let s = NamespaceSalt([9; 32]);
        let mut bytes = b"memoria-kv-root-v1".to_vec();
        bytes.extend_from_slice(&[7; 32]);
        bytes.extend_from_slice(b"q8_0");
        bytes.extend_from_slice(&16u32.to_le_bytes());
        bytes.extend_from_slice(&[9; 32]);
        let root = BlockHash::root(&m, KvElem::Q8_0, 16, &s);
        assert_eq!(root.0, *blake3::hash(&bytes).as_bytes());
        let mut bytes = b"memoria-kv-block-v1".to_vec();
        bytes.extend_from_slice(&root.0);
        bytes.extend_from_slice(&5u32.to_le_bytes());
        bytes.extend_from_slice(&70000u32.to_le_bytes());
        assert_eq!(
            BlockHash::chain(&root, &[5, 70000]).0,
            *blake3::hash(&bytes).as_bytes()
        );
        let mut bytes = b"memoria-kv-private-v1".to_vec();
        bytes.extend_from_slice(&[1; 32]);
        bytes.extend_from_slice(&[2; 32]);
        assert_eq!(
            BlockHash::private_fork(&BlockHash([1; 32]), &BlockHash([2; 32])).0,
            *blake3::hash(&bytes).as_bytes()
        );
        let mut bytes = b"memoria-kv-tail-v1".to_vec();
        bytes.extend_from_slice(&[3; 32]);
        assert_eq!(
            BlockHash::tail_key(&BlockHash([3; 32])).0,
            *blake3::hash(&bytes).as_bytes()
        );
        assert_ne!(BlockHash::tail_key(&BlockHash([3; 32])), BlockHash([3; 32]));
        assert_eq!(
            NamespaceSalt::derive("x").0,
            blake3::derive_key("memoria-kv namespace salt v1", b"x")
        );
    }
}
