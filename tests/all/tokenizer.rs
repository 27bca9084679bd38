//! Integration tests: tokenizer. llama.cpp's own vocab test vectors, the golden tokenize files
//! (ids with/without BOS and special parsing, pieces, detokenize), streaming decode, speed and
//! load errors; the real models' golden files (SmolLM2's gpt2/smollm BPE, Gemma 3's SentencePiece).

use crate::shared;
use memoria_model::gguf::{GgufFile, GgufWriter, MetaArray, MetaValue};
use memoria_model::tokenizer::{StreamDecoder, Tokenizer, TokenizerKind};
use serde_json::Value;

fn load(rel: &str) -> Tokenizer {
    let path = shared::path(rel);
    let f = GgufFile::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Tokenizer::from_gguf(&f).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Runs every `.inp`/`.out` vector of a vocabulary (add_special=false, parse_special=false).
fn check_vectors(rel: &str, expected_count: usize) {
    let tok = load(rel);
    let inp = std::fs::read_to_string(shared::path(&format!("{rel}.inp"))).unwrap();
    let out = std::fs::read_to_string(shared::path(&format!("{rel}.out"))).unwrap();
    let mut inputs: Vec<&str> = inp.split("\n__ggml_vocab_test__\n").collect();
    if inputs.last() == Some(&"") {
        inputs.pop();
    }
    let expected: Vec<Vec<u32>> = out
        .lines()
        .map(|l| l.split_whitespace().map(|t| t.parse().unwrap()).collect())
        .collect();
    assert_eq!(inputs.len(), expected_count, "{rel}: input count");
    assert_eq!(expected.len(), expected_count, "{rel}: output line count");
    let mut failures = Vec::new();
    for (text, want) in inputs.iter().zip(&expected) {
        let got = tok.encode(text, false, false);
        if &got != want {
            failures.push(format!("  {text:?}\n    want {want:?}\n    got  {got:?}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{rel}: {} of {} vectors differ from llama.cpp:\n{}",
        failures.len(),
        expected_count,
        failures.join("\n")
    );
}

#[test]
fn vectors_llama_spm() {
    check_vectors("vocab/ggml-vocab-llama-spm.gguf", 46);
}

#[test]
fn vectors_gpt2() {
    check_vectors("vocab/ggml-vocab-gpt-2.gguf", 46);
}

#[test]
fn vectors_phi3() {
    check_vectors("vocab-extra/ggml-vocab-phi-3.gguf", 46);
}

#[test]
fn vectors_starcoder() {
    check_vectors("vocab-extra/ggml-vocab-starcoder.gguf", 46);
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

/// A piece in the golden JSON: a string, or `{"invalid_utf8_bytes": [..]}` when not UTF-8.
fn piece_bytes(v: &Value) -> Vec<u8> {
    match v {
        Value::String(s) => s.as_bytes().to_vec(),
        Value::Object(o) => o["invalid_utf8_bytes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b.as_u64().unwrap() as u8)
            .collect(),
        other => panic!("unexpected piece {other}"),
    }
}

fn check_golden(model_rel: &str, golden_rel: &str) {
    check_golden_cases(&load(model_rel), golden_rel, 21);
}

/// Every case of a golden tokenize file: ids with/without BOS and special parsing, pieces and
/// detokenized text, all exact.
fn check_golden_cases(tok: &Tokenizer, golden_rel: &str, expected_cases: usize) {
    let golden = shared::json(golden_rel);
    let cases = golden["tokenize"].as_array().unwrap();
    assert_eq!(cases.len(), expected_cases, "{golden_rel}: case count");
    let mut failures = Vec::new();
    for case in cases {
        let prompt = case["prompt"].as_str().unwrap();
        let mut check = |what: &str, got: Vec<u32>, want: Vec<u32>| {
            if got != want {
                failures.push(format!(
                    "{prompt:?} {what}:\n    want {want:?}\n    got  {got:?}"
                ));
            }
        };
        check(
            "ids_bos",
            tok.encode(prompt, true, false),
            ids(&case["ids_bos"]),
        );
        let nobos = ids(&case["ids_nobos"]);
        check("ids_nobos", tok.encode(prompt, false, false), nobos.clone());
        check(
            "ids_bos_parse_special",
            tok.encode(prompt, true, true),
            ids(&case["ids_bos_parse_special"]),
        );
        let want_pieces: Vec<Vec<u8>> = case["pieces_nobos"]
            .as_array()
            .unwrap()
            .iter()
            .map(piece_bytes)
            .collect();
        let got_pieces: Vec<Vec<u8>> = nobos
            .iter()
            .map(|&id| tok.token_to_piece(id, true))
            .collect();
        if got_pieces != want_pieces {
            failures.push(format!(
                "{prompt:?} pieces_nobos:\n    want {want_pieces:?}\n    got  {got_pieces:?}"
            ));
        }
        let want_text = piece_bytes(&case["detokenize_nobos"]);
        let got_text = tok.decode(&nobos, false, false).into_bytes();
        if got_text != want_text {
            failures.push(format!(
                "{prompt:?} detokenize_nobos:\n    want {want_text:?}\n    got  {got_text:?}"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{golden_rel}: {} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn golden_stories260k() {
    check_golden("models/stories260K-f32.gguf", "golden/tokenize.json");
}

#[test]
fn golden_stories260k_f16_same_vocab() {
    check_golden("models/stories260K-f16.gguf", "golden/tokenize.json");
}

#[test]
fn golden_llama_spm() {
    check_golden(
        "vocab/ggml-vocab-llama-spm.gguf",
        "vocab/ggml-vocab-llama-spm.golden-tokenize.json",
    );
}

#[test]
fn golden_gpt2() {
    check_golden(
        "vocab/ggml-vocab-gpt-2.gguf",
        "vocab/ggml-vocab-gpt-2.golden-tokenize.json",
    );
}

fn load_path(path: &std::path::Path) -> Tokenizer {
    let f = GgufFile::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Tokenizer::from_gguf(&f).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn gemma3() -> Tokenizer {
    load_path(&shared::real_model("gemma-3-270m-q4_k_m.gguf"))
}

/// SmolLM2: byte-level BPE with the `smollm` pre-tokenizer.
#[test]
fn golden_real_smollm2() {
    let tok = load("models/SmolLM2-135M-Instruct.Q4_1.gguf");
    assert_eq!(tok.kind(), TokenizerKind::Bpe);
    assert_eq!(tok.n_vocab(), 49152);
    check_golden_cases(&tok, "golden/real/smollm2-tokenize.json", 26);
}

/// Gemma 3: SentencePiece without a space prefix, 165 user-defined tokens (runs of newlines,
/// spaces and tabs, `<s>`, `</s>`...) matched before SPM, byte fallback.
#[test]
fn golden_real_gemma3() {
    check_golden_cases(&gemma3(), "golden/real/gemma3-tokenize.json", 26);
}

#[test]
fn gemma3_vocabulary_facts() {
    let tok = gemma3();
    assert_eq!(tok.kind(), TokenizerKind::Spm);
    assert_eq!(tok.n_vocab(), 262144);
    assert!(!tok.add_space_prefix());
    assert!(tok.add_bos() && !tok.add_eos());
    assert_eq!(
        (tok.bos(), tok.eos(), tok.unk()),
        (Some(2), Some(1), Some(3))
    );
    // <end_of_turn> ends a chat turn; `</s>` is made a control token by llama.cpp's end list,
    // so it is matched only with parse_special, while the user-defined `<s>` always is.
    let eot = tok.find_token("<end_of_turn>").unwrap();
    assert_eq!(tok.eot(), Some(eot));
    assert!(tok.is_eog(eot) && tok.is_eog(1));
    let close = tok.find_token("</s>").unwrap();
    assert!(tok.is_control(close) && tok.is_eog(close));
    let open = tok.find_token("<s>").unwrap();
    assert!(!tok.is_control(open));
    assert_eq!(tok.encode("<s>", false, false), vec![open]);
    assert_eq!(tok.encode("</s>", false, true), vec![close]);
    assert_ne!(tok.encode("</s>", false, false), vec![close]);
    // User-defined whitespace runs come out whole; no leading `▁` is added.
    let nl2 = tok.find_token("\n\n").unwrap();
    assert_eq!(tok.encode("\n\n", false, false), vec![nl2]);
    assert_eq!(
        tok.encode("a", false, false),
        vec![tok.find_token("a").unwrap()]
    );
    // Byte fallback: a character outside the vocabulary becomes <0xXX> tokens and decodes back.
    let text = "\u{10FFFD}";
    let ids = tok.encode(text, false, false);
    assert_eq!(ids.len(), 4, "{ids:?}");
    assert!(
        ids.iter()
            .all(|&id| tok.token_text(id).is_some_and(|t| t.starts_with("<0x")))
    );
    assert_eq!(tok.decode(&ids, false, false), text);
}

#[test]
fn metadata_and_special_tokens() {
    let spm = load("models/stories260K-f32.gguf");
    assert_eq!(spm.kind(), TokenizerKind::Spm);
    assert_eq!(spm.n_vocab(), 512);
    assert_eq!((spm.bos(), spm.eos()), (Some(1), Some(2)));
    assert!(spm.add_bos() && !spm.add_eos());
    assert!(spm.is_eog(2) && !spm.is_eog(1) && !spm.is_eog(100));
    assert!(spm.is_control(1) && spm.is_control(2) && !spm.is_control(0) && !spm.is_control(300));
    assert_eq!(spm.token_text(3), Some("<0x00>"));
    assert_eq!(spm.find_token("<s>"), Some(1));
    assert_eq!(spm.token_text(512), None);
    // Control tokens print only with `special`.
    assert_eq!(spm.token_to_piece(1, true), b"<s>");
    assert!(spm.token_to_piece(1, false).is_empty());
    // As in llama.cpp, the leading space of the first piece is stripped only when that piece
    // starts the output: a removed BOS keeps it, and so does a BOS printed as text.
    assert_eq!(spm.decode(&[403, 407], false, false), "Once upon");
    assert_eq!(spm.decode(&[1, 403, 407], true, false), " Once upon");
    assert_eq!(spm.decode(&[1, 403, 407], false, true), "<s> Once upon");
    assert_eq!(spm.decode(&[1, 403, 407], false, false), " Once upon");

    let gpt2 = load("vocab/ggml-vocab-gpt-2.gguf");
    assert_eq!(gpt2.kind(), TokenizerKind::Bpe);
    assert_eq!(gpt2.n_vocab(), 50257);
    assert!(!gpt2.add_bos());
    assert!(gpt2.is_eog(50256));
    assert!(gpt2.is_control(50256));
    assert_eq!(gpt2.encode("<|endoftext|>", false, true), vec![50256]);
    assert_ne!(gpt2.encode("<|endoftext|>", false, false), vec![50256]);
    assert_eq!(gpt2.find_token("Ġworld"), Some(995));

    let phi3 = load("vocab-extra/ggml-vocab-phi-3.gguf");
    for text in ["<|end|>", "<|endoftext|>"] {
        let id = phi3.find_token(text).unwrap();
        assert!(phi3.is_eog(id), "{text} is end of generation");
    }
}

/// Feeding ids one at a time gives exactly the text `decode` gives, even when characters are
/// split across byte tokens.
#[test]
fn stream_decoder_matches_decode() {
    for (rel, strip) in [
        ("models/stories260K-f32.gguf", true),
        ("vocab/ggml-vocab-llama-spm.gguf", true),
        ("vocab/ggml-vocab-gpt-2.gguf", false),
    ] {
        let tok = load(rel);
        for text in [
            "Emoji: 😀🐶🌈",
            "中文字符",
            "café naïve 🦙 ok",
            "Hello world",
        ] {
            let ids = tok.encode(text, false, false);
            let mut dec = StreamDecoder::new(&tok)
                .special(false)
                .strip_leading_space(strip);
            let mut streamed = String::new();
            let mut held_back = false;
            for &id in &ids {
                let part = dec.push(id);
                held_back |= part.is_empty();
                streamed.push_str(&part);
            }
            streamed.push_str(&dec.finish());
            assert_eq!(streamed, tok.decode(&ids, false, false), "{rel}: {text:?}");
            assert_eq!(streamed, text, "{rel}: round trip");
            if text.starts_with("中") && tok.kind() == TokenizerKind::Spm && tok.n_vocab() == 512 {
                assert!(
                    held_back,
                    "byte tokens of a CJK character are held back until complete"
                );
            }
        }
    }
}

#[test]
fn stream_decoder_replaces_invalid_bytes_like_lossy_decode() {
    let tok = load("models/stories260K-f32.gguf");
    // <0xF0> <0x9F> then a plain token: an unfinished sequence is invalid once "a" arrives.
    let ids = [
        3 + 0xF0,
        3 + 0x9F,
        tok.encode("a", false, false)[0],
        3 + 0xE4,
    ];
    let mut dec = tok.stream_decoder(false);
    let mut s: String = ids.iter().map(|&id| dec.push(id)).collect();
    s.push_str(&dec.finish());
    assert_eq!(s, tok.decode(&ids, false, false));
    assert!(s.contains('\u{FFFD}'));
}

#[test]
fn encoding_long_text_round_trips() {
    let text: String = "The quick brown fox, 1234 jumps — über 🦙 the lazy dog!\n".repeat(200);
    assert!(text.chars().count() >= 10_000);
    for rel in [
        "vocab/ggml-vocab-llama-spm.gguf",
        "vocab/ggml-vocab-gpt-2.gguf",
    ] {
        let tok = load(rel);
        tok.encode("warm up", false, false);
        let ids = tok.encode(&text, false, true);
        assert!(ids.len() > 1000);
        assert!(
            tok.decode(&ids, false, false) == text,
            "{rel}: round trip differs"
        );
    }
}

fn vocab_gguf(entries: Vec<(&str, MetaValue)>) -> GgufFile {
    let mut w = GgufWriter::new();
    for (k, v) in entries {
        w.set(k, v);
    }
    GgufFile::from_bytes(w.to_bytes()).unwrap()
}

fn strings(v: &[&str]) -> MetaValue {
    MetaValue::Array(MetaArray::String(v.iter().map(|s| s.to_string()).collect()))
}

#[test]
fn load_errors_are_clear() {
    let model = || ("tokenizer.ggml.model", MetaValue::String("llama".into()));
    let tokens = || {
        (
            "tokenizer.ggml.tokens",
            strings(&["<unk>", "<s>", "</s>", "a"]),
        )
    };

    let err = |f: GgufFile| Tokenizer::from_gguf(&f).unwrap_err().to_string();

    let e = err(vocab_gguf(vec![tokens()]));
    assert!(e.contains("tokenizer.ggml.model"), "{e}");
    let e = err(vocab_gguf(vec![model()]));
    assert!(e.contains("tokenizer.ggml.tokens"), "{e}");
    let e = err(vocab_gguf(vec![
        model(),
        tokens(),
        (
            "tokenizer.ggml.scores",
            MetaValue::Array(MetaArray::F32(vec![0.0; 3])),
        ),
    ]));
    assert!(
        e.contains("tokenizer.ggml.scores") && e.contains('3') && e.contains('4'),
        "{e}"
    );
    let e = err(vocab_gguf(vec![
        model(),
        tokens(),
        ("tokenizer.ggml.eos_token_id", MetaValue::U32(9)),
    ]));
    assert!(e.contains("eos_token_id") && e.contains('9'), "{e}");
    let e = err(vocab_gguf(vec![
        ("tokenizer.ggml.model", MetaValue::String("rwkv".into())),
        tokens(),
    ]));
    assert!(e.contains("rwkv"), "{e}");
    let e = err(vocab_gguf(vec![
        ("tokenizer.ggml.model", MetaValue::String("gpt2".into())),
        tokens(),
    ]));
    assert!(e.contains("tokenizer.ggml.merges"), "{e}");

    // A minimal valid vocabulary loads and tokenizes.
    let f = vocab_gguf(vec![model(), tokens()]);
    let tok = Tokenizer::from_gguf(&f).unwrap();
    assert_eq!(tok.n_vocab(), 4);
}
