//! The block codec: one K/V block as self-describing, checksummed bytes (the value stored in
//! every tier). Invariants: [`encode`] output always passes [`decode_into`] with the same
//! identity; every length read from the bytes is checked against the buffer and against the
//! caller's expected layout before anything is allocated or copied; a block is only written to
//! the caller's buffer after its checksum and identity have been verified.
//!
//! # Format (version 1)
//!
//! All integers are little-endian. Offsets are in bytes.
//!
//! ```text
//! offset  size  field
//!      0     8  magic "MEMKVBLK"
//!      8     2  format version (1)
//!     10     1  K/V element type of the block as the pool holds it: 0 f32, 1 f16, 2 q8_0, 3 q4_0
//!     11     1  payload encoding: 0 raw, 1 lz4 block, 2 q8_0 (lossy), 3 q4_0 (lossy)
//!     12     4  n_layer
//!     16     4  kv_dim (elements per K or V row)
//!     20     4  block_tokens (B, at most memoria_kv::MAX_BLOCK_TOKENS)
//!     24    32  model fingerprint
//!     56    32  namespace salt
//!     88    32  block hash (the chain hash `h_i`, also the key in every tier)
//!    120     8  raw length: bytes of the decoded block, `n_layer * 2 * B * row_bytes(kv_dim)`
//!    128     8  payload length: bytes after the token ids, to the end of the value
//!    136    32  checksum: BLAKE3 of bytes [0, 136) followed by bytes [168, end)
//!    168  4*B  token ids of the block's B slots (u32 each)
//! 168+4B     *  payload
//! ```
//!
//! Decoding verifies, in order: the fixed header is present, magic, version, element and
//! encoding codes, `B` in range, the declared payload length equals the bytes that remain, the
//! raw length equals the caller's layout, the checksum, then identity (model fingerprint,
//! element type, layout, salt through the requesting chain's root, block hash, token ids).
//! Any failure is a [`CodecError`]; callers treat it as a miss and drop the stored value.
//!
//! # Shared form (version 2)
//!
//! Values written to a tier other hosts read (the remote tier, [`crate::remote`]) use the same
//! layout with format version 2, where the 32 bytes at offset 56 hold the **namespace root**
//! (`memoria_kv::BlockHash::root` of model, element type, B and salt, a one-way BLAKE3 hash)
//! instead of the salt, so the salt never leaves the host. Decoding a version-2 value checks
//! that field against the requesting chain's root directly. [`encode_shared`] writes it; local
//! tiers keep version 1.
//!
//! # Remote keys
//!
//! In the remote tier each block is one key, `{key_prefix}:{namespace label}:{hash}`, where the
//! label is the namespace's public name (restricted to `[A-Za-z0-9._-]`, see
//! [`crate::remote::keys`]) and `hash` the 64 lowercase hex digits of the block hash; the value
//! is a version-2 block (LZ4 payload as in the cold tier, raw where LZ4 saves under 1/16),
//! stored with `SET .. EX ttl_s`.
//! A named session saved by a host with a remote tier is also one key,
//! `{key_prefix}:{namespace label}:session:{hex of the name's bytes}`, whose value is the
//! session record's shared form (magic `MEMKVSHR`, the chain root in the salt's place; see
//! [`crate::SessionRecord::encode_shared`]), stored with `SET .. EX ttl_s` as well.
//! On a Redis Cluster the keys are the same, without hash tags: each lands on the slot of its
//! whole name, so a chain's blocks spread over every node (the tier never needs two keys in one
//! slot; MGETs are split per slot and writes pipelined per slot, see `remote::link`).
//!
//! A retained partial tail kept on disk is a version-1 value too: its hash field is the tail key
//! (`memoria_kv::BlockHash::tail_key` of the hash it continues), the token ids of its unfilled
//! slots are `u32::MAX` and their bytes zero (`stack_tail.rs` reads and checks the padding).
//!
//! The payload encodings (raw, LZ4, lossy q8_0/q4_0 of f16 blocks) are in `codec_payload.rs`.

use memoria_kv::{BlockHash, KvElem, KvLayout, MAX_BLOCK_TOKENS, ModelFingerprint, NamespaceSalt};

/// First bytes of every encoded block.
pub const MAGIC: [u8; 8] = *b"MEMKVBLK";
/// The format version this build writes to local tiers (salt at offset 56).
pub const FORMAT_VERSION: u16 = 1;
/// The shared form's version (namespace root at offset 56; see the module doc).
pub const FORMAT_VERSION_SHARED: u16 = 2;
/// Bytes before the token ids.
pub const HEADER_BYTES: usize = 168;
/// Largest decoded block accepted (1 GiB): a sanity bound on a length read from outside.
pub const MAX_RAW_BYTES: u64 = 1 << 30;

