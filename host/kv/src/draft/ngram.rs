//! The n-gram keys the draft tables share: which lengths are matched and how a run of tokens is
//! hashed into a slot.

/// The shortest run of tokens a draft is matched on.
pub const MIN_N: usize = 2;
/// The longest run of tokens a draft is matched on (longer matches are tried first).
pub const MAX_N: usize = 4;

/// A 64-bit hash of `n` and the tokens (FxHash-style multiply-rotate: cheap, and collisions
/// only cost a verification that the tokens match).
pub(crate) fn hash(tokens: &[u32]) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let mut h = (tokens.len() as u64).wrapping_mul(K);
    for &t in tokens {
        h = (h.rotate_left(5) ^ u64::from(t)).wrapping_mul(K);
    }
    h ^ (h >> 29)
}

/// The number of slots for `capacity` entries: a power of two at least twice as many, so the
/// table stays at most half full.
pub(crate) fn slots_for(capacity: usize) -> usize {
    capacity.saturating_mul(2).max(16).next_power_of_two()
}

/// The draft group of chains under `root`: sessions share drafts exactly where they share
/// cached blocks (the same chain root, so the same salt), never across isolated namespaces.
/// Never 0 (which marks "no group").
pub fn group_key(root: &crate::hash::BlockHash) -> u64 {
    let mut key = [0u8; 8];
    key.copy_from_slice(&root.0[..8]);
    u64::from_le_bytes(key).max(1)
}
