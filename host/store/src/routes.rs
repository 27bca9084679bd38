//! Saved routing keys: for each block the host announced as stored on disk, its pool hash and
//! the routing keys it was served under (`memoria_kv::route_key`), so a restarted host can
//! announce what its disk still holds without waiting for a request to touch it. Host-internal
//! (the pool hashes are salted, like the block table's keys): it never leaves the host. The
//! model fingerprint, K/V element type and block size say which engine the keys are for (a
//! routing key does not name the model, so a record of another model must not be announced).
//!
//! ```text
//! offset  size  field
//!      0     8  magic "MEMROUTE"
//!      8     2  format version (1)
//!     10     1  K/V element code (as the block codec)
//!     11     1  zero
//!     12     4  block_tokens
//!     16    32  model fingerprint
//!     48     4  n_entries (at most MAX_ROUTE_ENTRIES)
//!     52     *  entries, each:
//!                32  the block's pool hash
//!                 1  n_routes (1..=MAX_ROUTES_PER_BLOCK)
//!             32*nr  routing keys
//!      *    32  BLAKE3 of every byte before it
//! ```

use memoria_kv::{BlockHash, KvElem, ModelFingerprint};

use crate::hot::{Head, HotError, Reader, seal};

const MAGIC: [u8; 8] = *b"MEMROUTE";
const FIXED: usize = 52;
/// Most blocks a record holds.
pub const MAX_ROUTE_ENTRIES: usize = 1 << 17;
/// Most routing keys kept per block.
pub const MAX_ROUTES_PER_BLOCK: usize = 8;
/// Largest record.
pub const MAX_ROUTES_BYTES: usize =
    FIXED + MAX_ROUTE_ENTRIES * (32 + 1 + 32 * MAX_ROUTES_PER_BLOCK) + 32;

/// One block and the routing keys it was served under.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteEntry {
    pub block: BlockHash,
    pub routes: Vec<BlockHash>,
}

/// The routing keys of one engine's blocks on disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoutesRecord {
    pub model: ModelFingerprint,
    pub elem: KvElem,
    pub block_tokens: usize,
    pub entries: Vec<RouteEntry>,
}

impl RoutesRecord {
    /// The record's bytes; refuses a record past the caps.
    pub fn encode(&self) -> Result<Vec<u8>, HotError> {
        let head = Head {
            elem: self.elem,
            block_tokens: self.block_tokens,
            model: self.model,
            entries: self.entries.len(),
        };
        let routes: usize = self.entries.iter().map(|e| e.routes.len()).sum();
        let mut out = Vec::with_capacity(FIXED + self.entries.len() * 33 + routes * 32 + 32);
        head.write(&mut out, &MAGIC, MAX_ROUTE_ENTRIES)?;
        for e in &self.entries {
            if e.routes.is_empty() || e.routes.len() > MAX_ROUTES_PER_BLOCK {
                return Err(HotError::Field("route count"));
            }
            out.extend_from_slice(&e.block.0);
            out.push(e.routes.len() as u8);
            for r in &e.routes {
                out.extend_from_slice(&r.0);
            }
        }
        seal(&mut out);
        Ok(out)
    }

    /// Parses and verifies a record (size cap and checksum first, then every field).
    pub fn decode(b: &[u8]) -> Result<RoutesRecord, HotError> {
        let mut r = Reader::open(b, &MAGIC, FIXED, MAX_ROUTES_BYTES)?;
        let Head {
            elem,
            block_tokens,
            model,
            entries: n,
        } = r.head(MAX_ROUTE_ENTRIES)?;
        // Each entry takes at least 65 bytes: a count past what remains is refused before
        // anything is allocated for it.
        if n > r.remaining() / 65 {
            return Err(HotError::Length(b.len()));
        }
        let mut entries = Vec::with_capacity(n);
        for _ in 0..n {
            let block = BlockHash(r.array()?);
            let nr = r.u8()? as usize;
            if nr == 0 || nr > MAX_ROUTES_PER_BLOCK {
                return Err(HotError::Field("route count"));
            }
            let routes = (0..nr)
                .map(|_| r.array().map(BlockHash))
                .collect::<Result<_, _>>()?;
            entries.push(RouteEntry { block, routes });
        }
        r.finish()?;
        Ok(RoutesRecord {
            model,
            elem,
            block_tokens,
            entries,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(b: u8) -> BlockHash {
        BlockHash([b; 32])
    }

    fn record() -> RoutesRecord {
        RoutesRecord {
            model: ModelFingerprint([7; 32]),
            elem: KvElem::F16,
            block_tokens: 16,
            entries: vec![
                RouteEntry {
                    block: h(1),
                    routes: vec![h(2)],
                },
                RouteEntry {
                    block: h(3),
                    routes: vec![h(4), h(5)],
                },
            ],
        }
    }

    #[test]
    fn round_trip() {
        let r = record();
        let b = r.encode().expect("encode");
        assert_eq!(b.len(), FIXED + (33 + 32) + (33 + 64) + 32);
        assert_eq!(RoutesRecord::decode(&b), Ok(r));
        let empty = RoutesRecord {
            entries: Vec::new(),
            ..record()
        };
        assert_eq!(
            RoutesRecord::decode(&empty.encode().expect("encode")),
            Ok(empty)
        );
    }

    #[test]
    fn refuses_damage_truncation_and_bad_counts() {
        let b = record().encode().expect("encode");
        for i in 0..b.len() {
            let mut d = b.clone();
            d[i] ^= 0x40;
            assert!(RoutesRecord::decode(&d).is_err(), "byte {i} flipped");
        }
        for n in 0..b.len() {
            assert!(RoutesRecord::decode(&b[..n]).is_err(), "cut at {n}");
        }
        assert_eq!(
            RoutesRecord::decode(&b"MEMKVHOT"[..]),
            Err(HotError::Length(8))
        );
        let mut r = record();
        r.entries[0].routes = vec![h(9); MAX_ROUTES_PER_BLOCK + 1];
        assert_eq!(r.encode(), Err(HotError::Field("route count")));
        r.entries[0].routes.clear();
        assert_eq!(r.encode(), Err(HotError::Field("route count")));
        // A count that claims more entries than the bytes hold, checksummed.
        let mut lying = record().encode().expect("encode");
        lying.truncate(lying.len() - 32);
        lying[48..52].copy_from_slice(&(MAX_ROUTE_ENTRIES as u32).to_le_bytes());
        seal(&mut lying);
        assert_eq!(
            RoutesRecord::decode(&lying),
            Err(HotError::Length(lying.len()))
        );
    }
}
