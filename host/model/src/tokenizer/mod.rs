//! Tokenizers built from GGUF metadata — SentencePiece (`llama`) and byte-level BPE (`gpt2`) —
//! matching llama.cpp's `llama_tokenize`, `llama_token_to_piece` and `llama_detokenize`.

mod bpe;
mod decode;
mod pretokenize;
mod special;
mod spm;
mod unicode;
mod utf8;
mod vocab;

pub use decode::StreamDecoder;
pub use utf8::Utf8Buf;

use crate::gguf::GgufFile;
use bpe::BpeModel;
use special::Fragment;
use vocab::{
    ATTR_CONTROL, ATTR_LSTRIP, ATTR_RSTRIP, ATTR_UNKNOWN, ATTR_USER_DEFINED, SpecialIds, Vocab,
};

/// Which tokenization algorithm a vocabulary uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenizerKind {
    /// SentencePiece with byte fallback (`tokenizer.ggml.model = "llama"`).
    Spm,
    /// Byte-level BPE (`tokenizer.ggml.model = "gpt2"`).
    Bpe,
}

/// Why a tokenizer could not be built from a GGUF file.
#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    #[error("GGUF metadata key `{0}` is missing")]
    MissingKey(&'static str),
    #[error("GGUF metadata key `{key}` is not {expected}")]
    WrongType {
        key: &'static str,
        expected: &'static str,
    },
    #[error("GGUF metadata key `{key}` has {got} entries, expected {expected} (one per token)")]
    LengthMismatch {
        key: &'static str,
        expected: usize,
        got: usize,
    },
    #[error("GGUF metadata key `{key}` = {id} is not a token id (vocabulary has {n_vocab} tokens)")]
    BadTokenId {
        key: &'static str,
        id: u32,
        n_vocab: usize,
    },
    #[error("the vocabulary has no tokens")]
    EmptyVocab,
    #[error("token text {text:?} appears twice (ids {first} and {second})")]
    DuplicateToken {
        text: String,
        first: u32,
        second: u32,
    },
    #[error("unsupported tokenizer model `{0}` (supported: llama, gpt2)")]
    UnsupportedModel(String),
    #[error("unknown pre-tokenizer type `{0}`")]
    UnknownPreTokenizer(String),
    #[error("pre-tokenizer regex {0}")]
    Regex(String),
}

#[derive(Debug)]
enum Model {
    Spm,
    Bpe(BpeModel),
}

/// A tokenizer loaded from GGUF metadata.
#[derive(Debug)]
pub struct Tokenizer {
    vocab: Vocab,
    model: Model,
    special: SpecialIds,
    add_bos: bool,
    add_eos: bool,
    add_space_prefix: bool,
    clean_spaces: bool,
    /// End-of-generation ids, sorted.
    eog: Vec<u32>,
    /// Control, user-defined and unknown tokens, longest text first.
    special_tokens: Vec<u32>,
    /// `token_to_piece(id, special = true)` for every id.
    pieces: Vec<Vec<u8>>,
}

/// A model's fill-in-the-middle tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fim {
    pub prefix: u32,
    pub suffix: u32,
    pub middle: u32,
}

