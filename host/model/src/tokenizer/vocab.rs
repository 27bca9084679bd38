//! The vocabulary: token texts, scores and attributes, the text -> id map, special token ids and
//! the tokenizer flags, read from GGUF metadata the way llama.cpp's `llama_vocab::load` does.

use super::TokenizerError;
use crate::gguf::GgufFile;
use std::collections::HashMap;

// Token attributes (llama.h `llama_token_attr`).
pub(crate) const ATTR_UNKNOWN: u16 = 1 << 0;
pub(crate) const ATTR_UNUSED: u16 = 1 << 1;
pub(crate) const ATTR_NORMAL: u16 = 1 << 2;
pub(crate) const ATTR_CONTROL: u16 = 1 << 3;
pub(crate) const ATTR_USER_DEFINED: u16 = 1 << 4;
pub(crate) const ATTR_BYTE: u16 = 1 << 5;
pub(crate) const ATTR_LSTRIP: u16 = 1 << 7;
pub(crate) const ATTR_RSTRIP: u16 = 1 << 8;

/// `tokenizer.ggml.token_type` values (GGUF) to attributes.
fn attr_from_type(t: i32) -> u16 {
    match t {
        1 => ATTR_NORMAL,
        2 => ATTR_UNKNOWN,
        3 => ATTR_CONTROL,
        4 => ATTR_USER_DEFINED,
        5 => ATTR_UNUSED,
        6 => ATTR_BYTE,
        _ => 0,
    }
}

#[derive(Debug, Clone)]
pub(crate) struct TokenData {
    pub text: String,
    pub score: f32,
    pub attr: u16,
}

/// Token table plus lookup by text.
#[derive(Debug)]
pub(crate) struct Vocab {
    pub tokens: Vec<TokenData>,
    pub by_text: HashMap<String, u32>,
}

impl Vocab {
    /// Reads tokens, scores and token types. Empty texts become `[EMPTY_i]`, as in llama.cpp.
    pub(crate) fn from_gguf(f: &GgufFile) -> Result<Self, TokenizerError> {
        const TOKENS: &str = "tokenizer.ggml.tokens";
        const SCORES: &str = "tokenizer.ggml.scores";
        const TYPES: &str = "tokenizer.ggml.token_type";
        let texts = f
            .get_array(TOKENS)
            .ok_or(TokenizerError::MissingKey(TOKENS))?
            .as_strings()
            .ok_or(TokenizerError::WrongType {
                key: TOKENS,
                expected: "array of strings",
            })?;
        let n = texts.len();
        if n == 0 {
            return Err(TokenizerError::EmptyVocab);
        }
        let scores = match f.get_array(SCORES) {
            None => None,
            Some(a) => {
                let s = a.as_f32().ok_or(TokenizerError::WrongType {
                    key: SCORES,
                    expected: "array of f32",
                })?;
                check_len(SCORES, n, s.len())?;
                Some(s)
            }
        };
        let types = match f.get_array(TYPES) {
            None => None,
            Some(a) => {
                let t = a.as_i32().ok_or(TokenizerError::WrongType {
                    key: TYPES,
                    expected: "array of i32",
                })?;
                check_len(TYPES, n, t.len())?;
                Some(t)
            }
        };
        let mut tokens = Vec::with_capacity(n);
        let mut by_text = HashMap::with_capacity(n);
        for (i, text) in texts.iter().enumerate() {
            let text = if text.is_empty() {
                format!("[EMPTY_{i}]")
            } else {
                text.clone()
            };
            if let Some(first) = by_text.insert(text.clone(), i as u32) {
                return Err(TokenizerError::DuplicateToken {
                    text,
                    first,
                    second: i as u32,
                });
            }
            tokens.push(TokenData {
                text,
                score: scores.map_or(0.0, |s| s[i]),
                attr: types.map_or(ATTR_NORMAL, |t| attr_from_type(t[i])),
            });
        }
        Ok(Self { tokens, by_text })
    }

    pub(crate) fn len(&self) -> usize {
        self.tokens.len()
    }

    pub(crate) fn find(&self, text: &str) -> Option<u32> {
        self.by_text.get(text).copied()
    }

    pub(crate) fn attr(&self, id: u32) -> u16 {
        self.tokens.get(id as usize).map_or(0, |t| t.attr)
    }

    pub(crate) fn set_attr(&mut self, id: u32, attr: u16) {
        if let Some(t) = self.tokens.get_mut(id as usize) {
            t.attr = attr;
        }
    }

