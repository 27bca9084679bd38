//! Prompt lookup: a session's own tokens indexed by n-gram, so that the continuation of the
//! latest earlier occurrence of its last `n` tokens (longest `n` first) is the draft. The
//! table is fixed at creation (lossy past it: a slot is overwritten by a newer n-gram, which
//! only loses a draft).

use super::ngram::{MAX_N, MIN_N, hash, slots_for};

/// The n-gram index over one session's tokens.
#[derive(Debug)]
pub struct ContextIndex {
    tokens: Vec<u32>,
    /// `slot -> position + 1` where the indexed n-gram's continuation starts (0: empty).
    table: Vec<u32>,
    mask: usize,
}

impl ContextIndex {
    /// An index for a session of up to `max_tokens` tokens (the context length): its memory is
    /// taken now, about 12 bytes per token.
    pub fn new(max_tokens: usize) -> ContextIndex {
        let max_tokens = max_tokens.min(u32::MAX as usize - 1);
        let slots = slots_for(max_tokens.saturating_mul(MAX_N - MIN_N + 1));
        ContextIndex {
            tokens: Vec::with_capacity(max_tokens),
            table: vec![0; slots],
            mask: slots - 1,
        }
    }

    /// The tokens indexed so far.
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// Appends tokens (the prompt, then each accepted token); past the capacity given at
    /// creation nothing more is indexed.
    pub fn extend(&mut self, tokens: &[u32]) {
        for &t in tokens {
            if self.tokens.len() == self.tokens.capacity() {
                return;
            }
            self.tokens.push(t);
            // The n-grams that end just before the new token now have a continuation: it.
            let at = self.tokens.len() - 1;
            for n in MIN_N..=MAX_N {
                if at >= n {
                    let slot = hash(&self.tokens[at - n..at]) as usize & self.mask;
                    self.table[slot] = at as u32 + 1;
                }
            }
        }
    }

    /// Drops the tokens past `len` (a rejected draft, a truncated session). Their n-grams stay
    /// in the table until overwritten; [`Self::draft`] verifies every match.
    pub fn truncate(&mut self, len: usize) {
        self.tokens.truncate(len);
    }

    /// Writes into `out` (cleared first) up to `max` tokens that followed the latest earlier
    /// occurrence of the session's last `n` tokens, for the longest `n` in `MIN_N..=MAX_N`
    /// that has one. Returns the `n` matched (0: no draft).
    pub fn draft(&self, max: usize, out: &mut Vec<u32>) -> usize {
        out.clear();
        let len = self.tokens.len();
        for n in (MIN_N..=MAX_N).rev() {
            if len <= n || max == 0 {
                continue;
            }
            let suffix = &self.tokens[len - n..];
            let at = self.table[hash(suffix) as usize & self.mask] as usize;
            // `at - 1` is where a continuation starts; the n-gram before it must be the suffix,
            // and an earlier one (the suffix itself has no continuation yet).
            let Some(start) = at.checked_sub(1) else {
                continue;
            };
            if start < n || start >= len || self.tokens[start - n..start] != *suffix {
                continue;
            }
            let end = (start + max).min(len);
            out.extend_from_slice(&self.tokens[start..end]);
            return n;
        }
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The continuation of the latest earlier occurrence of the last `n` tokens, by brute force.
    fn reference(tokens: &[u32], n: usize, max: usize) -> Option<Vec<u32>> {
        let len = tokens.len();
        if len <= n || max == 0 {
            return None;
        }
        let suffix = &tokens[len - n..];
        (n..len)
            .rev()
            .find(|&s| &tokens[s - n..s] == suffix)
            .map(|s| tokens[s..(s + max).min(len)].to_vec())
    }

    #[test]
    fn a_repeated_phrase_drafts_its_earlier_continuation() {
        let mut ix = ContextIndex::new(64);
        // "a b c d e f ... a b c" -> draft "d e f".
        ix.extend(&[1, 2, 3, 4, 5, 6, 9, 9, 1, 2, 3]);
        let mut out = Vec::new();
        assert_eq!(ix.draft(3, &mut out), 3);
        assert_eq!(out, [4, 5, 6]);
        // Nothing repeats: no draft.
        let mut fresh = ContextIndex::new(64);
        fresh.extend(&[1, 2, 3, 4, 5]);
        assert_eq!(fresh.draft(4, &mut out), 0);
        assert!(out.is_empty());
        // After a truncation the dropped tokens are never drafted.
        ix.truncate(4);
        ix.extend(&[7, 1, 2, 3]);
        assert_eq!(ix.draft(8, &mut out), 3);
        assert_eq!(out, [4, 7, 1, 2, 3]);
    }

    #[test]
    fn past_its_capacity_the_index_stops_growing() {
        let mut ix = ContextIndex::new(5);
        ix.extend(&[1, 2, 3, 1, 2, 3, 1, 2]);
        assert_eq!(ix.tokens(), [1, 2, 3, 1, 2]);
        let mut out = Vec::new();
        assert_eq!(ix.draft(2, &mut out), 2);
        assert_eq!(out, [3, 1]);
    }

    proptest! {
        /// The draft is the brute-force one for the `n` it matched, and no longer `n` had a
        /// match (the table is lossy only under slot collisions, which lose a draft, never
        /// invent one); a small alphabet makes repeats common.
        #[test]
        fn drafts_equal_the_brute_force_search(
            tokens in proptest::collection::vec(0u32..4, 0..80),
            max in 0usize..6,
        ) {
            let mut ix = ContextIndex::new(4096);
            let mut out = Vec::new();
            let mut matched = 0;
            for i in 0..tokens.len() {
                ix.extend(&tokens[i..=i]);
                let seen = &tokens[..=i];
                let n = ix.draft(max, &mut out);
                if n == 0 {
                    prop_assert!(out.is_empty());
                } else {
                    matched += 1;
                    prop_assert_eq!(Some(out.clone()), reference(seen, n, max));
                }
            }
            // Repeats over four symbols: most positions past the first few draft something.
            if max > 0 && tokens.len() > 40 {
                prop_assert!(matched > 0);
            }
        }
    }
}
