//! A model's vocabulary as bytes, built once per model: each token's bytes, the end-of-generation
//! ids, and byte tries laid out in depth-first order so a mask walk skips a refused subtree in
//! one jump. Tokens made only of plain string bytes (printable ASCII but `"` and `\`, at most
//! [`PLAIN_MAX_LEN`] of them) are also kept as masks by length, with a second trie of the other
//! tokens: from a state where all plain bytes lead to one same state, for as many bytes as a
//! plain token can have (inside a string, counted or not), the mask is a length class of the
//! plain tokens plus a walk of the much smaller trie.

use crate::error::ConstrainError;

/// Tokens longer than this many bytes are never allowed (none of the known vocabularies has one).
pub const MAX_TOKEN_BYTES: usize = u16::MAX as usize;

/// One trie node; the root is node 0.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Node {
    /// The index just past this node's subtree.
    pub(crate) end: u32,
    /// First entry in `Vocab::toks` of the tokens spelled by the path to this node; they run to
    /// the next node's `tok`.
    pub(crate) tok: u32,
    /// Bytes from the root (the root is 0).
    pub(crate) depth: u16,
    pub(crate) byte: u8,
}

/// A byte trie over some tokens: node 0 is the root, the last node a sentinel.
#[derive(Debug, Default)]
pub(crate) struct Trie {
    pub(crate) nodes: Vec<Node>,
    /// Token ids by node, in node order.
    pub(crate) toks: Vec<u32>,
    /// The longest token's length.
    pub(crate) max_len: usize,
}

/// Plain tokens longer than this are kept in the special trie.
pub(crate) const PLAIN_MAX_LEN: usize = 64;

/// A byte that, inside a JSON string, stands for itself.
pub(crate) fn is_plain(b: u8) -> bool {
    (0x20..0x80).contains(&b) && b != b'"' && b != b'\\'
}

/// The vocabulary: token id → bytes, the ids that end generation, and the tries.
#[derive(Debug)]
pub struct Vocab {
    bytes: Vec<u8>,
    offs: Vec<usize>,
    eos: Vec<u32>,
    /// Every token that can be allowed.
    pub(crate) all: Trie,
    /// Those with at least one byte that is not plain, or longer than [`PLAIN_MAX_LEN`].
    pub(crate) special: Trie,
    /// `plain_upto[n]`: the other tokens of at most `n` bytes, as a mask (`[0]` is empty; the
    /// last entry holds them all).
    pub(crate) plain_upto: Vec<Vec<u64>>,
}

impl Vocab {
    /// `tokens[id]` is the byte string token `id` emits (already decoded from the tokenizer's
    /// text form; empty for control tokens, which are then never allowed). `eos` lists the ids
    /// that end generation (EOS, end-of-turn): allowed exactly in accepting states.
    pub fn new<T: AsRef<[u8]>>(tokens: &[T], eos: &[u32]) -> Result<Vocab, ConstrainError> {
        let n = tokens.len();
        if n == 0 || u32::try_from(n).is_err() {
            return Err(ConstrainError::Vocab(format!(
                "{n} tokens (expected 1 to {})",
                u32::MAX
            )));
        }
        let mut eos = eos.to_vec();
        eos.sort_unstable();
        eos.dedup();
        if eos.is_empty() {
            return Err(ConstrainError::Vocab(
                "no end-of-generation token: a constrained output could never end".to_owned(),
            ));
        }
        if let Some(bad) = eos.iter().find(|&&e| e as usize >= n) {
            return Err(ConstrainError::Vocab(format!(
                "end-of-generation id {bad} is not below the vocabulary size {n}"
            )));
        }
        let mut bytes = Vec::new();
        let mut offs = Vec::with_capacity(n + 1);
        offs.push(0);
        for t in tokens {
            bytes.extend_from_slice(t.as_ref());
            offs.push(bytes.len());
        }
        if bytes.len() >= (u32::MAX - 2) as usize {
            return Err(ConstrainError::Vocab(format!(
                "{} bytes of token text (at most {})",
                bytes.len(),
                u32::MAX
            )));
        }
        let mut v = Vocab {
            bytes,
            offs,
            eos,
            all: Trie::default(),
            special: Trie::default(),
            plain_upto: Vec::new(),
        };
        let mut ids: Vec<u32> = (0..v.len() as u32)
            .filter(|&id| {
                let len = v.token_bytes(id).len();
                len > 0 && len <= MAX_TOKEN_BYTES && !v.is_eos(id)
            })
            .collect();
        ids.sort_unstable_by(|&a, &b| v.token_bytes(a).cmp(v.token_bytes(b)).then(a.cmp(&b)));
        let mut by_len: Vec<Vec<u32>> = Vec::new();
        let mut special = Vec::new();
        for &id in &ids {
            let t = v.token_bytes(id);
            if t.len() <= PLAIN_MAX_LEN && t.iter().all(|&b| is_plain(b)) {
                if by_len.len() <= t.len() {
                    by_len.resize(t.len() + 1, Vec::new());
                }
                by_len[t.len()].push(id);
            } else {
                special.push(id);
            }
        }
        let mut upto = vec![0u64; v.mask_words()];
        let mut plain_upto = vec![upto.clone()];
        for ids in by_len.iter().skip(1) {
            for &id in ids {
                upto[id as usize / 64] |= 1u64 << (id % 64);
            }
            plain_upto.push(upto.clone());
        }
        v.all = v.build_trie(&ids);
        v.special = v.build_trie(&special);
        v.plain_upto = plain_upto;
        Ok(v)
    }