const CHECKSUM_AT: usize = 136;

#[path = "codec_payload.rs"]
mod payload;
pub use payload::Encoding;
#[cfg(test)]
use payload::LZ4_PROBE;
use payload::{decode_payload, lz4_if_worth, quantize_f16};

/// Stable one-byte code of an element type.
pub fn elem_code(e: KvElem) -> u8 {
    match e {
        KvElem::F32 => 0,
        KvElem::F16 => 1,
        KvElem::Q8_0 => 2,
        KvElem::Q4_0 => 3,
    }
}

/// The element type of a code written by [`elem_code`].
pub fn elem_from_code(c: u8) -> Option<KvElem> {
    [KvElem::F32, KvElem::F16, KvElem::Q8_0, KvElem::Q4_0]
        .into_iter()
        .find(|e| elem_code(*e) == c)
}

/// Who a block belongs to: everything the header says about its identity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockIdentity {
    pub model: ModelFingerprint,
    pub layout: KvLayout,
    pub salt: NamespaceSalt,
    pub hash: BlockHash,
}

/// What a reader requires of a block before using it.
#[derive(Clone, Copy, Debug)]
pub struct Expect<'a> {
    pub model: ModelFingerprint,
    pub layout: KvLayout,
    pub hash: BlockHash,
    /// The requesting chain's root (namespace check; `None`: none): a shared-form value must
    /// carry it, a host-form value the salt below.
    pub root: Option<BlockHash>,
    /// The salt that gives `root`, from the registry (`None`: no registered salt does, so no
    /// host-form value passes the namespace check).
    pub salt: Option<NamespaceSalt>,
    /// The block's token ids, when the reader knows them.
    pub tokens: Option<&'a [u32]>,
}

/// Why stored bytes were rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    #[error("block truncated: need {need} bytes, have {have}")]
    Truncated { need: usize, have: usize },
    #[error("not a memoria block (bad magic)")]
    BadMagic,
    #[error(
        "block format version {0}, this build reads {FORMAT_VERSION} and {FORMAT_VERSION_SHARED}"
    )]
    UnsupportedVersion(u16),
    #[error("unknown {field} code {code}")]
    UnknownCode { field: &'static str, code: u8 },
    #[error("{field} is {value}, outside {limit}")]
    OutOfRange {
        field: &'static str,
        value: u64,
        limit: String,
    },
    #[error("{field} declares {declared} bytes, but {actual} are there")]
    LengthMismatch {
        field: &'static str,
        declared: u64,
        actual: u64,
    },
    #[error("checksum mismatch")]
    Checksum,
    #[error("block belongs elsewhere: {0} differs")]
    Foreign(&'static str),
    #[error("payload does not decode: {0}")]
    Payload(String),
    #[error("cannot encode: {0}")]
    Encode(String),
}

impl CodecError {
    /// Whether the bytes are damaged (as opposed to intact but someone else's).
    pub fn is_corrupt(&self) -> bool {
        !matches!(self, CodecError::Foreign(_))
    }
}

/// A parsed, length-checked header (checksum not yet verified).
#[derive(Clone, Copy, Debug)]
pub struct Header<'a> {
    /// For a version-2 (shared) value, `identity.salt` holds the namespace root's bytes.
    pub identity: BlockIdentity,
    /// The value is in the shared form (version 2).
    pub shared: bool,
    pub encoding: Encoding,
    pub raw_len: u64,
    token_bytes: &'a [u8],
    payload: &'a [u8],
    checksum: [u8; 32],
}

impl Header<'_> {
    /// The block's token ids.
    pub fn tokens(&self) -> impl Iterator<Item = u32> + '_ {
        self.token_bytes
            .as_chunks::<4>()
            .0
            .iter()
            .map(|c| u32::from_le_bytes(*c))
    }

    /// Bytes of the stored payload.
    pub fn payload_len(&self) -> usize {
        self.payload.len()
    }

    /// Decodes the payload into `out` (one block); for a header [`check`] accepted.
    pub fn decode(&self, out: &mut [u8]) -> Result<(), CodecError> {
        decode_payload(self.encoding, self.payload, out)
    }

    /// Where the payload starts in the value (it runs to the end).
    pub fn payload_offset(&self, value: &[u8]) -> usize {
        value.len() - self.payload.len()
    }
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut x = [0; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(x)
}

fn arr32(b: &[u8], at: usize) -> [u8; 32] {
    let mut x = [0; 32];
    x.copy_from_slice(&b[at..at + 32]);
    x
}

fn checksum_of(bytes: &[u8]) -> [u8; 32] {
    let mut h = blake3::Hasher::new();
    h.update(&bytes[..CHECKSUM_AT]);
    h.update(&bytes[HEADER_BYTES..]);
    *h.finalize().as_bytes()
}

