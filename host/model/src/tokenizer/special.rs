//! Special-token partitioning (llama.cpp's `tokenizer_st_partition`): control, user-defined
//! and unknown tokens are cut out of the raw text before the model's tokenizer sees it.

use super::vocab::{ATTR_CONTROL, ATTR_LSTRIP, ATTR_RSTRIP, ATTR_UNKNOWN, Vocab};

/// A piece of the input: raw text still to tokenize (byte range), or a token already found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fragment {
    Text { start: usize, end: usize },
    Token(u32),
}

fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0B | 0x0C | b'\r')
}

/// Splits `text` on the special tokens in `specials` (longest text first). With
/// `parse_special == false` only user-defined tokens are matched, as in llama.cpp.
pub(crate) fn partition(
    text: &str,
    vocab: &Vocab,
    specials: &[u32],
    parse_special: bool,
) -> Vec<Fragment> {
    if text.is_empty() {
        return Vec::new();
    }
    let mut frags = vec![Fragment::Text {
        start: 0,
        end: text.len(),
    }];
    let bytes = text.as_bytes();
    for &id in specials {
        let data = &vocab.tokens[id as usize];
        if !parse_special && data.attr & (ATTR_CONTROL | ATTR_UNKNOWN) != 0 {
            continue;
        }
        let needle = data.text.as_str();
        if !frags.iter().any(
            |f| matches!(f, Fragment::Text { start, end } if text[*start..*end].contains(needle)),
        ) {
            continue;
        }
        let mut next = Vec::with_capacity(frags.len() + 2);
        for frag in frags {
            let Fragment::Text { start, end } = frag else {
                next.push(frag);
                continue;
            };
            let mut cur = start;
            loop {
                let Some(rel) = text[cur..end].find(needle) else {
                    if cur < end {
                        next.push(Fragment::Text { start: cur, end });
                    }
                    break;
                };
                let at = cur + rel;
                let mut left_end = at;
                if data.attr & ATTR_LSTRIP != 0 {
                    while left_end > cur && is_c_space(bytes[left_end - 1]) {
                        left_end -= 1;
                    }
                }
                if left_end > cur {
                    next.push(Fragment::Text {
                        start: cur,
                        end: left_end,
                    });
                }
                next.push(Fragment::Token(id));
                cur = at + needle.len();
                if data.attr & ATTR_RSTRIP != 0 {
                    while cur < end && is_c_space(bytes[cur]) {
                        cur += 1;
                    }
                }
                if cur >= end {
                    break;
                }
            }
        }
        frags = next;
    }
    frags
}
