//! Partial tails on the disk tier: a retained tail (a finished sequence's unfilled last block)
//! is kept under its parent's tail key ([`BlockHash::tail_key`]), one per parent, the latest
//! replacing the one before, so a restarted host reuses it as the hot pool does. The value is
//! an ordinary codec block (version 1, the namespace's salt, the tail key as its hash) whose
//! token ids past the filled slots are [`PAD`] and whose unfilled slots' bytes are zero: the
//! filled count is the run of ids before the first pad, covered by the checksum. A read is
//! verified as a block's (checksum, model, layout, namespace root, key), then its padding,
//! then that it continues the prompt; a value that fails is removed and counted, a tail of
//! another continuation is a plain miss. Tails go to disk only, never to the cold or remote
//! tiers.

use memoria_kv::backing::PartialBlock;
use memoria_kv::staging::{TailMiss, WantedTail};
use memoria_kv::{BlockHash, KvLayout, LostTier, ModelFingerprint, NamespaceSalt};

use super::TierStack;
use crate::codec::{self, BlockIdentity, CodecError, Expect};
use crate::stats::TierStats;
use crate::tier::Tier;

/// The token id of a tail's unfilled slots (no vocabulary reaches it).
pub const PAD: u32 = u32::MAX;

/// Why a stored tail was not used.
enum Bad {
    Codec(CodecError),
    Differs,
}

impl From<CodecError> for Bad {
    fn from(e: CodecError) -> Bad {
        Bad::Codec(e)
    }
}

/// Zeroes the bytes of slots `filled..` in a block image of `layout` (`[layer][K|V][slot][row]`).
fn zero_unfilled(layout: &KvLayout, filled: usize, data: &mut [u8]) {
    let b = layout.block_tokens;
    let Ok(row) = layout.row_bytes() else { return };
    for part in data.chunks_exact_mut(b * row) {
        part[filled * row..].fill(0);
    }
}

/// Verifies a stored tail against `expect` (a block's checks, its padding) and that it begins
/// with `want`'s first token, then decodes it into `out`; returns its filled slots' tokens.
fn read(bytes: &[u8], expect: &Expect<'_>, want: &[u32], out: &mut [u8]) -> Result<Vec<u32>, Bad> {
    let h = codec::check(bytes, expect, out.len())?;
    let mut tokens: Vec<u32> = h.tokens().collect();
    let b = tokens.len();
    let filled = tokens.iter().position(|&t| t == PAD).unwrap_or(b);
    if filled == 0 || filled == b || tokens[filled..].iter().any(|&t| t != PAD) {
        return Err(Bad::Codec(CodecError::OutOfRange {
            field: "a tail's filled slots",
            value: filled as u64,
            limit: format!("1..{b}, then padding"),
        }));
    }
    tokens.truncate(filled);
    if want.first() != tokens.first() {
        return Err(Bad::Differs);
    }
    h.decode(out)?;
    Ok(tokens)
}

impl TierStack {
    /// Queues a retained partial tail of a namespace of `salt` for disk, under its parent's
    /// tail key (replacing the one there). Without a disk tier it is dropped.
    pub fn persist_tail(
        &self,
        model: ModelFingerprint,
        layout: KvLayout,
        salt: NamespaceSalt,
        tail: PartialBlock,
    ) -> bool {
        let Some(d) = &self.disk else { return false };
        let b = layout.block_tokens;
        let filled = tail.tokens.len();
        let bytes_ok = layout.block_bytes().is_ok_and(|n| n == tail.data.len());
        if filled == 0 || filled >= b || !bytes_ok || tail.tokens.contains(&PAD) {
            return false;
        }
        let mut tokens = tail.tokens;
        tokens.resize(b, PAD);
        let mut data = tail.data;
        zero_unfilled(&layout, filled, &mut data);
        let identity = BlockIdentity {
            model,
            layout,
            salt,
            hash: BlockHash::tail_key(&tail.parent),
        };
        d.put_tail(identity, tokens, data)
    }

    /// Reads the tail kept under `want.parent` for a context of `model`, `layout` and chain
    /// root `root` into `out` (one block) and returns its filled slots' tokens, or why not.
    pub(crate) fn stage_tail(
        &self,
        model: ModelFingerprint,
        layout: KvLayout,
        root: BlockHash,
        want: &WantedTail,
        out: &mut [u8],
    ) -> Result<Vec<u32>, TailMiss> {
        let Some(d) = &self.disk else {
            return Err(TailMiss::Absent);
        };
        let key = BlockHash::tail_key(&want.parent);
        if !d.on_disk(&key) {
            return Err(TailMiss::Absent);
        }
        let expect = Expect {
            model,
            layout,
            hash: key,
            root: Some(root),
            salt: self.salt_of_root(model, &layout, &root),
            tokens: None,
        };
        let mut got = None;
        d.get_with(&key, &mut |bytes| {
            got = Some(read(bytes, &expect, &want.tokens, out));
        });
        match got {
            None => Err(TailMiss::Absent),
            Some(Ok(tokens)) => {
                TierStats::add(&d.stats().tail_hits, 1);
                d.touch(&key);
                Ok(tokens)
            }
            Some(Err(Bad::Differs)) => Err(TailMiss::Differs),
            Some(Err(Bad::Codec(e))) => {
                d.remove(&key);
                let corrupt = e.is_corrupt();
                let counter = if corrupt {
                    &d.stats().corrupt_removed
                } else {
                    &d.stats().foreign_removed
                };
                TierStats::add(counter, 1);
                Err(if corrupt {
                    TailMiss::Corrupt(LostTier::Disk)
                } else {
                    TailMiss::Foreign
                })
            }
        }
    }
}

#[cfg(test)]
#[path = "stack_tail_tests.rs"]
mod tests;