/// Parses and length-checks the header; does not read the payload or verify the checksum.
pub fn parse_header(bytes: &[u8]) -> Result<Header<'_>, CodecError> {
    if bytes.len() < HEADER_BYTES {
        return Err(CodecError::Truncated {
            need: HEADER_BYTES,
            have: bytes.len(),
        });
    }
    if bytes[..8] != MAGIC {
        return Err(CodecError::BadMagic);
    }
    let version = u16_at(bytes, 8);
    if version != FORMAT_VERSION && version != FORMAT_VERSION_SHARED {
        return Err(CodecError::UnsupportedVersion(version));
    }
    let elem = elem_from_code(bytes[10]).ok_or(CodecError::UnknownCode {
        field: "element type",
        code: bytes[10],
    })?;
    let encoding = Encoding::from_code(bytes[11]).ok_or(CodecError::UnknownCode {
        field: "encoding",
        code: bytes[11],
    })?;
    let (n_layer, kv_dim, b) = (u32_at(bytes, 12), u32_at(bytes, 16), u32_at(bytes, 20));
    if b == 0 || b as usize > MAX_BLOCK_TOKENS {
        return Err(CodecError::OutOfRange {
            field: "block_tokens",
            value: b.into(),
            limit: format!("1..={MAX_BLOCK_TOKENS}"),
        });
    }
    let layout = KvLayout {
        n_layer: n_layer as usize,
        kv_dim: kv_dim as usize,
        block_tokens: b as usize,
        elem,
    };
    let raw_len = u64_at(bytes, 120);
    if raw_len > MAX_RAW_BYTES {
        return Err(CodecError::OutOfRange {
            field: "raw length",
            value: raw_len,
            limit: format!("0..={MAX_RAW_BYTES}"),
        });
    }
    let payload_len = u64_at(bytes, 128);
    let tokens_end = HEADER_BYTES + 4 * b as usize;
    if bytes.len() < tokens_end {
        return Err(CodecError::Truncated {
            need: tokens_end,
            have: bytes.len(),
        });
    }
    let rest = (bytes.len() - tokens_end) as u64;
    if payload_len != rest {
        return Err(CodecError::LengthMismatch {
            field: "payload length",
            declared: payload_len,
            actual: rest,
        });
    }
    Ok(Header {
        identity: BlockIdentity {
            model: ModelFingerprint(arr32(bytes, 24)),
            layout,
            salt: NamespaceSalt(arr32(bytes, 56)),
            hash: BlockHash(arr32(bytes, 88)),
        },
        shared: version == FORMAT_VERSION_SHARED,
        encoding,
        raw_len,
        token_bytes: &bytes[HEADER_BYTES..tokens_end],
        payload: &bytes[tokens_end..],
        checksum: arr32(bytes, CHECKSUM_AT),
    })
}

/// Parses the header and verifies the checksum over the whole value.
pub fn verify(bytes: &[u8]) -> Result<Header<'_>, CodecError> {
    memoria_kv::step_guard::note_step_work();
    let h = parse_header(bytes)?;
    let expected_raw = h
        .identity
        .layout
        .block_bytes()
        .map_err(|e| CodecError::Payload(e.to_string()))?;
    if h.raw_len != expected_raw as u64 {
        return Err(CodecError::LengthMismatch {
            field: "raw length",
            declared: h.raw_len,
            actual: expected_raw as u64,
        });
    }
    if checksum_of(bytes) != h.checksum {
        return Err(CodecError::Checksum);
    }
    Ok(h)
}

/// Encodes one block. `data` is the block's bytes in `identity.layout`; `tokens` its B ids.
/// A lossy encoding of a non-f16 block, or one that does not cut into whole quant blocks, falls
/// back to LZ4; LZ4 that saves less than 1/16 of the block falls back to raw (a large block
/// whose leading bytes do not compress is stored raw untried, see [`LZ4_PROBE`]).
pub fn encode(
    identity: &BlockIdentity,
    tokens: &[u32],
    data: &[u8],
    encoding: Encoding,
) -> Result<Vec<u8>, CodecError> {
    encode_as(identity, tokens, data, encoding, None)
}

/// [`encode`] in the shared form (version 2): `root`, the chain root the registry holds for
/// `identity.salt`, takes the salt's place (the salt never leaves the host).
pub fn encode_shared(
    identity: &BlockIdentity,
    root: &BlockHash,
    tokens: &[u32],
    data: &[u8],
    encoding: Encoding,
) -> Result<Vec<u8>, CodecError> {
    encode_as(identity, tokens, data, encoding, Some(root))
}