    /// The trie of `ids`, which are sorted by their bytes.
    fn build_trie(&self, ids: &[u32]) -> Trie {
        let mut nodes = vec![Node {
            end: 0,
            tok: 0,
            depth: 0,
            byte: 0,
        }];
        let mut toks = Vec::with_capacity(ids.len());
        // Indices of the nodes on the path to the last token's node (root first).
        let mut path: Vec<usize> = vec![0];
        let mut prev: &[u8] = &[];
        let mut max_len = 0;
        for &id in ids {
            let t = self.token_bytes(id);
            let common = t.iter().zip(prev).take_while(|(a, b)| a == b).count();
            while path.len() > common + 1 {
                if let Some(i) = path.pop() {
                    nodes[i].end = nodes.len() as u32;
                }
            }
            for (d, &b) in t.iter().enumerate().skip(common) {
                path.push(nodes.len());
                nodes.push(Node {
                    end: 0,
                    tok: toks.len() as u32,
                    depth: (d + 1) as u16,
                    byte: b,
                });
            }
            toks.push(id);
            max_len = max_len.max(t.len());
            prev = t;
        }
        let total = nodes.len() as u32;
        for i in path {
            nodes[i].end = total;
        }
        // A sentinel so every node's token range ends at the next node's `tok`.
        nodes.push(Node {
            end: total + 1,
            tok: toks.len() as u32,
            depth: 0,
            byte: 0,
        });
        Trie {
            nodes,
            toks,
            max_len,
        }
    }

    /// The number of token ids.
    pub fn len(&self) -> usize {
        self.offs.len() - 1
    }

    /// Always false: a vocabulary has at least one token.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `u64` words in a mask over this vocabulary.
    pub fn mask_words(&self) -> usize {
        self.len().div_ceil(64)
    }

    /// The bytes of token `id` (empty for an unknown id).
    pub fn token_bytes(&self, id: u32) -> &[u8] {
        let i = id as usize;
        match (self.offs.get(i), self.offs.get(i + 1)) {
            (Some(&a), Some(&b)) => &self.bytes[a..b],
            _ => &[],
        }
    }

    /// Whether `id` ends generation.
    pub fn is_eos(&self, id: u32) -> bool {
        self.eos.binary_search(&id).is_ok()
    }

    /// The end-of-generation ids, sorted.
    pub fn eos_ids(&self) -> &[u32] {
        &self.eos
    }

    /// Trie nodes (without root and sentinel), for sizing: all tokens', and those of the tokens
    /// that are not plain string text.
    pub fn trie_nodes(&self) -> (usize, usize) {
        (self.all.nodes.len() - 2, self.special.nodes.len() - 2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trie_is_depth_first_with_subtree_ends_and_duplicates() {
        let toks: Vec<&[u8]> = vec![b"ab", b"a", b"b", b"", b"abc", b"ab", b"<eos>"];
        let v = Vocab::new(&toks, &[6]).unwrap();
        // a, ab, abc, b
        assert_eq!(v.trie_nodes(), (4, 0));
        let t = &v.all;
        let bytes: Vec<u8> = t.nodes[1..5].iter().map(|n| n.byte).collect();
        assert_eq!(bytes, b"abcb");
        assert_eq!(t.nodes[1].end, 4, "subtree of `a` holds ab, abc");
        assert_eq!(t.nodes[2].end, 4);
        assert_eq!(t.nodes[4].end, 5);
        let at = |i: usize| &t.toks[t.nodes[i].tok as usize..t.nodes[i + 1].tok as usize];
        assert_eq!(at(1), &[1]);
        assert_eq!(at(2), &[0, 5], "duplicate spellings share a node");
        assert_eq!(at(3), &[4]);
        assert_eq!(at(4), &[2]);
        assert_eq!(t.max_len, 3);
        assert_eq!(
            v.plain_upto[3][0], 0b11_0111,
            "all but the empty and the EOS token are plain"
        );
        assert_eq!(v.token_bytes(4), b"abc");
        assert_eq!(v.token_bytes(99), b"");
        assert!(v.is_eos(6) && !v.is_eos(0));
    }

    #[test]
    fn special_trie_holds_the_tokens_with_non_plain_bytes() {
        let toks: Vec<&[u8]> = vec![b"a\"", b"ab", "é".as_bytes(), b"\\n", b"\n", b"<e>"];
        let v = Vocab::new(&toks, &[5]).unwrap();
        assert_eq!(v.plain_upto.len(), 3);
        assert_eq!(v.plain_upto[1][0], 0);
        assert_eq!(v.plain_upto[2][0], 0b10);
        let mut special: Vec<u32> = v.special.toks.clone();
        special.sort_unstable();
        assert_eq!(special, vec![0, 2, 3, 4]);
        assert_eq!(v.all.toks.len(), 5);
    }

    #[test]
    fn refuses_vocabularies_that_cannot_work() {
        let toks: Vec<&[u8]> = vec![b"a"];
        assert!(matches!(
            Vocab::new(&toks, &[]),
            Err(ConstrainError::Vocab(_))
        ));
        assert!(matches!(
            Vocab::new(&toks, &[1]),
            Err(ConstrainError::Vocab(_))
        ));
        let none: Vec<&[u8]> = Vec::new();
        assert!(matches!(
            Vocab::new(&none, &[0]),
            Err(ConstrainError::Vocab(_))
        ));
    }
}
