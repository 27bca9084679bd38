//! Deterministic pseudo-random prompts for workload benchmarks: distinct per seed, never the
//! control ids 0..3, the same on every run and machine (xorshift64).

/// `n` token ids in `3..n_vocab` drawn from `seed`.
pub fn pseudo_tokens(seed: u64, n: usize, n_vocab: usize) -> Vec<u32> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let span = (n_vocab as u64).saturating_sub(3).max(1);
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (3 + x % span) as u32
        })
        .collect()
}