/// `shared`: the root written in the shared form's place of the salt.
fn encode_as(
    identity: &BlockIdentity,
    tokens: &[u32],
    data: &[u8],
    encoding: Encoding,
    shared: Option<&BlockHash>,
) -> Result<Vec<u8>, CodecError> {
    let layout = identity.layout;
    let raw_len = layout
        .block_bytes()
        .map_err(|e| CodecError::Encode(e.to_string()))?;
    if data.len() != raw_len || tokens.len() != layout.block_tokens {
        return Err(CodecError::Encode(format!(
            "{} bytes and {} tokens for a layout of {raw_len} bytes and {} tokens",
            data.len(),
            tokens.len(),
            layout.block_tokens
        )));
    }
    let mut encoding = encoding;
    let lossy_ok = layout.elem == KvElem::F16 && (raw_len / 2).is_multiple_of(32);
    if encoding.is_lossy() && !lossy_ok {
        encoding = Encoding::Lz4;
    }
    // Raw blocks are copied once, straight into the value.
    let payload: std::borrow::Cow<'_, [u8]> = match (encoding, encoding.quant_type()) {
        (_, Some(ty)) => quantize_f16(data, ty)?.into(),
        (Encoding::Lz4, None) => match lz4_if_worth(data) {
            Some(c) => c.into(),
            None => {
                encoding = Encoding::Raw;
                data.into()
            }
        },
        _ => data.into(),
    };
    let mut out = Vec::with_capacity(HEADER_BYTES + 4 * tokens.len() + payload.len());
    out.extend_from_slice(&MAGIC);
    let version = if shared.is_some() {
        FORMAT_VERSION_SHARED
    } else {
        FORMAT_VERSION
    };
    out.extend_from_slice(&version.to_le_bytes());
    out.push(elem_code(layout.elem));
    out.push(encoding as u8);
    for v in [layout.n_layer, layout.kv_dim, layout.block_tokens] {
        let v = u32::try_from(v).map_err(|_| CodecError::Encode(format!("{v} exceeds u32")))?;
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&identity.model.0);
    match shared {
        Some(root) => out.extend_from_slice(&root.0),
        None => out.extend_from_slice(&identity.salt.0),
    }
    out.extend_from_slice(&identity.hash.0);
    out.extend_from_slice(&(raw_len as u64).to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&[0; 32]);
    for t in tokens {
        out.extend_from_slice(&t.to_le_bytes());
    }
    out.extend_from_slice(&payload);
    let sum = checksum_of(&out);
    out[CHECKSUM_AT..HEADER_BYTES].copy_from_slice(&sum);
    Ok(out)
}

/// Verifies `bytes` against `expect` and decodes the block into `out` (exactly one block of
/// `expect.layout`). Returns the encoding it was stored with (lossy or not).
pub fn decode_into(
    bytes: &[u8],
    expect: &Expect<'_>,
    out: &mut [u8],
) -> Result<Encoding, CodecError> {
    let h = check(bytes, expect, out.len())?;
    h.decode(out)?;
    Ok(h.encoding)
}

/// Verifies `bytes` (checksum, then the identity [`decode_into`] requires: model, K/V type,
/// layout, hash, namespace root, tokens) for a block of `raw_len` bytes, without decoding the
/// payload; a raw payload can then be used in place ([`Header::payload_offset`]).
pub fn check<'a>(
    bytes: &'a [u8],
    expect: &Expect<'_>,
    raw_len: usize,
) -> Result<Header<'a>, CodecError> {
    let h = verify(bytes)?;
    let id = &h.identity;
    if id.model != expect.model {
        return Err(CodecError::Foreign("model fingerprint"));
    }
    if id.layout.elem != expect.layout.elem {
        return Err(CodecError::Foreign("K/V element type"));
    }
    if id.layout != expect.layout {
        return Err(CodecError::Foreign("layout"));
    }
    if id.hash != expect.hash {
        return Err(CodecError::Foreign("block hash"));
    }
    if let Some(root) = expect.root {
        // A shared-form value carries its root in the salt's place.
        let ours = if h.shared {
            BlockHash(id.salt.0) == root
        } else {
            expect.salt == Some(id.salt)
        };
        if !ours {
            return Err(CodecError::Foreign("namespace salt"));
        }
    }
    if let Some(t) = expect.tokens
        && !h.tokens().eq(t.iter().copied())
    {
        return Err(CodecError::Foreign("token ids"));
    }
    if raw_len as u64 != h.raw_len {
        return Err(CodecError::LengthMismatch {
            field: "output buffer",
            declared: h.raw_len,
            actual: raw_len as u64,
        });
    }
    if h.encoding == Encoding::Raw && h.payload.len() as u64 != h.raw_len {
        return Err(CodecError::LengthMismatch {
            field: "raw payload",
            declared: h.raw_len,
            actual: h.payload.len() as u64,
        });
    }
    Ok(h)
}

#[cfg(test)]
#[path = "codec_tests.rs"]
mod tests;