impl Tokenizer {
    /// Builds the tokenizer from `tokenizer.ggml.*` metadata, following llama.cpp's loader.
    pub fn from_gguf(f: &GgufFile) -> Result<Tokenizer, TokenizerError> {
        const MODEL: &str = "tokenizer.ggml.model";
        const PRE: &str = "tokenizer.ggml.pre";
        const MERGES: &str = "tokenizer.ggml.merges";
        let model_name = f.get_str(MODEL).ok_or(TokenizerError::MissingKey(MODEL))?;
        let mut vocab = Vocab::from_gguf(f)?;
        let n_vocab = vocab.len();
        let in_vocab = |id: u32| ((id as usize) < n_vocab).then_some(id);

        let mut special = SpecialIds::default();
        let (model, mut add_bos, add_space_prefix, clean_spaces) = match model_name {
            "llama" => {
                special.bos = in_vocab(1);
                special.eos = in_vocab(2);
                special.unk = in_vocab(0);
                (Model::Spm, true, true, false)
            }
            "gpt2" => {
                let cfg = pretokenize::pre_config(f.get_str(PRE))?;
                let merges = f
                    .get_array(MERGES)
                    .ok_or(TokenizerError::MissingKey(MERGES))?
                    .as_strings()
                    .ok_or(TokenizerError::WrongType {
                        key: MERGES,
                        expected: "array of strings",
                    })?;
                let pre = pretokenize::PreTokenizer::new(&cfg.regexes)?;
                if !cfg.no_bos {
                    special.bos = in_vocab(11);
                }
                special.eos = in_vocab(11);
                (
                    Model::Bpe(BpeModel::new(merges, pre, cfg.ignore_merges)),
                    cfg.add_bos,
                    false,
                    cfg.clean_spaces,
                )
            }
            other => return Err(TokenizerError::UnsupportedModel(other.to_string())),
        };
        let add_space_prefix = f
            .get_bool("tokenizer.ggml.add_space_prefix")
            .unwrap_or(add_space_prefix);

        special.read(f, n_vocab)?;
        add_bos = f
            .get_bool("tokenizer.ggml.add_bos_token")
            .unwrap_or(add_bos);
        let add_eos = f.get_bool("tokenizer.ggml.add_eos_token").unwrap_or(false);

        special.detect_by_text(&mut vocab);
        let eog = special.eog_set(&mut vocab);

        let mut special_tokens: Vec<u32> = (0..n_vocab as u32)
            .filter(|&id| vocab.attr(id) & (ATTR_CONTROL | ATTR_USER_DEFINED | ATTR_UNKNOWN) != 0)
            .collect();
        special_tokens.sort_by_key(|&id| std::cmp::Reverse(vocab.tokens[id as usize].text.len()));

        let kind = match model {
            Model::Spm => TokenizerKind::Spm,
            Model::Bpe(_) => TokenizerKind::Bpe,
        };
        let pieces = vocab
            .tokens
            .iter()
            .map(|t| decode::piece_for_cache(kind, t))
            .collect();

        // Per-model token attributes that llama.cpp sets by name.
        let pre_name = f.get_str(PRE).unwrap_or("");
        let model_name = f.get_str("general.name").unwrap_or("").to_ascii_lowercase();
        if ["jina-v2-de", "jina-v2-es", "jina-v2-code"]
            .iter()
            .any(|p| pre_name.contains(p))
        {
            vocab.set_attr_bit_by_text("<mask>", ATTR_LSTRIP, true);
        } else if model_name.contains("phi-3") || model_name.contains("phi3") {
            for &id in &special_tokens {
                vocab.set_attr(id, vocab.attr(id) | ATTR_RSTRIP);
            }
            vocab.set_attr_bit_by_text("</s>", ATTR_RSTRIP, true);
            for text in ["<unk>", "<s>", "<|endoftext|>"] {
                vocab.set_attr_bit_by_text(text, ATTR_RSTRIP, false);
            }
        }

        Ok(Tokenizer {
            vocab,
            model,
            special,
            add_bos,
            add_eos,
            add_space_prefix,
            clean_spaces,
            eog,
            special_tokens,
            pieces,
        })
    }

    /// `llama_tokenize`: text to ids. `add_special` adds BOS/EOS where the vocabulary asks for
    /// them; `parse_special` lets control tokens written in the text (e.g. `<s>`) become tokens.
    /// User-defined tokens are matched either way, as in llama.cpp.
    pub fn encode(&self, text: &str, add_special: bool, parse_special: bool) -> Vec<u32> {
        let fragments = special::partition(text, &self.vocab, &self.special_tokens, parse_special);
        let mut out = Vec::with_capacity(text.len() / 3 + 2);
        if add_special && self.add_bos {
            out.extend(self.special.bos);
        }
        match &self.model {
            Model::Spm => {
                let mut prev_special = true;
                let mut buf = String::new();
                for frag in fragments {
                    match frag {
                        Fragment::Text { start, end } => {
                            buf.clear();
                            if self.add_space_prefix && prev_special {
                                buf.push('\u{2581}');
                            }
                            for c in text[start..end].chars() {
                                buf.push(if c == ' ' { '\u{2581}' } else { c });
                            }
                            spm::tokenize(&self.vocab, &buf, self.special.unk, &mut out);
                            prev_special = false;
                        }
                        Fragment::Token(id) => {
                            out.push(id);
                            prev_special = true;
                        }
                    }
                }
            }
            Model::Bpe(bpe) => {
                for frag in fragments {
                    match frag {
                        Fragment::Text { start, end } => {
                            bpe.tokenize(&self.vocab, &text[start..end], &mut out)
                        }
                        Fragment::Token(id) => out.push(id),
                    }
                }
            }
        }
        if add_special && self.add_eos {
            out.extend(self.special.eos);
        }
        out
    }

