//! Prompt lookup: a session's own tokens indexed by n-gram, so that the continuation of an
//! earlier occurrence of its last `n` tokens (longest `n` first) is the draft. Runs of the
//! longest `n` keep a chain of their earlier occurrences, and the one whose preceding tokens
//! agree longest with the session's is drafted (the latest among equals): in code or JSON the
//! same few tokens recur in many places, and the longer context tells which place the text is
//! copying. Shorter runs draft their latest occurrence. The tables are fixed at creation (lossy
//! past them: a slot is overwritten by a newer n-gram, which only loses a draft).

use super::ngram::{MAX_N, MIN_N, hash, slots_for};

/// Earlier occurrences of a longest-`n` run compared, at most.
pub const CHAIN: usize = 16;
/// Chain links followed at most (occurrences of other runs in the same slot included).
const CHAIN_STEPS: usize = 64;
/// Preceding tokens compared, at most, when occurrences are weighed.
pub const CONTEXT_MATCH: usize = 32;

/// The n-gram index over one session's tokens.
#[derive(Debug)]
pub struct ContextIndex {
    tokens: Vec<u32>,
    /// Runs of `MIN_N..MAX_N` tokens: `slot -> position + 1` where the run's latest
    /// continuation starts (0: empty).
    table: Vec<u32>,
    mask: usize,
    /// Runs of `MAX_N` tokens: `slot -> position + 1` of the latest continuation.
    long: Vec<u32>,
    long_mask: usize,
    /// `prev[p]`: what `long` held for the slot of the run ending before position `p` when
    /// `p` was indexed (the slot's previous continuation + 1; 0: none): the chain of earlier
    /// occurrences.
    prev: Vec<u32>,
}

impl ContextIndex {
    /// An index for a session of up to `max_tokens` tokens (the context length): its memory is
    /// taken now, about 36 bytes per token.
    pub fn new(max_tokens: usize) -> ContextIndex {
        let max_tokens = max_tokens.min(u32::MAX as usize - 1);
        let slots = slots_for(max_tokens.saturating_mul(MAX_N - MIN_N));
        let long_slots = slots_for(max_tokens);
        ContextIndex {
            tokens: Vec::with_capacity(max_tokens),
            table: vec![0; slots],
            mask: slots - 1,
            long: vec![0; long_slots],
            long_mask: long_slots - 1,
            prev: Vec::with_capacity(max_tokens),
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
            for n in MIN_N..MAX_N {
                if at >= n {
                    let slot = hash(&self.tokens[at - n..at]) as usize & self.mask;
                    self.table[slot] = at as u32 + 1;
                }
            }
            let mut link = 0;
            if at >= MAX_N {
                let slot = hash(&self.tokens[at - MAX_N..at]) as usize & self.long_mask;
                link = std::mem::replace(&mut self.long[slot], at as u32 + 1);
            }
            self.prev.push(link);
        }
    }

    /// Drops the tokens past `len` (a rejected draft, a truncated session). Their n-grams stay
    /// in the tables until overwritten; [`Self::draft`] verifies every match.
    pub fn truncate(&mut self, len: usize) {
        self.tokens.truncate(len);
        self.prev.truncate(len);
    }

    /// Writes into `out` (cleared first) up to `max` tokens that followed an earlier
    /// occurrence of the session's last `n` tokens, for the longest `n` in `MIN_N..=MAX_N`
    /// that has one: for `MAX_N`, of the latest [`CHAIN`] occurrences the one whose preceding
    /// tokens agree longest with the session's (up to [`CONTEXT_MATCH`]; the latest among
    /// equals), for shorter `n` the latest. Returns the `n` matched (0: no draft).
    pub fn draft(&self, max: usize, out: &mut Vec<u32>) -> usize {
        out.clear();
        let len = self.tokens.len();
        if max == 0 {
            return 0;
        }
        if let Some(start) = self.best_long(len) {
            out.extend_from_slice(&self.tokens[start..(start + max).min(len)]);
            return MAX_N;
        }
        for n in (MIN_N..MAX_N).rev() {
            if len <= n {
                continue;
            }
            let suffix = &self.tokens[len - n..];
            let at = self.table[hash(suffix) as usize & self.mask] as usize;
            if let Some(start) = self.continues(at, n, len) {
                out.extend_from_slice(&self.tokens[start..(start + max).min(len)]);
                return n;
            }
        }
        0
    }

    /// Where the continuation stored as `at` (position + 1) starts, if it is an earlier
    /// occurrence of the session's last `n` tokens (the slot may hold another run, or a run
    /// since truncated away; the suffix itself has no continuation yet).
    fn continues(&self, at: usize, n: usize, len: usize) -> Option<usize> {
        let start = at.checked_sub(1)?;
        (start >= n && start < len && self.tokens[start - n..start] == self.tokens[len - n..])
            .then_some(start)
    }

