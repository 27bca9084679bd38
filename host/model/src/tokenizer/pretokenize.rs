//! BPE pre-tokenization: llama.cpp's `unicode_regex_split`, per `tokenizer.ggml.pre`.
//!
//! Each pre-tokenizer is a list of regexes applied in turn, each one splitting the pieces the
//! previous one left. The GPT-2 and Llama-3 expressions use llama.cpp's hand-written splitters;
//! the others run on a "collapsed" text where every non-ASCII codepoint is replaced by a stand-in
//! for its class, exactly as llama.cpp does before it hands them to `std::regex`.

use super::TokenizerError;
use super::unicode::{self, LETTER, NUMBER, PUNCTUATION};
use fancy_regex::Regex;

mod splitters;
#[cfg(test)]
mod tests;

use splitters::{split_gpt2, split_llama3};

const GPT2: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)";
const LLAMA3: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const LLAMA3_ORIGINAL: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const QWEN2: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const BLOOM: &str = " ?[^(\\s|.,!?…。，、।۔،)]+";
const TEKKEN: &str = r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// How a `tokenizer.ggml.pre` name configures the BPE tokenizer (llama.cpp's `llama_vocab::load`).
#[derive(Debug, Clone)]
pub(crate) struct PreConfig {
    pub regexes: Vec<&'static str>,
    pub ignore_merges: bool,
    /// Whether the pre-tokenizer turns `add_bos` on by default.
    pub add_bos: bool,
    pub clean_spaces: bool,
    /// chatglm-bpe has no BOS.
    pub no_bos: bool,
}

/// The configuration for a pre-tokenizer name; `None` (key absent) means "default".
pub(crate) fn pre_config(name: Option<&str>) -> Result<PreConfig, TokenizerError> {
    let mut cfg = PreConfig {
        regexes: Vec::new(),
        ignore_merges: false,
        add_bos: false,
        clean_spaces: true,
        no_bos: false,
    };
    let default = vec![r"[\p{P}\$\+<=>\^~\|]+", GPT2, r"\p{N}+", "[0-9][0-9][0-9]"];
    let starcoder = vec![r"\p{N}", GPT2];
    cfg.regexes = match name.unwrap_or("default") {
        "default" => default,
        "llama3" | "llama-v3" | "llama-bpe" | "falcon3" => {
            cfg.ignore_merges = true;
            cfg.add_bos = true;
            vec![LLAMA3]
        }
        "dbrx" | "smaug-bpe" => vec![LLAMA3],
        "deepseek-coder" => {
            cfg.clean_spaces = false;
            vec![
                "[\r\n]",
                r"\s?\p{L}+",
                r"\s?\p{P}+",
                "[一-龥ࠀ-一가-퟿]+",
                r"\p{N}",
            ]
        }
        "falcon" => vec![r"[\p{P}\$\+<=>\^~\|`]+", GPT2, "[0-9][0-9][0-9]"],
        "starcoder" | "refact" | "codeshell" | "exaone" | "minerva-7b" => starcoder,
        "command-r" | "smollm" => {
            cfg.clean_spaces = false;
            starcoder
        }
        "gpt-2" | "phi-2" | "jina-es" | "jina-de" | "gigachat" | "jina-v1-en" | "jina-v2-es"
        | "jina-v2-de" | "jina-v2-code" | "roberta-bpe" | "mpt" | "olmo" | "jais" => vec![GPT2],
        "qwen2" => {
            cfg.clean_spaces = false;
            vec![QWEN2]
        }
        "stablelm2" | "megrez" => vec![QWEN2],
        "poro-chat" => {
            cfg.clean_spaces = false;
            vec![BLOOM]
        }
        "bloom" | "gpt3-finnish" => vec![BLOOM],
        "chatglm-bpe" => {
            cfg.no_bos = true;
            vec![LLAMA3]
        }
        "viking" => {
            cfg.clean_spaces = false;
            vec![BLOOM, r"\p{N}"]
        }
        "tekken" => {
            cfg.clean_spaces = false;
            cfg.ignore_merges = true;
            cfg.add_bos = true;
            vec![TEKKEN]
        }
        "chameleon" => {
            cfg.add_bos = true;
            cfg.clean_spaces = false;
            vec![
                "<sentinel:[0-9]+>",
                "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
                "([\\t\\n]|    |  )",
                r"\p{N}",
                r"[\p{P}!-/:-@\[-`{-~]",
                GPT2,
            ]
        }
        other => return Err(TokenizerError::UnknownPreTokenizer(other.to_string())),
    };
    Ok(cfg)
}

/// One compiled splitting step.
#[derive(Debug)]
enum Splitter {
    Gpt2,
    Llama3,
    /// A regex over the collapsed text (it used `\p{..}` classes).
    Collapsed(Regex),
    /// A regex over the text with non-ASCII whitespace turned into `\x0B`.
    Plain(Regex),
}

/// A compiled pre-tokenizer.
#[derive(Debug)]
pub(crate) struct PreTokenizer {
    steps: Vec<Splitter>,
}

const STAND_IN_OTHER: char = '\u{E0D0}';
const STAND_IN_NUMBER: char = '\u{E0D1}';
const STAND_IN_LETTER: char = '\u{E0D2}';
const STAND_IN_PUNCT: char = '\u{E0D3}';

