//! The token-mask step: walk the vocabulary's byte trie through the automaton from one state,
//! skipping every subtree whose prefix is refused, and a bounded cache of the masks per state.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::sync::Arc;

use crate::vocab::Vocab;

/// One byte step of an automaton.
pub(crate) trait Step {
    type S: Copy;
    fn step(&self, s: Self::S, b: u8) -> Option<Self::S>;
}

/// Sets the bit of each token whose bytes `a` accepts from `start`.
pub(crate) fn walk<A: Step>(a: &A, start: A::S, vocab: &Vocab, mask: &mut [u64]) {
    let nodes = &vocab.nodes;
    // nodes[0] is the root, the last one a sentinel.
    let last = nodes.len() - 1;
    let mut stack = vec![start; vocab.max_len + 1];
    let mut i = 1;
    while i < last {
        let nd = nodes[i];
        let d = usize::from(nd.depth);
        match a.step(stack[d - 1], nd.byte) {
            Some(s) => {
                stack[d] = s;
                for &t in &vocab.toks[nd.tok as usize..nodes[i + 1].tok as usize] {
                    if let Some(w) = mask.get_mut(t as usize / 64) {
                        *w |= 1u64 << (t % 64);
                    }
                }
                i += 1;
            }
            None => i = nd.end as usize,
        }
    }
}

/// Masks by state, at most `cap` of them; the oldest entry goes first when full.
#[derive(Debug)]
pub(crate) struct MaskCache<S> {
    map: HashMap<S, Arc<[u64]>>,
    order: VecDeque<S>,
    cap: usize,
    pub(crate) hits: u64,
    pub(crate) misses: u64,
}

impl<S: Copy + Eq + Hash> MaskCache<S> {
    pub(crate) fn new(cap: usize) -> MaskCache<S> {
        MaskCache {
            map: HashMap::new(),
            order: VecDeque::new(),
            cap: cap.max(1),
            hits: 0,
            misses: 0,
        }
    }

    pub(crate) fn get(&mut self, s: &S) -> Option<Arc<[u64]>> {
        let m = self.map.get(s).cloned();
        if m.is_some() {
            self.hits += 1;
        } else {
            self.misses += 1;
        }
        m
    }

    pub(crate) fn insert(&mut self, s: S, m: Arc<[u64]>) {
        if self.map.contains_key(&s) {
            return;
        }
        while self.map.len() >= self.cap {
            match self.order.pop_front() {
                Some(old) => {
                    self.map.remove(&old);
                }
                None => break,
            }
        }
        self.map.insert(s, m);
        self.order.push_back(s);
    }

    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    pub(crate) fn clear(&mut self) {
        self.map.clear();
        self.order.clear();
    }

    pub(crate) fn cap(&self) -> usize {
        self.cap
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_is_bounded_and_evicts_oldest() {
        let mut c: MaskCache<u32> = MaskCache::new(2);
        let m: Arc<[u64]> = Arc::from(vec![1u64]);
        c.insert(1, m.clone());
        c.insert(2, m.clone());
        c.insert(3, m.clone());
        assert_eq!(c.len(), 2);
        assert!(c.get(&1).is_none());
        assert!(c.get(&2).is_some() && c.get(&3).is_some());
        assert_eq!((c.hits, c.misses), (2, 1));
    }

    /// Accepts bytes of the word "ab" only, one position per state.
    struct Word;
    impl Step for Word {
        type S = u8;
        fn step(&self, s: u8, b: u8) -> Option<u8> {
            (b"ab".get(usize::from(s)) == Some(&b)).then_some(s + 1)
        }
    }

    #[test]
    fn walk_sets_exactly_the_accepted_tokens() {
        let toks: Vec<&[u8]> = vec![b"a", b"ab", b"abc", b"b", b"x", b"<e>"];
        let v = Vocab::new(&toks, &[5]).unwrap();
        let mut m = vec![0u64; v.mask_words()];
        walk(&Word, 0, &v, &mut m);
        assert_eq!(m[0], 0b11);
        let mut m = vec![0u64; v.mask_words()];
        walk(&Word, 1, &v, &mut m);
        assert_eq!(m[0], 0b1000);
    }
}
