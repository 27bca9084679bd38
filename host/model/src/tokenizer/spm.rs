//! SentencePiece (llama.cpp `llm_tokenizer_spm`): split into characters, then repeatedly merge
//! the adjacent pair whose concatenation is the highest-scoring token; leftovers become bytes.

use super::vocab::Vocab;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

#[derive(Debug, Clone, Copy)]
struct Symbol {
    start: usize,
    len: usize,
    prev: Option<usize>,
    next: Option<usize>,
}

#[derive(Debug)]
struct Bigram {
    left: usize,
    right: usize,
    score: f32,
    size: usize,
}

impl PartialEq for Bigram {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Bigram {}
impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Bigram {
    /// Highest score first; on a tie, the leftmost pair first.
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .partial_cmp(&other.score)
            .unwrap_or(Ordering::Equal)
            .then_with(|| other.left.cmp(&self.left))
    }
}

/// Tokenizes `text` (spaces already escaped to U+2581) and appends the ids to `out`.
pub(crate) fn tokenize(vocab: &Vocab, text: &str, unk: Option<u32>, out: &mut Vec<u32>) {
    let mut symbols: Vec<Symbol> = Vec::with_capacity(text.len());
    for (i, (start, c)) in text.char_indices().enumerate() {
        let len = c.len_utf8();
        symbols.push(Symbol {
            start,
            len,
            prev: i.checked_sub(1),
            next: (start + len < text.len()).then_some(i + 1),
        });
    }
    let mut queue = BinaryHeap::new();
    let try_add = |symbols: &[Symbol],
                   queue: &mut BinaryHeap<Bigram>,
                   left: Option<usize>,
                   right: Option<usize>| {
        let (Some(left), Some(right)) = (left, right) else {
            return;
        };
        let (l, r) = (symbols[left], symbols[right]);
        let piece = &text[l.start..l.start + l.len + r.len];
        if let Some(id) = vocab.find(piece) {
            queue.push(Bigram {
                left,
                right,
                score: vocab.tokens[id as usize].score,
                size: piece.len(),
            });
        }
    };
    for i in 1..symbols.len() {
        try_add(&symbols, &mut queue, Some(i - 1), Some(i));
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
        try_add(&symbols, &mut queue, symbols[b.left].prev, Some(b.left));
        try_add(&symbols, &mut queue, Some(b.left), symbols[b.left].next);
    }
    let mut i = if symbols.is_empty() { None } else { Some(0) };
    while let Some(idx) = i {
        let s = symbols[idx];
        let piece = &text[s.start..s.start + s.len];
        match vocab.find(piece) {
            Some(id) => out.push(id),
            None => {
                for &b in piece.as_bytes() {
                    if let Some(id) = vocab.byte_token_spm(b).or(unk) {
                        out.push(id);
                    }
                }
            }
        }
        i = s.next;
    }
}