fn category_class(cat: &str) -> Option<&'static str> {
    match cat {
        r"\p{N}" => Some(r"\x{E0D1}0-9"),
        r"\p{L}" => Some(r"\x{E0D2}A-Za-z"),
        r"\p{P}" => Some(r"\x{E0D3}!-#%-*,-/:-;?-@\[-\]_\{\}"),
        _ => None,
    }
}

/// Rewrites `\p{N}`, `\p{L}` and `\p{P}` into classes over the collapsed text, like llama.cpp.
fn collapse_regex(expr: &str) -> Result<String, TokenizerError> {
    if !expr.is_ascii() {
        return Err(TokenizerError::Regex(format!(
            "{expr:?}: unicode categories together with non-ASCII characters are not supported"
        )));
    }
    let bytes = expr.as_bytes();
    let mut out = String::with_capacity(expr.len() * 2);
    let mut inside = false;
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c == b'[' && (i == 0 || bytes[i - 1] != b'\\') {
            out.push('[');
            inside = true;
            i += 1;
            continue;
        }
        if inside && c == b']' && bytes[i - 1] != b'\\' {
            out.push(']');
            inside = false;
            i += 1;
            continue;
        }
        if c == b'\\'
            && i + 4 < bytes.len()
            && bytes[i + 1] == b'p'
            && bytes[i + 2] == b'{'
            && bytes[i + 4] == b'}'
            && let Some(class) = category_class(&expr[i..i + 5])
        {
            if !inside {
                out.push('[');
            }
            out.push_str(class);
            if !inside {
                out.push(']');
            }
            i += 5;
            continue;
        }
        out.push(c as char);
        i += 1;
    }
    Ok(out)
}

fn uses_categories(expr: &str) -> bool {
    [r"\p{N}", r"\p{L}", r"\p{P}"]
        .iter()
        .any(|c| expr.contains(c))
}

fn compile(pattern: &str) -> Result<Regex, TokenizerError> {
    Regex::new(pattern).map_err(|e| TokenizerError::Regex(format!("{pattern:?}: {e}")))
}

impl PreTokenizer {
    pub(crate) fn new(regexes: &[&str]) -> Result<Self, TokenizerError> {
        let steps = regexes
            .iter()
            .map(|&expr| {
                Ok(if expr == GPT2 {
                    Splitter::Gpt2
                } else if expr == LLAMA3 || expr == LLAMA3_ORIGINAL {
                    Splitter::Llama3
                } else if uses_categories(expr) {
                    Splitter::Collapsed(compile(&collapse_regex(expr)?)?)
                } else {
                    Splitter::Plain(compile(expr)?)
                })
            })
            .collect::<Result<Vec<_>, TokenizerError>>()?;
        Ok(Self { steps })
    }

    /// Splits `text` into words, each already mapped through GPT-2's byte-to-char table.
    pub(crate) fn split(&self, text: &str) -> Vec<String> {
        let cpts: Vec<char> = text.chars().collect();
        let mut offsets = vec![cpts.len()];
        for step in &self.steps {
            offsets = match step {
                Splitter::Gpt2 => split_gpt2(&cpts, &offsets),
                Splitter::Llama3 => split_llama3(&cpts, &offsets),
                Splitter::Collapsed(re) => split_regex(re, &collapsed(&cpts), &offsets),
                Splitter::Plain(re) => split_regex(re, &plain(&cpts), &offsets),
            };
        }
        let mut words = Vec::with_capacity(offsets.len());
        let mut start = 0;
        let mut buf = [0u8; 4];
        for len in offsets {
            let mut word = String::new();
            for &c in &cpts[start..start + len] {
                for &b in c.encode_utf8(&mut buf).as_bytes() {
                    word.push(unicode::byte_to_char(b));
                }
            }
            start += len;
            words.push(word);
        }
        words
    }
}

fn collapsed(cpts: &[char]) -> Vec<char> {
    cpts.iter()
        .map(|&c| {
            if c.is_ascii() {
                return c;
            }
            let f = unicode::flags(c);
            if f & unicode::WHITESPACE != 0 {
                '\x0B'
            } else {
                match f & unicode::CATEGORY_MASK {
                    NUMBER => STAND_IN_NUMBER,
                    LETTER => STAND_IN_LETTER,
                    PUNCTUATION => STAND_IN_PUNCT,
                    _ => STAND_IN_OTHER,
                }
            }
        })
        .collect()
}

fn plain(cpts: &[char]) -> Vec<char> {
    cpts.iter()
        .map(|&c| {
            if !c.is_ascii() && unicode::is_whitespace(c) {
                '\x0B'
            } else {
                c
            }
        })
        .collect()
}

/// `unicode_regex_split_stl`: matches and the gaps between them become pieces, per segment.
fn split_regex(re: &Regex, chars: &[char], offsets: &[usize]) -> Vec<usize> {
    let mut out = Vec::with_capacity(offsets.len());
    let mut start = 0;
    for &len in offsets {
        let segment: String = chars[start..start + len].iter().collect();
        // Byte offset of each char in `segment`, to turn match bounds into codepoint counts.
        let char_at: Vec<usize> = segment.char_indices().map(|(i, _)| i).collect();
        let to_cpt = |byte: usize| char_at.partition_point(|&b| b < byte);
        let mut last = 0;
        for m in re.find_iter(&segment).flatten() {
            let (s, e) = (to_cpt(m.start()), to_cpt(m.end()));
            if s > last {
                out.push(s - last);
            }
            if e > s {
                out.push(e - s);
            }
            last = e;
        }
        if last < len {
            out.push(len - last);
        }
        start += len;
    }
    out
}
