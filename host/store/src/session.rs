//! Saved sessions: a content-addressed record of a session's tokens and the hashes of its full
//! blocks, with the identity needed to rebuild its chain root. Restoring needs only the tokens
//! (blocks come back through the tiers, whatever is missing is recomputed); the hashes let
//! `verify` check the record and tools list the blocks a session needs.
//!
//! ```text
//! offset  size  field
//!      0     8  magic "MEMKVSES"
//!      8     2  format version (1)
//!     10     1  K/V element code (as the block codec)
//!     11     1  zero
//!     12     4  block_tokens
//!     16    32  model fingerprint
//!     48    32  namespace salt
//!     80     4  n_tokens (at most MAX_SESSION_TOKENS)
//!     84     4  n_hashes (at most n_tokens / block_tokens)
//!     88  4*nt  token ids
//!      *  32*nh block hashes
//!      *    32  BLAKE3 of every byte before it
//! ```
//!
//! The shared form (the remote tier's value, readable by every host that knows the salt) is the
//! same layout with magic `"MEMKVSHR"` and the namespace's chain root in the salt's place: the
//! salt never leaves the host, and a host reading it checks the root against its own salt for
//! the namespace, so a record saved under another salt is refused.

use memoria_kv::{BlockHash, KvElem, MAX_BLOCK_TOKENS, ModelFingerprint, NamespaceSalt, RootShape};

use crate::codec::{elem_code, elem_from_code};

const MAGIC: [u8; 8] = *b"MEMKVSES";
const SHARED_MAGIC: [u8; 8] = *b"MEMKVSHR";
const VERSION: u16 = 1;
const FIXED: usize = 88;
/// Longest session a record may hold (16 Mi tokens).
pub const MAX_SESSION_TOKENS: usize = 1 << 24;

/// A saved session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionRecord {
    pub model: ModelFingerprint,
    pub elem: KvElem,
    pub block_tokens: usize,
    pub salt: NamespaceSalt,
    /// Every token of the context, computed or pending.
    pub tokens: Vec<u32>,
    /// Hashes of the full blocks of `tokens`, in order.
    pub hashes: Vec<BlockHash>,
}

/// Why a session record was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    #[error("session record truncated or too long ({0} bytes)")]
    Length(usize),
    #[error("not a session record (bad magic)")]
    BadMagic,
    #[error("session record version {0}, this build reads {VERSION}")]
    Version(u16),
    #[error("session record field {0} is out of range")]
    Field(&'static str),
    #[error("session record checksum mismatch")]
    Checksum,
    #[error("session record block hashes do not match its tokens")]
    Chain,
    #[error("session record was saved under another namespace salt")]
    Namespace,
}

impl SessionRecord {
    /// The record's chain root, derived from the salt it holds: for checking a record read back
    /// without a registry (tools, the host-form decoder); a running host takes the root from its
    /// registry ([`memoria_kv::NamespaceTable::root_of_salt`]).
    pub fn root(&self) -> BlockHash {
        BlockHash::root(&self.model, self.elem, self.block_tokens, &self.salt)
    }

    /// The model shape its chain root depends on.
    pub fn shape(&self) -> RootShape {
        RootShape {
            model: self.model,
            elem: self.elem,
            block_tokens: self.block_tokens,
        }
    }

    /// The hashes of every full block of `tokens`.
    pub fn chain(root: &BlockHash, tokens: &[u32], block_tokens: usize) -> Vec<BlockHash> {
        let mut prev = *root;
        tokens
            .chunks_exact(block_tokens.max(1))
            .map(|c| {
                prev = BlockHash::chain(&prev, c);
                prev
            })
            .collect()
    }

    /// Whether the stored hashes are a prefix of the chain the tokens produce.
    pub fn check_chain(&self) -> Result<(), SessionError> {
        self.check_chain_from(&self.root())
    }

    /// [`SessionRecord::check_chain`] from `root`, the record's chain root.
    fn check_chain_from(&self, root: &BlockHash) -> Result<(), SessionError> {
        let chain = Self::chain(root, &self.tokens, self.block_tokens);
        if self.hashes.len() <= chain.len() && chain[..self.hashes.len()] == self.hashes[..] {
            Ok(())
        } else {
            Err(SessionError::Chain)
        }
    }

