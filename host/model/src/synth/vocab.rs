//! Vocabularies for synthetic models: copied `tokenizer.*` keys from a GGUF file, or a generated
//! SentencePiece-style ("llama" model) vocabulary.
//!
//! Invariant: a generated vocabulary of size n has exactly n unique tokens: `<unk>`=0 (type 2),
//! `<s>`=1 and `</s>`=2 (type 3), `<0x00>`..`<0xFF>` at 3..259 (type 6), then normal pieces
//! (type 1) with strictly decreasing scores, then the extra control tokens asked for (type 3).

use std::collections::HashSet;
use std::path::Path;

use super::SynthError;
use crate::gguf::{GgufFile, MetaArray, MetaValue};

pub(super) fn tokenizer_from_file(path: &Path) -> Result<Vec<(String, MetaValue)>, SynthError> {
    let vocab_err = |reason: String| SynthError::Vocab {
        path: path.to_owned(),
        reason,
    };
    let file = GgufFile::open(path).map_err(|e| vocab_err(e.to_string()))?;
    let keys: Vec<(String, MetaValue)> = file
        .metadata()
        .iter()
        .filter(|(k, _)| k.starts_with("tokenizer."))
        .cloned()
        .collect();
    match file.get_array("tokenizer.ggml.tokens") {
        Some(tokens) if !tokens.is_empty() => Ok(keys),
        _ => Err(vocab_err("no tokenizer.ggml.tokens array".to_owned())),
    }
}

/// Ids before the first normal piece: `<unk>`, `<s>`, `</s>` and 256 byte tokens.
pub(crate) const FIRST_NORMAL: usize = 3 + 256;

/// A SentencePiece ("llama" model) vocabulary of `n` tokens (at least `FIRST_NORMAL + 1 +
/// extra.len()`): specials, byte fallback tokens, unique pieces (common English fragments
/// first) with decreasing scores, then the control tokens `extra` (none of them a piece).
pub(crate) fn spm_tokenizer(n: usize, extra: &[&str]) -> Vec<(String, MetaValue)> {
    let mut tokens = vec!["<unk>".to_owned(), "<s>".to_owned(), "</s>".to_owned()];
    let mut types = vec![2i32, 3, 3];
    tokens.extend((0..=255u8).map(|b| format!("<0x{b:02X}>")));
    types.extend([6i32; 256]);
    let pieces = normal_pieces(n.saturating_sub(FIRST_NORMAL + extra.len()));
    types.extend(std::iter::repeat_n(1i32, pieces.len()));
    let mut scores = vec![0f32; FIRST_NORMAL];
    scores.extend((0..pieces.len()).map(|i| -(i as f32)));
    tokens.extend(pieces);
    tokens.extend(extra.iter().map(|t| (*t).to_owned()));
    types.extend(std::iter::repeat_n(3i32, extra.len()));
    scores.extend(std::iter::repeat_n(0f32, extra.len()));
    let s = |v: &str| MetaValue::String(v.to_owned());
    vec![
        ("tokenizer.ggml.model".to_owned(), s("llama")),
        ("tokenizer.ggml.pre".to_owned(), s("default")),
        (
            "tokenizer.ggml.tokens".to_owned(),
            MetaValue::Array(MetaArray::String(tokens)),
        ),
        (
            "tokenizer.ggml.scores".to_owned(),
            MetaValue::Array(MetaArray::F32(scores)),
        ),
        (
            "tokenizer.ggml.token_type".to_owned(),
            MetaValue::Array(MetaArray::I32(types)),
        ),
        ("tokenizer.ggml.bos_token_id".to_owned(), MetaValue::U32(1)),
        ("tokenizer.ggml.eos_token_id".to_owned(), MetaValue::U32(2)),
        (
            "tokenizer.ggml.unknown_token_id".to_owned(),
            MetaValue::U32(0),
        ),
        (
            "tokenizer.ggml.add_bos_token".to_owned(),
            MetaValue::Bool(true),
        ),
        (
            "tokenizer.ggml.add_eos_token".to_owned(),
            MetaValue::Bool(false),
        ),
    ]
}

const COMMON_WORDS: &[&str] = &[
    "the", "a", "and", "to", "of", "was", "he", "she", "it", "in", "is", "you", "that", "with",
    "her", "his", "they", "said", "on", "for", "day", "Once", "upon", "time", "there", "little",
    "girl", "boy", "named", "Lily", "Tim", "play", "big", "happy", "friend", "saw", "went", "very",
    "had", "not", "but", "one", "so", "can", "like", "want", "be", "have", "do", "at", "this",
    "what", "all", "were", "we", "when", "your", "an", "are", "from", "out", "up", "about", "mom",
    "dog", "cat", "tree", "sun", "ball", "park", "fun", "home", "good", "new", "The", "He", "She",
];
const SUFFIXES: &[&str] = &[
    "ing", "ed", "er", "ly", "es", "s", "en", "al", "th", "ou", "an", "re",
];
const CHARS: &str = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,!?'\"-:;()";

/// `count` unique pieces: "▁", single characters, common words, suffixes, then enumerated
/// letter strings with and without the word-start marker.
fn normal_pieces(count: usize) -> Vec<String> {
    let mut out = Vec::with_capacity(count);
    let mut seen = HashSet::with_capacity(count);
    let mut push = |p: String, out: &mut Vec<String>| {
        if out.len() < count && seen.insert(p.clone()) {
            out.push(p);
        }
    };
    push("▁".to_owned(), &mut out);
    CHARS.chars().for_each(|c| push(c.to_string(), &mut out));
    COMMON_WORDS
        .iter()
        .for_each(|w| push(format!("▁{w}"), &mut out));
    SUFFIXES
        .iter()
        .for_each(|s| push((*s).to_owned(), &mut out));
    let letters: Vec<char> = ('a'..='z').collect();
    let mut len = 1u32;
    while out.len() < count {
        // All letter strings of length `len`, in base-26 order.
        let total = 26u64.saturating_pow(len);
        for k in 0..total {
            if out.len() >= count {
                break;
            }
            let mut word = String::new();
            let mut r = k;
            for _ in 0..len {
                word.insert(0, letters[(r % 26) as usize]);
                r /= 26;
            }
            push(format!("▁{word}"), &mut out);
            push(word, &mut out);
        }
        len += 1;
    }
    out
}