    /// The cached piece, or empty for an unknown id or a control/unknown token without `special`
    /// ([`Tokenizer::token_to_piece`] without the copy).
    pub fn piece(&self, id: u32, special: bool) -> &[u8] {
        if !special && self.vocab.attr(id) & (ATTR_UNKNOWN | ATTR_CONTROL) != 0 {
            return &[];
        }
        self.pieces.get(id as usize).map_or(&[], Vec::as_slice)
    }

    /// `llama_token_to_piece(lstrip = 0)`: the bytes of one token, possibly a partial UTF-8
    /// sequence. Control and unknown tokens give their text only with `special`.
    pub fn token_to_piece(&self, id: u32, special: bool) -> Vec<u8> {
        self.piece(id, special).to_vec()
    }

    /// `llama_detokenize`: the bytes of all pieces joined, then decoded (lossy only where the
    /// joined bytes are not UTF-8). For SentencePiece the first piece loses one leading space;
    /// `remove_special` drops a leading BOS / trailing EOS the vocabulary adds itself.
    pub fn decode(&self, ids: &[u32], remove_special: bool, unparse_special: bool) -> String {
        let bytes = decode::detokenize(self, ids, remove_special, unparse_special);
        match String::from_utf8(bytes) {
            Ok(s) => s,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        }
    }

    /// An incremental decoder over this vocabulary (see [`StreamDecoder`]).
    pub fn stream_decoder(&self, special: bool) -> StreamDecoder<'_> {
        StreamDecoder::new(self).special(special)
    }

    pub fn n_vocab(&self) -> usize {
        self.vocab.len()
    }

    pub fn bos(&self) -> Option<u32> {
        self.special.bos
    }

    pub fn eos(&self) -> Option<u32> {
        self.special.eos
    }

    /// End-of-turn token, from metadata or found by its text.
    pub fn eot(&self) -> Option<u32> {
        self.special.eot
    }

    pub fn unk(&self) -> Option<u32> {
        self.special.unk
    }

    pub fn add_bos(&self) -> bool {
        self.add_bos
    }

    /// The fill-in-the-middle tokens (prefix, suffix, middle), when the model has all three
    /// (from metadata, or found by their text as llama.cpp does).
    pub fn fim(&self) -> Option<Fim> {
        Some(Fim {
            prefix: self.special.fim_pre?,
            suffix: self.special.fim_suf?,
            middle: self.special.fim_mid?,
        })
    }

    pub fn add_eos(&self) -> bool {
        self.add_eos
    }

    /// Whether generation stops on this token: EOS, EOT, EOM, FIM pad/repo/sep and tokens such
    /// as `<|im_end|>`, `<|eot_id|>`, `<|endoftext|>` (llama.cpp's `llama_vocab_is_eog`).
    pub fn is_eog(&self, id: u32) -> bool {
        self.eog.binary_search(&id).is_ok()
    }

    /// All end-of-generation ids, sorted.
    pub fn eog_ids(&self) -> &[u32] {
        &self.eog
    }

    pub fn is_control(&self, id: u32) -> bool {
        self.vocab.attr(id) & ATTR_CONTROL != 0
    }

    /// The token's raw vocabulary text (e.g. `▁the`, `Ġthe`, `<0x0A>`).
    pub fn token_text(&self, id: u32) -> Option<&str> {
        self.vocab.tokens.get(id as usize).map(|t| t.text.as_str())
    }

    /// The id of the token whose raw vocabulary text is exactly `text`.
    pub fn find_token(&self, text: &str) -> Option<u32> {
        self.vocab.find(text)
    }

    pub fn kind(&self) -> TokenizerKind {
        match self.model {
            Model::Spm => TokenizerKind::Spm,
            Model::Bpe(_) => TokenizerKind::Bpe,
        }
    }

    /// Whether SentencePiece text gets a leading `▁` (llama.cpp's `add_space_prefix`).
    pub fn add_space_prefix(&self) -> bool {
        self.add_space_prefix
    }
}
