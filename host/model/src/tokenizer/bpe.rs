//! Byte-level BPE (llama.cpp `llm_tokenizer_bpe`): pre-tokenize into byte-encoded words, then
//! merge adjacent symbols by the rank of the pair in `tokenizer.ggml.merges`, lowest first.

use super::pretokenize::PreTokenizer;
use super::vocab::Vocab;
use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

/// Merge ranks keyed by `"left right"`, plus the pre-tokenizer.
#[derive(Debug)]
pub(crate) struct BpeModel {
    ranks: HashMap<String, u32>,
    pre: PreTokenizer,
    ignore_merges: bool,
}

#[derive(Debug, Clone, Copy)]
struct Symbol {
    start: usize,
    len: usize,
    prev: Option<usize>,
    next: Option<usize>,
}

#[derive(Debug, PartialEq, Eq)]
struct Bigram {
    left: usize,
    right: usize,
    rank: u32,
    size: usize,
}

impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Bigram {
    /// The max-heap pops the lowest rank first; on a tie, the leftmost pair.
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .rank
            .cmp(&self.rank)
            .then_with(|| other.left.cmp(&self.left))
    }
}

impl BpeModel {
    /// `merges` are `"a b"` strings; the first occurrence of a pair sets its rank.
    pub(crate) fn new(merges: &[String], pre: PreTokenizer, ignore_merges: bool) -> Self {
        let mut ranks = HashMap::with_capacity(merges.len());
        for (i, m) in merges.iter().enumerate() {
            // llama.cpp splits at the first space after the first byte; "first second" is then
            // the line itself. A line without one becomes the pair ("", "").
            let key = if m.len() > 1 && m.as_bytes()[1..].contains(&b' ') {
                m.clone()
            } else {
                " ".to_string()
            };
            ranks.entry(key).or_insert(i as u32);
        }
        Self {
            ranks,
            pre,
            ignore_merges,
        }
    }

    fn rank(&self, buf: &mut String, left: &str, right: &str) -> Option<u32> {
        buf.clear();
        buf.push_str(left);
        buf.push(' ');
        buf.push_str(right);
        self.ranks.get(buf.as_str()).copied()
    }

    /// Tokenizes one raw-text fragment and appends the ids to `out`.
    pub(crate) fn tokenize(&self, vocab: &Vocab, text: &str, out: &mut Vec<u32>) {
        let mut buf = String::new();
        let mut symbols: Vec<Symbol> = Vec::new();
        let mut queue: BinaryHeap<Bigram> = BinaryHeap::new();
        for word in self.pre.split(text) {
            if self.ignore_merges
                && let Some(id) = vocab.find(&word)
            {
                out.push(id);
                continue;
            }
            symbols.clear();
            queue.clear();
            for (i, (start, c)) in word.char_indices().enumerate() {
                let len = c.len_utf8();
                symbols.push(Symbol {
                    start,
                    len,
                    prev: i.checked_sub(1),
                    next: (start + len < word.len()).then_some(i + 1),
                });
            }
            let mut add = |symbols: &[Symbol],
                           queue: &mut BinaryHeap<Bigram>,
                           left: Option<usize>,
                           right: Option<usize>| {
                let (Some(left), Some(right)) = (left, right) else {
                    return;
                };
                let (l, r) = (symbols[left], symbols[right]);
                let lt = &word[l.start..l.start + l.len];
                let rt = &word[r.start..r.start + r.len];
                if let Some(rank) = self.rank(&mut buf, lt, rt) {
                    queue.push(Bigram {
                        left,
                        right,
                        rank,
                        size: l.len + r.len,
                    });
                }
            };
            for i in 1..symbols.len() {
                add(&symbols, &mut queue, Some(i - 1), Some(i));
            }
            while let Some(b) = queue.pop() {
                let (l, r) = (symbols[b.left], symbols[b.right]);
                if l.len == 0 || r.len == 0 || l.len + r.len != b.size {
                    continue;
                }
                symbols[b.left].len += r.len;
                symbols[b.right].len = 0;
                symbols[b.left].next = r.next;
                if let Some(n) = r.next {
                    symbols[n].prev = Some(b.left);
                }
                add(&symbols, &mut queue, symbols[b.left].prev, Some(b.left));
                add(&symbols, &mut queue, Some(b.left), symbols[b.left].next);
            }
            for s in symbols.iter().filter(|s| s.len > 0) {
                let piece = &word[s.start..s.start + s.len];
                match vocab.find(piece) {
                    Some(id) => out.push(id),
                    // llama.cpp looks each byte up as a one-byte token: only ASCII can match.
                    None => out.extend(
                        piece
                            .bytes()
                            .filter(u8::is_ascii)
                            .filter_map(|b| vocab.find(char::from(b).encode_utf8(&mut [0; 4]))),
                    ),
                }
            }
        }
    }
}
