//! Unicode codepoint classes as llama.cpp's `unicode.cpp` sees them, and GPT-2's byte <-> char map.
//!
//! llama.cpp tags every codepoint with flags generated from Python's `regex` module
//! (`\p{N}`, `\p{L}`, `\p{Z}`, `\p{M}`, `\p{P}`, `\p{S}`, `\p{C}` and `\s`); unassigned codepoints
//! count as control. We build the same table once, from the Unicode classes of the regex engine.

use std::collections::HashMap;
use std::sync::LazyLock;

/// `\p{N}`
pub(crate) const NUMBER: u8 = 1 << 0;
/// `\p{L}`
pub(crate) const LETTER: u8 = 1 << 1;
/// `\p{Z}`
pub(crate) const SEPARATOR: u8 = 1 << 2;
/// `\p{M}`
pub(crate) const MARK: u8 = 1 << 3;
/// `\p{P}`
pub(crate) const PUNCTUATION: u8 = 1 << 4;
/// `\p{S}`
pub(crate) const SYMBOL: u8 = 1 << 5;
/// `\p{C}`, including unassigned codepoints
pub(crate) const CONTROL: u8 = 1 << 6;
/// `\s` (Unicode White_Space)
pub(crate) const WHITESPACE: u8 = 1 << 7;

/// The category bits (everything but whitespace).
pub(crate) const CATEGORY_MASK: u8 = !WHITESPACE;

const MAX_CODEPOINT: usize = 0x11_0000;

static FLAGS: LazyLock<Vec<u8>> = LazyLock::new(build_flags);

fn build_flags() -> Vec<u8> {
    let mut table = vec![0u8; MAX_CODEPOINT];
    let all: String = (0..MAX_CODEPOINT as u32)
        .filter_map(char::from_u32)
        .collect();
    let classes: [(&str, u8); 8] = [
        (r"\p{N}+", NUMBER),
        (r"\p{L}+", LETTER),
        (r"\p{Z}+", SEPARATOR),
        (r"\p{M}+", MARK),
        (r"\p{P}+", PUNCTUATION),
        (r"\p{S}+", SYMBOL),
        (r"\p{C}+", CONTROL),
        (r"\s+", WHITESPACE),
    ];
    for (pattern, bit) in classes {
        let re = fancy_regex::Regex::new(pattern).expect("static unicode class regex");
        for m in re.find_iter(&all).flatten() {
            for c in m.as_str().chars() {
                table[c as usize] |= bit;
            }
        }
    }
    // Surrogates and anything the engine leaves unclassified are "control", as in llama.cpp.
    for flags in table.iter_mut() {
        if *flags & CATEGORY_MASK == 0 {
            *flags |= CONTROL;
        }
    }
    table
}

/// The flags of one codepoint (0 for values past U+10FFFF, which never occur in a `char`).
pub(crate) fn flags(c: char) -> u8 {
    FLAGS.get(c as usize).copied().unwrap_or(0)
}

pub(crate) fn is_whitespace(c: char) -> bool {
    flags(c) & WHITESPACE != 0
}

struct ByteMap {
    to_char: [char; 256],
    to_byte: HashMap<char, u8>,
}

static BYTE_MAP: LazyLock<ByteMap> = LazyLock::new(|| {
    let mut to_char = ['\0'; 256];
    let mut assigned = [false; 256];
    for b in (0x21..=0x7E).chain(0xA1..=0xAC).chain(0xAE..=0xFF) {
        to_char[b] = char::from(b as u8);
        assigned[b] = true;
    }
    let mut n = 0u32;
    for b in 0..256 {
        if !assigned[b] {
            to_char[b] = char::from_u32(256 + n).expect("valid codepoint");
            n += 1;
        }
    }
    let to_byte = (0..256).map(|b| (to_char[b], b as u8)).collect();
    ByteMap { to_char, to_byte }
});

/// GPT-2's printable stand-in for a raw byte.
pub(crate) fn byte_to_char(b: u8) -> char {
    BYTE_MAP.to_char[b as usize]
}

/// The raw byte behind one of GPT-2's stand-in characters.
pub(crate) fn char_to_byte(c: char) -> Option<u8> {
    BYTE_MAP.to_byte.get(&c).copied()
}