    /// The continuation of the longest-`MAX_N` occurrence chosen by [`Self::draft`], if any.
    fn best_long(&self, len: usize) -> Option<usize> {
        if len <= MAX_N {
            return None;
        }
        let mut at =
            self.long[hash(&self.tokens[len - MAX_N..]) as usize & self.long_mask] as usize;
        let mut best: Option<(usize, usize)> = None;
        let mut found = 0;
        for _ in 0..CHAIN_STEPS {
            let Some(start) = at.checked_sub(1).filter(|&s| s < len) else {
                break;
            };
            if self.continues(at, MAX_N, len).is_some() {
                let agree = self.agreement(start, len);
                if best.is_none_or(|(_, b)| agree > b) {
                    best = Some((start, agree));
                }
                found += 1;
                if found == CHAIN || agree == CONTEXT_MATCH {
                    break;
                }
            }
            // Links only go back: a link at or past `start` is stale (left by a truncation).
            let next = self.prev[start] as usize;
            if next > start {
                break;
            }
            at = next;
        }
        best.map(|(start, _)| start)
    }

    /// How many tokens before the run ending at `start` equal those before the session's own
    /// last run (both `MAX_N` long and equal), counting the run, up to [`CONTEXT_MATCH`].
    fn agreement(&self, start: usize, len: usize) -> usize {
        let limit = CONTEXT_MATCH.min(start);
        let mut m = MAX_N;
        while m < limit && self.tokens[start - 1 - m] == self.tokens[len - 1 - m] {
            m += 1;
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The continuation [`ContextIndex::draft`] gives for a match of the last `n` tokens, by
    /// brute force: for `MAX_N` the best-agreeing of the latest `CHAIN` occurrences (the latest
    /// among equals), for shorter `n` the latest occurrence.
    fn reference(tokens: &[u32], n: usize, max: usize) -> Option<Vec<u32>> {
        let len = tokens.len();
        if len <= n || max == 0 {
            return None;
        }
        let suffix = &tokens[len - n..];
        let found = (n..len).rev().filter(|&s| &tokens[s - n..s] == suffix);
        let start = if n == MAX_N {
            let agree = |s: usize| {
                let mut m = MAX_N;
                while m < CONTEXT_MATCH.min(s) && tokens[s - 1 - m] == tokens[len - 1 - m] {
                    m += 1;
                }
                m
            };
            let mut best: Option<(usize, usize)> = None;
            for s in found.take(CHAIN) {
                if best.is_none_or(|(_, b)| agree(s) > b) {
                    best = Some((s, agree(s)));
                }
            }
            best.map(|(s, _)| s)
        } else {
            found.into_iter().next()
        };
        start.map(|s| tokens[s..(s + max).min(len)].to_vec())
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
    fn the_occurrence_whose_context_agrees_longest_is_drafted() {
        let mut ix = ContextIndex::new(64);
        // "1 2 3 4" follows "9 8" first, then "7 7"; the session ends in "9 8 1 2 3 4", so the
        // first occurrence's continuation is drafted, though the second is the latest.
        ix.extend(&[
            9, 8, 1, 2, 3, 4, 5, 6, 7, 7, 1, 2, 3, 4, 0, 0, 9, 8, 1, 2, 3, 4,
        ]);
        let mut out = Vec::new();
        assert_eq!(ix.draft(2, &mut out), MAX_N);
        assert_eq!(out, [5, 6]);
        // Ending in "7 7 1 2 3 4", the latest agrees longest.
        ix.truncate(16);
        ix.extend(&[7, 7, 1, 2, 3, 4]);
        assert_eq!(ix.draft(2, &mut out), MAX_N);
        assert_eq!(out, [0, 0]);
        // Equal agreement: the latest.
        let mut ties = ContextIndex::new(64);
        ties.extend(&[5, 1, 2, 3, 4, 6, 5, 1, 2, 3, 4, 7, 9, 1, 2, 3, 4]);
        assert_eq!(ties.draft(1, &mut out), MAX_N);
        assert_eq!(out, [7]);
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
        /// The draft is the brute-force one for the `n` it matched, and the longest runs are
        /// never missed (the shorter runs' table is lossy only under slot collisions, which
        /// lose a draft, never invent one); a small alphabet makes repeats common.
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
                // The longest runs' chains hold every occurrence: none is missed.
                if n < MAX_N && max > 0 {
                    prop_assert_eq!(reference(seen, MAX_N, max), None);
                }
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
