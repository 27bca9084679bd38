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

const WORDS: &[&str] = &[
    "the", "river", "mountain", "quiet", "bright", "garden", "story", "light", "morning", "city",
    "window", "paper", "friend", "ocean", "green", "music", "forest", "simple", "answer", "stone",
    "winter", "market", "little", "road", "cloud", "honest", "table", "summer", "voice", "north",
];

/// Deterministic text of `n` tokens as a completion prompt is tokenized (BOS per metadata,
/// special tokens parsed), or the closest count below when no word count hits `n` exactly:
/// `Text {seed}:` then words drawn from `seed`, so texts of distinct seeds differ from their
/// first block on.
pub fn sized_text(tok: &memoria_model::tokenizer::Tokenizer, n: usize, seed: u64) -> String {
    let words = |k: usize| -> String {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut out = format!("Text {seed}:");
        for _ in 0..k {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            out.push(' ');
            out.push_str(WORDS[(x % WORDS.len() as u64) as usize]);
        }
        out
    };
    let count = |k: usize| tok.encode(&words(k), true, true).len();
    // The token count grows with the word count: the most words that stay within `n`.
    let (mut lo, mut hi) = (0usize, n.max(1));
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if count(mid) <= n {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    words(lo)
}