    /// Turns an attribute bit on or off for the token with this text, if there is one.
    pub(crate) fn set_attr_bit_by_text(&mut self, text: &str, bit: u16, on: bool) {
        if let Some(id) = self.find(text) {
            let a = self.attr(id);
            self.set_attr(id, if on { a | bit } else { a & !bit });
        }
    }

    /// SPM byte fallback: `<0xXX>`, else the byte itself as a one-character token.
    pub(crate) fn byte_token_spm(&self, b: u8) -> Option<u32> {
        self.find(&format!("<0x{b:02X}>")).or_else(|| {
            if b.is_ascii() {
                self.find(&char::from(b).to_string())
            } else {
                None
            }
        })
    }
}

fn check_len(key: &'static str, expected: usize, got: usize) -> Result<(), TokenizerError> {
    if expected == got {
        Ok(())
    } else {
        Err(TokenizerError::LengthMismatch { key, expected, got })
    }
}

fn read_id(
    f: &GgufFile,
    key: &'static str,
    n_vocab: usize,
    slot: &mut Option<u32>,
) -> Result<(), TokenizerError> {
    if let Some(id) = f.get_u32(key) {
        if id as usize >= n_vocab {
            return Err(TokenizerError::BadTokenId { key, id, n_vocab });
        }
        *slot = Some(id);
    }
    Ok(())
}

/// Special token ids read from metadata, with llama.cpp's defaults and text heuristics applied.
#[derive(Debug, Default, Clone)]
pub(crate) struct SpecialIds {
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    pub eot: Option<u32>,
    pub eom: Option<u32>,
    pub unk: Option<u32>,
    pub sep: Option<u32>,
    pub pad: Option<u32>,
    pub mask: Option<u32>,
    pub fim_pre: Option<u32>,
    pub fim_suf: Option<u32>,
    pub fim_mid: Option<u32>,
    pub fim_pad: Option<u32>,
    pub fim_rep: Option<u32>,
    pub fim_sep: Option<u32>,
}