    /// The record's bytes (the host's own form: it holds the salt).
    pub fn encode(&self) -> Vec<u8> {
        self.encode_as(&MAGIC, &self.salt.0)
    }

    /// The record's shared form: `root`, its chain root from the registry, in the salt's place
    /// (see the module doc).
    pub fn encode_shared(&self, root: &BlockHash) -> Vec<u8> {
        self.encode_as(&SHARED_MAGIC, &root.0)
    }

    fn encode_as(&self, magic: &[u8; 8], identity: &[u8; 32]) -> Vec<u8> {
        let mut out =
            Vec::with_capacity(FIXED + 4 * self.tokens.len() + 32 * self.hashes.len() + 32);
        out.extend_from_slice(magic);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.push(elem_code(self.elem));
        out.push(0);
        out.extend_from_slice(&(self.block_tokens as u32).to_le_bytes());
        out.extend_from_slice(&self.model.0);
        out.extend_from_slice(identity);
        out.extend_from_slice(&(self.tokens.len() as u32).to_le_bytes());
        out.extend_from_slice(&(self.hashes.len() as u32).to_le_bytes());
        for t in &self.tokens {
            out.extend_from_slice(&t.to_le_bytes());
        }
        for h in &self.hashes {
            out.extend_from_slice(&h.0);
        }
        let sum = *blake3::hash(&out).as_bytes();
        out.extend_from_slice(&sum);
        out
    }

    /// Parses and verifies a record in the host's form (lengths before allocation, checksum,
    /// chain).
    pub fn decode(b: &[u8]) -> Result<SessionRecord, SessionError> {
        let (r, salt) = Self::decode_as(b, &MAGIC)?;
        let r = SessionRecord {
            salt: NamespaceSalt(salt),
            ..r
        };
        r.check_chain()?;
        Ok(r)
    }

    /// Parses and verifies a record in the shared form for the namespace whose salt is `salt`:
    /// its root must be the one `root_of` gives for the record's model shape (the registry's
    /// root for `salt`; [`SessionError::Namespace`] otherwise), then its chain is checked from
    /// that root as [`SessionRecord::decode`] does.
    pub fn decode_shared(
        b: &[u8],
        salt: &NamespaceSalt,
        root_of: impl FnOnce(&RootShape) -> BlockHash,
    ) -> Result<SessionRecord, SessionError> {
        let (r, root) = Self::decode_as(b, &SHARED_MAGIC)?;
        let r = SessionRecord { salt: *salt, ..r };
        let want = root_of(&r.shape());
        if want.0 != root {
            return Err(SessionError::Namespace);
        }
        r.check_chain_from(&want)?;
        Ok(r)
    }

