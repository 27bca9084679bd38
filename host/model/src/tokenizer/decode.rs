//! Ids back to bytes and text: llama.cpp's `token_to_piece` (the per-token piece cache),
//! `llama_detokenize` (leading-space strip, `clean_spaces`) and an incremental decoder of ids to
//! text (over [`Utf8Buf`]).

use super::unicode;
use super::utf8::Utf8Buf;
use super::vocab::{
    ATTR_BYTE, ATTR_CONTROL, ATTR_NORMAL, ATTR_UNKNOWN, ATTR_USER_DEFINED, TokenData,
};
use super::{Tokenizer, TokenizerKind};

/// The piece of one token as llama.cpp caches it (`special = true`).
pub(crate) fn piece_for_cache(kind: TokenizerKind, token: &TokenData) -> Vec<u8> {
    let attr = token.attr;
    let text = token.text.as_str();
    if attr & (ATTR_UNKNOWN | ATTR_CONTROL | ATTR_USER_DEFINED) != 0 {
        return text.as_bytes().to_vec();
    }
    match kind {
        TokenizerKind::Spm => {
            if attr & ATTR_NORMAL != 0 {
                text.replace('\u{2581}', " ").into_bytes()
            } else if attr & ATTR_BYTE != 0 {
                vec![spm_byte_value(text)]
            } else {
                Vec::new()
            }
        }
        TokenizerKind::Bpe => {
            if attr & ATTR_NORMAL != 0 {
                decode_byte_level(text)
            } else {
                Vec::new()
            }
        }
    }
}

/// `<0xXX>` -> XX, read like llama.cpp's `strtol(text.substr(3, 2), 16)`.
fn spm_byte_value(text: &str) -> u8 {
    let digits: String = text
        .chars()
        .skip(3)
        .take(2)
        .take_while(char::is_ascii_hexdigit)
        .collect();
    u8::from_str_radix(&digits, 16).unwrap_or(0)
}

/// llama.cpp's `llama_decode_text`: GPT-2 stand-in characters back to raw bytes.
fn decode_byte_level(text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    for c in text.chars() {
        match unicode::char_to_byte(c) {
            Some(b) => out.push(b),
            None => {
                out.extend_from_slice(b"[UNK_BYTE_0x");
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    out.extend_from_slice(format!("{b:02x}").as_bytes());
                }
                out.extend_from_slice(text.as_bytes());
                out.push(b']');
            }
        }
    }
    out
}

/// `llama_detokenize` into bytes.
pub(crate) fn detokenize(
    tok: &Tokenizer,
    ids: &[u32],
    remove_special: bool,
    unparse_special: bool,
) -> Vec<u8> {
    let mut ids = ids;
    let mut remove_space = tok.add_space_prefix;
    if remove_special
        && tok.add_bos
        && let Some((&first, rest)) = ids.split_first()
        && Some(first) == tok.special.bos
    {
        remove_space = false;
        ids = rest;
    }
    if remove_special
        && tok.add_eos
        && let Some((&last, rest)) = ids.split_last()
        && Some(last) == tok.special.eos
    {
        ids = rest;
    }
    let mut text = Vec::new();
    for &id in ids {
        let piece = tok.piece(id, unparse_special);
        let piece = if remove_space {
            piece.strip_prefix(b" ").unwrap_or(piece)
        } else {
            piece
        };
        remove_space = false;
        text.extend_from_slice(piece);
    }
    if tok.clean_spaces {
        clean_spaces(&mut text);
    }
    text
}

/// llama.cpp's three `clean_spaces` passes, index for index.
fn clean_spaces(text: &mut Vec<u8>) {
    // Pass 1: " ?", " !", " .", " ," lose the space.
    let n = text.len();
    let mut total = usize::from(n > 0);
    for i in 1..n {
        let x = text[i];
        if text[i - 1] == b' ' && matches!(x, b'?' | b'!' | b'.' | b',') {
            total -= 1;
        }
        text[total] = x;
        total += 1;
    }
    text.truncate(total);

    // Pass 2: a single apostrophe between spaces loses both spaces.
    let n = text.len();
    let mut total = usize::from(n > 0);
    let mut i = 1;
    while i < n {
        let x = text[i];
        if x == b'\'' && i + 1 < n && text[i - 1] == b' ' && text[i + 1] == b' ' {
            total -= 1;
            i += 1;
            text[i] = 0;
        }
        text[total] = x;
        total += 1;
        i += 1;
    }
    text.truncate(total);

    // Pass 3: " 's", " 'm", " 're", " 've" lose the space.
    let n = text.len();
    let mut total = usize::from(n > 0);
    for i in 1..n {
        let x = text[i];
        if text[i - 1] == b' ' && x == b'\'' && i + 1 < n {
            let x1 = text[i + 1];
            let re_ve = i + 2 < n && matches!(x1, b'r' | b'v') && text[i + 2] == b'e';
            if x1 == b's' || x1 == b'm' || re_ve {
                total -= 1;
            }
        }
        text[total] = x;
        total += 1;
    }
    text.truncate(total);
}

/// Incremental decoding for streaming: feed ids one at a time, get back the text that is
/// complete so far. An incomplete UTF-8 sequence at the end is held back until the bytes that
/// finish it arrive; invalid bytes become U+FFFD exactly where `String::from_utf8_lossy` would
/// put them, so the concatenated output equals a lossy decode of all the pieces.
///
/// The output is the concatenation of `token_to_piece(id, special)` — `special` is true by
/// default, as in llama.cpp's generation examples (see [`StreamDecoder::special`]); with
/// [`StreamDecoder::strip_leading_space`] the first piece loses one leading space, as
/// [`Tokenizer::decode`] does for SentencePiece vocabularies. `clean_spaces` (BPE) is not applied.
#[derive(Debug)]
pub struct StreamDecoder<'a> {
    tok: &'a Tokenizer,
    special: bool,
    strip_first: bool,
    utf8: Utf8Buf,
}

impl<'a> StreamDecoder<'a> {
    /// A decoder that prints control tokens' text (`special = true`), like llama.cpp's
    /// generation examples do.
    pub fn new(tok: &'a Tokenizer) -> Self {
        Self {
            tok,
            special: true,
            strip_first: false,
            utf8: Utf8Buf::default(),
        }
    }

    /// Whether control and unknown tokens print their text (`token_to_piece`'s `special`).
    pub fn special(mut self, yes: bool) -> Self {
        self.special = yes;
        self
    }

    /// Strip one leading space from the first piece when the vocabulary adds a space prefix
    /// (what `decode` does); use it when streaming a text from its start.
    pub fn strip_leading_space(mut self, yes: bool) -> Self {
        self.strip_first = yes && self.tok.add_space_prefix;
        self
    }

    /// Adds one token; returns the newly completed text (possibly empty).
    pub fn push(&mut self, id: u32) -> String {
        let piece = self.tok.piece(id, self.special);
        let piece = if self.strip_first {
            piece.strip_prefix(b" ").unwrap_or(piece)
        } else {
            piece
        };
        self.strip_first = false;
        self.utf8.push(piece)
    }

    /// Flushes whatever is held back (an unfinished sequence becomes U+FFFD).
    pub fn finish(&mut self) -> String {
        self.utf8.finish()
    }
}