impl SpecialIds {
    /// Overrides the defaults with ids from metadata; an id past the vocabulary is an error.
    pub(crate) fn read(&mut self, f: &GgufFile, n_vocab: usize) -> Result<(), TokenizerError> {
        let keys: [(&'static str, &mut Option<u32>); 14] = [
            ("tokenizer.ggml.bos_token_id", &mut self.bos),
            ("tokenizer.ggml.eos_token_id", &mut self.eos),
            ("tokenizer.ggml.eot_token_id", &mut self.eot),
            ("tokenizer.ggml.eom_token_id", &mut self.eom),
            ("tokenizer.ggml.unknown_token_id", &mut self.unk),
            ("tokenizer.ggml.seperator_token_id", &mut self.sep),
            ("tokenizer.ggml.padding_token_id", &mut self.pad),
            ("tokenizer.ggml.mask_token_id", &mut self.mask),
            ("tokenizer.ggml.fim_pre_token_id", &mut self.fim_pre),
            ("tokenizer.ggml.fim_suf_token_id", &mut self.fim_suf),
            ("tokenizer.ggml.fim_mid_token_id", &mut self.fim_mid),
            ("tokenizer.ggml.fim_pad_token_id", &mut self.fim_pad),
            ("tokenizer.ggml.fim_rep_token_id", &mut self.fim_rep),
            ("tokenizer.ggml.fim_sep_token_id", &mut self.fim_sep),
        ];
        for (key, slot) in keys {
            read_id(f, key, n_vocab, slot)?;
        }
        // Deprecated names of the FIM ids; llama.cpp reads them after the new ones.
        read_id(
            f,
            "tokenizer.ggml.prefix_token_id",
            n_vocab,
            &mut self.fim_pre,
        )?;
        read_id(
            f,
            "tokenizer.ggml.suffix_token_id",
            n_vocab,
            &mut self.fim_suf,
        )?;
        read_id(
            f,
            "tokenizer.ggml.middle_token_id",
            n_vocab,
            &mut self.fim_mid,
        )?;
        Ok(())
    }

    /// llama.cpp's auto-detection of EOT/EOM/FIM tokens by their text (the lists of the
    /// vendored Oct 2026 tree). A token found gains the control attribute.
    pub(crate) fn detect_by_text(&mut self, vocab: &mut Vocab) {
        let rules: [(&mut Option<u32>, &[&str]); 8] = [
            (
                &mut self.eot,
                &[
                    "<|eot_id|>",
                    "<|im_end|>",
                    "<|end|>",
                    "<end_of_turn>",
                    "<|endoftext|>",
                    "<|end_of_text|>",
                    "<EOT>",
                    "_<EOT>",
                    "[EOT]",
                    "<｜end▁of▁sentence｜>",
                    "<end_of_utterance>",
                ],
            ),
            (&mut self.eom, &["<|eom_id|>"]),
            (
                &mut self.fim_pre,
                &[
                    "<|fim_prefix|>",
                    "<fim-prefix>",
                    "<fim_prefix>",
                    "<｜fim▁begin｜>",
                    "<PRE>",
                    "▁<PRE>",
                    "<|code_prefix|>",
                    "<|prefix|>",
                ],
            ),
            (
                &mut self.fim_suf,
                &[
                    "<|fim_suffix|>",
                    "<fim-suffix>",
                    "<fim_suffix>",
                    "<｜fim▁hole｜>",
                    "<SUF>",
                    "▁<SUF>",
                    "<|code_suffix|>",
                    "<|suffix|>",
                ],
            ),
            (
                &mut self.fim_mid,
                &[
                    "<|fim_middle|>",
                    "<fim-middle>",
                    "<fim_middle>",
                    "<｜fim▁end｜>",
                    "<MID>",
                    "▁<MID>",
                    "<|code_middle|>",
                    "<|middle|>",
                ],
            ),
            (
                &mut self.fim_pad,
                &["<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"],
            ),
            (
                &mut self.fim_rep,
                &[
                    "<|fim_repo|>",
                    "<|repo_name|>",
                    "<fim-repo>",
                    "<REPO>",
                    "<reponame>",
                ],
            ),
            (&mut self.fim_sep, &["<|file_sep|>"]),
        ];
        for (slot, texts) in rules {
            if slot.is_some() {
                continue;
            }
            let found = texts.iter().filter_map(|t| vocab.find(t)).min();
            if let Some(id) = found {
                *slot = Some(id);
                vocab.set_attr(id, vocab.attr(id) | ATTR_CONTROL);
            }
        }
    }

    /// The end-of-generation set: FIM pad/repo/sep, the usual end texts, EOS, EOT and EOM.
    /// Tokens with an end text gain the control attribute. Also applies llama.cpp's fix-ups
    /// that go with it: gpt-oss's channel tokens are user-defined, `<|end|>` is not an end
    /// where `<|return|>`/`<|call|>` exist, and `</s>` is a normal token beside Gemma 4's or
    /// PLaMo's own end markers.
    pub(crate) fn eog_set(&self, vocab: &mut Vocab) -> Vec<u32> {
        let mut eog: Vec<u32> = [self.fim_pad, self.fim_rep, self.fim_sep]
            .into_iter()
            .flatten()
            .collect();
        for text in [
            "<|eot_id|>",
            "<|im_end|>",
            "<|end|>",
            "<|return|>",
            "<|call|>",
            "<|flush|>",
            "<|calls|>",
            "<end_of_turn>",
            "<|endoftext|>",
            "</s>",
            "<|eom_id|>",
            "<EOT>",
            "_<EOT>",
            "[EOT]",
            "[EOS]",
            "<|end_of_text|>",
            "<end_of_utterance>",
            "<eos>",
            "<turn|>",
            "<|tool_response>",
            "<｜end▁of▁sentence｜>",
            "[e~[",
        ] {
            if let Some(id) = vocab.find(text) {
                eog.push(id);
                vocab.set_attr(id, vocab.attr(id) | ATTR_CONTROL);
            }
        }
        for text in ["<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"] {
            if let Some(id) = vocab.find(text) {
                vocab.set_attr(id, ATTR_USER_DEFINED);
            }
        }
        eog.extend([self.eos, self.eot, self.eom].into_iter().flatten());
        eog.sort_unstable();
        eog.dedup();
        let has = |vocab: &Vocab, eog: &[u32], texts: &[&str]| {
            eog.iter()
                .any(|&id| texts.contains(&vocab.tokens[id as usize].text.as_str()))
        };
        let end = vocab.find("<|end|>").filter(|id| eog.contains(id));
        if let Some(end) = end {
            let call = has(vocab, &eog, &["<|call|>", "<|calls|>"]);
            if call && has(vocab, &eog, &["<|return|>", "<|flush|>"]) {
                eog.retain(|&id| id != end);
                vocab.set_attr(end, ATTR_USER_DEFINED);
            }
        }
        let s = vocab.find("</s>").filter(|id| eog.contains(id));
        if let Some(s) = s
            && has(vocab, &eog, &["<|tool_response>", "<|plamo:eos|>"])
        {
            eog.retain(|&id| id != s);
            vocab.set_attr(s, ATTR_NORMAL);
        }
        eog
    }
}