    /// Every field but the 32-byte identity (salt or root), which is returned beside a record
    /// whose salt is zero; checked up to the checksum.
    fn decode_as(b: &[u8], magic: &[u8; 8]) -> Result<(SessionRecord, [u8; 32]), SessionError> {
        if b.len() < FIXED + 32 {
            return Err(SessionError::Length(b.len()));
        }
        if b[..8] != magic[..] {
            return Err(SessionError::BadMagic);
        }
        let u32_at =
            |at: usize| u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]) as usize;
        let version = u16::from_le_bytes([b[8], b[9]]);
        if version != VERSION {
            return Err(SessionError::Version(version));
        }
        let elem = elem_from_code(b[10]).ok_or(SessionError::Field("element type"))?;
        if b[11] != 0 {
            // The writer always writes zero: anything else is not a record this build wrote.
            return Err(SessionError::Field("reserved byte"));
        }
        let block_tokens = u32_at(12);
        if block_tokens == 0 || block_tokens > MAX_BLOCK_TOKENS {
            return Err(SessionError::Field("block_tokens"));
        }
        let (nt, nh) = (u32_at(80), u32_at(84));
        if nt > MAX_SESSION_TOKENS || nh > nt / block_tokens {
            return Err(SessionError::Field("token or hash count"));
        }
        let total = FIXED + 4 * nt + 32 * nh + 32;
        if b.len() != total {
            return Err(SessionError::Length(b.len()));
        }
        if blake3::hash(&b[..total - 32]).as_bytes()[..] != b[total - 32..] {
            return Err(SessionError::Checksum);
        }
        let arr = |at: usize| {
            let mut x = [0; 32];
            x.copy_from_slice(&b[at..at + 32]);
            x
        };
        let tokens = b[FIXED..FIXED + 4 * nt]
            .as_chunks::<4>()
            .0
            .iter()
            .map(|c| u32::from_le_bytes(*c))
            .collect();
        let hashes = (0..nh)
            .map(|i| BlockHash(arr(FIXED + 4 * nt + 32 * i)))
            .collect();
        let r = SessionRecord {
            model: ModelFingerprint(arr(16)),
            elem,
            block_tokens,
            salt: NamespaceSalt([0; 32]),
            tokens,
            hashes,
        };
        Ok((r, arr(48)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> SessionRecord {
        let (model, salt) = (ModelFingerprint([3; 32]), NamespaceSalt::derive("t"));
        let tokens: Vec<u32> = (0..37).collect();
        let root = BlockHash::root(&model, KvElem::F16, 16, &salt);
        SessionRecord {
            model,
            elem: KvElem::F16,
            block_tokens: 16,
            salt,
            hashes: SessionRecord::chain(&root, &tokens, 16),
            tokens,
        }
    }

    #[test]
    fn round_trips_and_rejects_damage() {
        let r = record();
        assert_eq!(r.hashes.len(), 2);
        let b = r.encode();
        assert_eq!(SessionRecord::decode(&b), Ok(r.clone()));
        for i in [0, 9, 20, 90, b.len() - 1] {
            let mut bad = b.clone();
            bad[i] ^= 0x40;
            assert!(SessionRecord::decode(&bad).is_err(), "flip at {i}");
        }
        for n in [0, 10, FIXED + 31, b.len() - 1] {
            assert!(SessionRecord::decode(&b[..n]).is_err(), "truncated to {n}");
        }
    }

    #[test]
    fn huge_counts_are_rejected_before_allocating() {
        let mut b = record().encode();
        b[80..84].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(
            SessionRecord::decode(&b),
            Err(SessionError::Field("token or hash count"))
        );
    }

    /// A record that differs from what `encode` writes is refused, even with a valid checksum.
    #[test]
    fn a_nonzero_reserved_byte_is_refused_even_when_resealed() {
        let mut b = record().encode();
        b[11] = 1;
        let end = b.len() - 32;
        let sum = *blake3::hash(&b[..end]).as_bytes();
        b[end..].copy_from_slice(&sum);
        assert_eq!(
            SessionRecord::decode(&b),
            Err(SessionError::Field("reserved byte"))
        );
    }

    #[test]
    fn the_shared_form_holds_the_root_not_the_salt_and_needs_the_same_salt() {
        let r = record();
        let b = r.encode_shared(&r.root());
        assert_eq!(b[48..80], r.root().0);
        assert!(
            !b.windows(32).any(|w| w == r.salt.0),
            "the salt is in the shared form"
        );
        // The reader's registry gives the root of its salt for the record's shape.
        let root_of = |salt: NamespaceSalt| {
            move |s: &RootShape| BlockHash::root(&s.model, s.elem, s.block_tokens, &salt)
        };
        let own = root_of(r.salt);
        assert_eq!(
            SessionRecord::decode_shared(&b, &r.salt, own),
            Ok(r.clone())
        );
        let other = NamespaceSalt::derive("another namespace");
        assert_eq!(
            SessionRecord::decode_shared(&b, &other, root_of(other)),
            Err(SessionError::Namespace)
        );
        // One form is never read as the other.
        assert_eq!(SessionRecord::decode(&b), Err(SessionError::BadMagic));
        assert_eq!(
            SessionRecord::decode_shared(&r.encode(), &r.salt, own),
            Err(SessionError::BadMagic)
        );
        let mut bad = b.clone();
        bad[90] ^= 1;
        assert_eq!(
            SessionRecord::decode_shared(&bad, &r.salt, own),
            Err(SessionError::Checksum)
        );
    }

    #[test]
    fn hashes_must_follow_the_tokens() {
        let mut r = record();
        r.hashes.swap(0, 1);
        assert_eq!(SessionRecord::decode(&r.encode()), Err(SessionError::Chain));
    }
}
