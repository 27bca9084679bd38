//! How a [`crate::TierStack`] is built: the cold RAM tier's budget and (opt-in) lossy mode, and
//! the redb tier's options. Plain data with defaults; `memoria run/serve --store DIR` use
//! [`StoreOptions::default`].

use crate::codec::Encoding;
use crate::disk::DiskOptions;

/// Lossy storage of f16 blocks in the cold RAM tier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lossy {
    /// 8-bit blocks of 32 (about 1.9x smaller than f16).
    Q8_0,
    /// 4-bit blocks of 32 (about 3.6x smaller than f16).
    Q4_0,
}

impl Lossy {
    /// The codec encoding for this mode.
    pub fn encoding(self) -> Encoding {
        match self {
            Lossy::Q8_0 => Encoding::Q8_0,
            Lossy::Q4_0 => Encoding::Q4_0,
        }
    }

    /// Parses `q8_0` or `q4_0`.
    pub fn parse(s: &str) -> Option<Lossy> {
        match s.to_ascii_lowercase().as_str() {
            "q8_0" => Some(Lossy::Q8_0),
            "q4_0" => Some(Lossy::Q4_0),
            _ => None,
        }
    }
}

/// Sizes and modes of the tiers below the hot pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreOptions {
    /// Encoded bytes the cold RAM tier may hold; 0 disables the tier.
    pub cold_budget_bytes: usize,
    /// Store f16 blocks in the cold tier as q8_0/q4_0 (hits are then counted as lossy).
    pub cold_lossy: Option<Lossy>,
    /// The redb tier (used when the stack is opened on a directory).
    pub disk: DiskOptions,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            cold_budget_bytes: 256 << 20,
            cold_lossy: None,
            disk: DiskOptions::default(),
        }
    }
}
