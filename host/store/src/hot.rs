//! Saved hot prefixes: the chains `[cache] auto_pin` kept pinned, written so a restarted host
//! re-warms and pins them again before serving. A namespace is named by its configured name,
//! never its salt (the salt never leaves the host); the model fingerprint, K/V element type and
//! block size say which engine the chains are for. One record holds every chain.
//!
//! ```text
//! offset  size  field
//!      0     8  magic "MEMKVHOT"
//!      8     2  format version (1)
//!     10     1  K/V element code (as the block codec)
//!     11     1  zero
//!     12     4  block_tokens
//!     16    32  model fingerprint
//!     48     4  n_entries (at most MAX_HOT_ENTRIES)
//!     52     *  entries, each:
//!                 2  name length (1..=MAX_HOT_NAME), then the UTF-8 name
//!                 8  decayed count (f64 bits; finite, not negative)
//!                 4  n_tokens (1..=MAX_HOT_TOKENS, a whole number of blocks)
//!              4*nt  token ids
//!      *    32  BLAKE3 of every byte before it
//! ```

use memoria_kv::{KvElem, MAX_BLOCK_TOKENS, ModelFingerprint};

use crate::codec::{elem_code, elem_from_code};

const MAGIC: [u8; 8] = *b"MEMKVHOT";
const VERSION: u16 = 1;
const FIXED: usize = 52;
/// Most chains a record holds (`[cache] auto_pin` keeps at most 64).
pub const MAX_HOT_ENTRIES: usize = 64;
/// Longest chain a record holds, in tokens.
pub const MAX_HOT_TOKENS: usize = 1 << 16;
/// Longest namespace name a record holds, in bytes.
pub const MAX_HOT_NAME: usize = 1024;
/// Largest record (every cap at once, plus framing).
pub const MAX_HOT_BYTES: usize =
    FIXED + MAX_HOT_ENTRIES * (2 + MAX_HOT_NAME + 8 + 4 + 4 * MAX_HOT_TOKENS) + 32;

/// One saved chain.
#[derive(Clone, Debug, PartialEq)]
pub struct HotEntry {
    /// The namespace's configured name.
    pub namespace: String,
    /// The chain's tokens, root first (a whole number of blocks).
    pub tokens: Vec<u32>,
    /// Its decayed reuse count.
    pub count: f64,
}

/// The saved hot prefixes of one engine.
#[derive(Clone, Debug, PartialEq)]
pub struct HotRecord {
    pub model: ModelFingerprint,
    pub elem: KvElem,
    pub block_tokens: usize,
    pub entries: Vec<HotEntry>,
}

/// Why a saved record (hot prefixes, or the routing keys of [`crate::routes`]) was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HotError {
    #[error("record truncated or too long ({0} bytes)")]
    Length(usize),
    #[error("not a record of this kind (bad magic)")]
    BadMagic,
    #[error("record version {0}, this build reads {VERSION}")]
    Version(u16),
    #[error("record field {0} is out of range")]
    Field(&'static str),
    #[error("record checksum mismatch")]
    Checksum,
}

/// Whether an entry fits the caps and the block size.
fn check_entry(e: &HotEntry, block_tokens: usize) -> Result<(), HotError> {
    if e.namespace.is_empty() || e.namespace.len() > MAX_HOT_NAME {
        return Err(HotError::Field("namespace name"));
    }
    if !e.count.is_finite() || e.count < 0.0 {
        return Err(HotError::Field("count"));
    }
    let n = e.tokens.len();
    if n == 0 || n > MAX_HOT_TOKENS || !n.is_multiple_of(block_tokens) {
        return Err(HotError::Field("token count"));
    }
    Ok(())
}

impl HotRecord {
    /// The record's bytes; refuses a record past the caps.
    pub fn encode(&self) -> Result<Vec<u8>, HotError> {
        let head = Head {
            elem: self.elem,
            block_tokens: self.block_tokens,
            model: self.model,
            entries: self.entries.len(),
        };
        let mut out = Vec::with_capacity(FIXED + 32);
        head.write(&mut out, &MAGIC, MAX_HOT_ENTRIES)?;
        for e in &self.entries {
            check_entry(e, self.block_tokens)?;
            out.extend_from_slice(&(e.namespace.len() as u16).to_le_bytes());
            out.extend_from_slice(e.namespace.as_bytes());
            out.extend_from_slice(&e.count.to_bits().to_le_bytes());
            out.extend_from_slice(&(e.tokens.len() as u32).to_le_bytes());
            for t in &e.tokens {
                out.extend_from_slice(&t.to_le_bytes());
            }
        }
        seal(&mut out);
        Ok(out)
    }

