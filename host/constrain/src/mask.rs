//! The token-mask step: walk the vocabulary's byte trie through the automaton from one state,
//! skipping every subtree whose prefix is refused, and a bounded cache of the masks per state.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::sync::Arc;

use crate::vocab::{Trie, Vocab, is_plain};

/// One byte step of an automaton.
pub(crate) trait Step {
    type S: Copy + PartialEq;
    fn step(&self, s: Self::S, b: u8) -> Option<Self::S>;
}

/// What all plain bytes do from one state.
enum Plain<S> {
    /// Each is refused.
    None,
    /// Each leads to this state.
    Uniform(S),
    /// Anything else.
    Mixed,
}

fn plain_step<A: Step>(a: &A, s: A::S) -> Plain<A::S> {
    let first = a.step(s, b' ');
    for b in (0x21..0x80u8).filter(|&b| is_plain(b)) {
        if a.step(s, b) != first {
            return Plain::Mixed;
        }
    }
    match first {
        Some(t) => Plain::Uniform(t),
        None => Plain::None,
    }
}

/// Sets the bit of each token whose bytes `a` accepts from `start`. When the plain bytes act as
/// one (inside a string) for `n` steps and then are all refused, or loop back, exactly the plain
/// tokens of at most `n` bytes (or all of them) are accepted, and only the other tokens' trie
/// is walked; otherwise the whole trie is.
pub(crate) fn walk<A: Step>(a: &A, start: A::S, vocab: &Vocab, mask: &mut [u64]) {
    let longest = vocab.plain_upto.len() - 1;
    let mut s = start;
    let mut n = 0;
    let plain_len = loop {
        if n == longest {
            break Some(longest);
        }
        match plain_step(a, s) {
            Plain::None => break Some(n),
            Plain::Uniform(t) if t == s => break Some(longest),
            Plain::Uniform(t) => {
                s = t;
                n += 1;
            }
            Plain::Mixed => break None,
        }
    };
    match plain_len {
        Some(n) => {
            for (m, p) in mask.iter_mut().zip(&vocab.plain_upto[n]) {
                *m |= p;
            }
            walk_trie(a, start, &vocab.special, mask);
        }
        None => walk_trie(a, start, &vocab.all, mask),
    }
}

fn walk_trie<A: Step>(a: &A, start: A::S, trie: &Trie, mask: &mut [u64]) {
    let nodes = &trie.nodes;
    // nodes[0] is the root, the last one a sentinel.
    let last = nodes.len() - 1;
    let mut stack = vec![start; trie.max_len + 1];
    let mut i = 1;
    while i < last {
        let nd = nodes[i];
        let d = usize::from(nd.depth);
        match a.step(stack[d - 1], nd.byte) {
            Some(s) => {
                stack[d] = s;
                for &t in &trie.toks[nd.tok as usize..nodes[i + 1].tok as usize] {
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

    /// Inside a "string" of plain bytes, closed by `"` (state 1 = closed).
    struct Quoted;
    impl Step for Quoted {
        type S = u8;
        fn step(&self, s: u8, b: u8) -> Option<u8> {
            match (s, b) {
                (0, b'"') => Some(1),
                (0, b) if is_plain(b) => Some(0),
                _ => None,
            }
        }
    }

    #[test]
    fn plain_loop_states_take_the_plain_set_plus_the_special_walk() {
        let toks: Vec<&[u8]> = vec![b"ab", b"a\"", b"\"", b"\"x", "é".as_bytes(), b"<e>"];
        let v = Vocab::new(&toks, &[5]).unwrap();
        let mut m = vec![0u64; v.mask_words()];
        walk(&Quoted, 0, &v, &mut m);
        assert_eq!(m[0], 0b111);
        let mut m = vec![0u64; v.mask_words()];
        walk(&Quoted, 1, &v, &mut m);
        assert_eq!(m[0], 0);
    }

    /// A string of at most 3 plain bytes, closed by `"` (state 9 = closed).
    struct Counted;
    impl Step for Counted {
        type S = u8;
        fn step(&self, s: u8, b: u8) -> Option<u8> {
            match (s, b) {
                (0..=3, b'"') => Some(9),
                (0..=2, b) if is_plain(b) => Some(s + 1),
                _ => None,
            }
        }
    }

    #[test]
    fn counted_plain_states_take_a_length_class() {
        let toks: Vec<&[u8]> = vec![b"a", b"ab", b"abc", b"abcd", b"a\"", b"\"", b"<e>"];
        let v = Vocab::new(&toks, &[6]).unwrap();
        let mut m = vec![0u64; v.mask_words()];
        walk(&Counted, 0, &v, &mut m);
        assert_eq!(m[0], 0b11_0111);
        let mut m = vec![0u64; v.mask_words()];
        walk(&Counted, 2, &v, &mut m);
        assert_eq!(m[0], 0b11_0001);
        let mut m = vec![0u64; v.mask_words()];
        walk(&Counted, 3, &v, &mut m);
        assert_eq!(m[0], 0b10_0000);
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
