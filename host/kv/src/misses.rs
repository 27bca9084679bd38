//! Why a prompt block missed: every block of a prompt that `match_prefix` did not find is
//! counted under exactly one [`MissReason`] (in blocks and in tokens), and a block lost to
//! eviction also under the tier where it was lost ([`LostTier`]). The sum over reasons equals
//! `miss_blocks`. Classification order, first match wins: `partial` (the block holding the
//! prompt's last token or an unfilled tail: always computed, its logits are needed), `corrupt`
//! (a lower tier held it but it failed verification), `expired` / `evicted` (the ghost table
//! remembers it being evicted), `isolated` (the same tokens are resident under another
//! namespace's salt), `cold` (none of these: never computed, or forgotten by the bounded ghost
//! table).

use std::sync::atomic::{AtomicU64, Ordering};

/// One reason a prompt block was not found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MissReason {
    /// Never computed (or no longer remembered as evicted).
    Cold,
    /// Was cached, evicted for capacity, quota or by the operator.
    Evicted,
    /// Inside the prompt's last block: always computed.
    Partial,
    /// Its timed pin ran out and it was evicted.
    Expired,
    /// A lower tier held it but it failed verification.
    Corrupt,
    /// The same tokens are cached under another namespace's salt.
    Isolated,
}

impl MissReason {
    /// Every reason, in report order.
    pub const ALL: [MissReason; 6] = [
        MissReason::Cold,
        MissReason::Evicted,
        MissReason::Partial,
        MissReason::Expired,
        MissReason::Corrupt,
        MissReason::Isolated,
    ];

    /// The label used in `/stats` and `/metrics`.
    pub fn name(self) -> &'static str {
        match self {
            MissReason::Cold => "cold",
            MissReason::Evicted => "evicted",
            MissReason::Partial => "partial",
            MissReason::Expired => "expired",
            MissReason::Corrupt => "corrupt",
            MissReason::Isolated => "isolated",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The tier where an evicted (or corrupt) block was lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LostTier {
    /// The in-RAM block pool (no lower tier kept it).
    Hot,
    /// The compressed cold RAM tier.
    Cold,
    /// The redb store on disk.
    Disk,
    /// The shared remote tier.
    Remote,
}

impl LostTier {
    /// Every tier, in report order.
    pub const ALL: [LostTier; 4] = [
        LostTier::Hot,
        LostTier::Cold,
        LostTier::Disk,
        LostTier::Remote,
    ];

    /// The label used in `/stats` and `/metrics`.
    pub fn name(self) -> &'static str {
        match self {
            LostTier::Hot => "hot",
            LostTier::Cold => "cold",
            LostTier::Disk => "disk",
            LostTier::Remote => "remote",
        }
    }

    pub(crate) fn from_bits(b: u8) -> LostTier {
        match b & 3 {
            0 => LostTier::Hot,
            1 => LostTier::Cold,
            2 => LostTier::Disk,
            _ => LostTier::Remote,
        }
    }

    pub(crate) fn bits(self) -> u8 {
        self as u8
    }
}

/// Miss counters of the pool or one namespace.
#[derive(Debug, Default)]
pub struct MissCounters {
    blocks: [AtomicU64; 6],
    tokens: [AtomicU64; 6],
    evicted_at: [AtomicU64; 4],
}

/// Plain copy of [`MissCounters`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MissSnapshot {
    /// Blocks per reason, indexed like [`MissReason::ALL`].
    pub blocks: [u64; 6],
    /// Tokens per reason, indexed like [`MissReason::ALL`].
    pub tokens: [u64; 6],
    /// `evicted` (and `expired`) blocks by the tier where they were lost, like [`LostTier::ALL`].
    pub evicted_at: [u64; 4],
}

impl MissCounters {
    /// Adds one look-up's counts: blocks and tokens per reason, evicted blocks per tier.
    pub(crate) fn add_all(&self, blocks: &[u64; 6], tokens: &[u64; 6], lost_at: &[u64; 4]) {
        let add = |a: &[AtomicU64], v: &[u64]| {
            for (a, &v) in a.iter().zip(v) {
                if v > 0 {
                    a.fetch_add(v, Ordering::Relaxed);
                }
            }
        };
        add(&self.blocks, blocks);
        add(&self.tokens, tokens);
        add(&self.evicted_at, lost_at);
    }

    /// A plain copy.
    pub fn snapshot(&self) -> MissSnapshot {
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        MissSnapshot {
            blocks: self.blocks.each_ref().map(r),
            tokens: self.tokens.each_ref().map(r),
            evicted_at: self.evicted_at.each_ref().map(r),
        }
    }
}

impl MissSnapshot {
    /// Blocks missed for `reason`.
    pub fn blocks_for(&self, reason: MissReason) -> u64 {
        self.blocks[reason.index()]
    }

    /// Tokens missed for `reason`.
    pub fn tokens_for(&self, reason: MissReason) -> u64 {
        self.tokens[reason.index()]
    }

    /// Evicted or expired blocks lost at `tier`.
    pub fn evicted_at(&self, tier: LostTier) -> u64 {
        self.evicted_at[tier as usize]
    }

    /// Blocks missed for every reason (equals the pool's `miss_blocks`).
    pub fn total_blocks(&self) -> u64 {
        self.blocks.iter().sum()
    }
}