    /// Parses and verifies a record (size cap and checksum first, then every field).
    pub fn decode(b: &[u8]) -> Result<HotRecord, HotError> {
        let mut r = Reader::open(b, &MAGIC, FIXED, MAX_HOT_BYTES)?;
        let Head {
            elem,
            block_tokens,
            model,
            entries: n,
        } = r.head(MAX_HOT_ENTRIES)?;
        let mut entries = Vec::with_capacity(n);
        for _ in 0..n {
            let len = r.u16()? as usize;
            if len == 0 || len > MAX_HOT_NAME {
                return Err(HotError::Field("namespace name"));
            }
            let namespace = std::str::from_utf8(r.take(len)?)
                .map_err(|_| HotError::Field("namespace name"))?
                .to_string();
            let count = f64::from_bits(u64::from_le_bytes(r.array()?));
            let nt = r.u32()? as usize;
            if nt == 0 || nt > MAX_HOT_TOKENS {
                return Err(HotError::Field("token count"));
            }
            let tokens = r
                .take(4 * nt)?
                .as_chunks::<4>()
                .0
                .iter()
                .map(|c| u32::from_le_bytes(*c))
                .collect();
            let e = HotEntry {
                namespace,
                tokens,
                count,
            };
            check_entry(&e, block_tokens)?;
            entries.push(e);
        }
        r.finish()?;
        Ok(HotRecord {
            model,
            elem,
            block_tokens,
            entries,
        })
    }
}

/// Checked reads over a record's body (`b`: the bytes before the checksum).
pub(crate) struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

/// What a host record says after its version: the engine it is for and its entry count
/// (bytes 10..52: element code, a zero, block_tokens, model fingerprint, n_entries).
pub(crate) struct Head {
    pub elem: KvElem,
    pub block_tokens: usize,
    pub model: ModelFingerprint,
    pub entries: usize,
}

impl Head {
    /// Starts a record: magic, version and this head; refuses a block size or entry count
    /// out of range.
    pub fn write(
        &self,
        out: &mut Vec<u8>,
        magic: &[u8; 8],
        max_entries: usize,
    ) -> Result<(), HotError> {
        if self.block_tokens == 0 || self.block_tokens > MAX_BLOCK_TOKENS {
            return Err(HotError::Field("block_tokens"));
        }
        if self.entries > max_entries {
            return Err(HotError::Field("entry count"));
        }
        out.extend_from_slice(magic);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.push(elem_code(self.elem));
        out.push(0);
        out.extend_from_slice(&(self.block_tokens as u32).to_le_bytes());
        out.extend_from_slice(&self.model.0);
        out.extend_from_slice(&(self.entries as u32).to_le_bytes());
        Ok(())
    }
}

/// Ends a record: the BLAKE3 of every byte before it.
pub(crate) fn seal(out: &mut Vec<u8>) {
    let sum = *blake3::hash(out).as_bytes();
    out.extend_from_slice(&sum);
}

impl<'a> Reader<'a> {
    /// Checks a whole record's size (`fixed` header bytes at least, `max` at most), magic,
    /// version and checksum; reads on after the version.
    pub fn open(b: &'a [u8], magic: &[u8; 8], fixed: usize, max: usize) -> Result<Self, HotError> {
        if b.len() < fixed + 32 || b.len() > max {
            return Err(HotError::Length(b.len()));
        }
        if b[..8] != magic[..] {
            return Err(HotError::BadMagic);
        }
        let version = u16::from_le_bytes([b[8], b[9]]);
        if version != VERSION {
            return Err(HotError::Version(version));
        }
        let body = b.len() - 32;
        if blake3::hash(&b[..body]).as_bytes()[..] != b[body..] {
            return Err(HotError::Checksum);
        }
        Ok(Reader {
            b: &b[..body],
            at: 10,
        })
    }

    /// Reads the [`Head`] (right after [`Reader::open`]), checking every field.
    pub fn head(&mut self, max_entries: usize) -> Result<Head, HotError> {
        let elem = elem_from_code(self.u8()?).ok_or(HotError::Field("element type"))?;
        self.u8()?;
        let block_tokens = self.u32()? as usize;
        if block_tokens == 0 || block_tokens > MAX_BLOCK_TOKENS {
            return Err(HotError::Field("block_tokens"));
        }
        let model = ModelFingerprint(self.array()?);
        let entries = self.u32()? as usize;
        if entries > max_entries {
            return Err(HotError::Field("entry count"));
        }
        Ok(Head {
            elem,
            block_tokens,
            model,
            entries,
        })
    }

    /// Bytes left before the checksum.
    pub fn remaining(&self) -> usize {
        self.b.len() - self.at
    }

    /// Refuses bytes left over after the last field.
    pub fn finish(&self) -> Result<(), HotError> {
        if self.remaining() == 0 {
            Ok(())
        } else {
            Err(HotError::Length(self.b.len() + 32))
        }
    }

    pub fn take(&mut self, n: usize) -> Result<&'a [u8], HotError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.b.len())
            .ok_or(HotError::Length(self.b.len() + 32))?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }

    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], HotError> {
        let mut x = [0; N];
        x.copy_from_slice(self.take(N)?);
        Ok(x)
    }

    pub fn u8(&mut self) -> Result<u8, HotError> {
        Ok(self.array::<1>()?[0])
    }

    pub fn u16(&mut self) -> Result<u16, HotError> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    pub fn u32(&mut self) -> Result<u32, HotError> {
        Ok(u32::from_le_bytes(self.array()?))
    }
}

#[cfg(test)]
#[path = "hot_tests.rs"]
mod tests;
