//! Checks that llama.cpp's hand-written splitters and the collapsed-text regexes split exactly
//! like the original expressions run by a real Unicode regex engine.

use super::*;

const SAMPLES: &[&str] = &[
    "Hello, y'all! How are you 😁 ?我想在apple工作1314151天～",
    "I've been 'told he's there, 'RE you sure? 'M not sure I'll make it, 'D you like some tea? We'Ve a'lL",
    "\n \n\n \n\n\n \t \t\t \t\n  \n   \n    \n     \n🚀 (normal) 😶\u{200d}🌫️ ✅ 🦙🦙 3 33 333 3333",
    "   Hello\n    Hello  ",
    "нещо на Български ------======= ''''''```````\"\"\"\"......!!!!!!??????",
    "កាន់តែពិសេសអាច Cửa Việt\u{a0}\u{a0}x\u{3000}y 3.3 3..3 3...3 w048 7tuijk",
    "Tabs\tand\ttabs\r\nCRLF\r\r\n",
    "",
];

fn words_with(splitter: Splitter, text: &str) -> Vec<String> {
    PreTokenizer {
        steps: vec![splitter],
    }
    .split(text)
}

fn assert_same(custom: Splitter, reference: &str) {
    for text in SAMPLES {
        let want = words_with(Splitter::Plain(compile(reference).unwrap()), text);
        let got = words_with(custom_clone(&custom), text);
        assert_eq!(got, want, "{text:?}");
    }
}

fn custom_clone(s: &Splitter) -> Splitter {
    match s {
        Splitter::Gpt2 => Splitter::Gpt2,
        Splitter::Llama3 => Splitter::Llama3,
        Splitter::Collapsed(re) => Splitter::Collapsed(re.clone()),
        Splitter::Plain(re) => Splitter::Plain(re.clone()),
    }
}

#[test]
fn gpt2_splitter_matches_regex() {
    assert_same(Splitter::Gpt2, GPT2);
}

#[test]
fn llama3_splitter_matches_regex() {
    assert_same(Splitter::Llama3, LLAMA3_ORIGINAL);
}

#[test]
fn collapsed_qwen2_matches_regex() {
    assert_same(
        Splitter::Collapsed(compile(&collapse_regex(QWEN2).unwrap()).unwrap()),
        QWEN2,
    );
}

#[test]
fn every_named_pre_tokenizer_compiles() {
    for name in [
        "default",
        "llama3",
        "llama-bpe",
        "dbrx",
        "deepseek-coder",
        "falcon",
        "starcoder",
        "command-r",
        "gpt-2",
        "qwen2",
        "stablelm2",
        "poro-chat",
        "bloom",
        "chatglm-bpe",
        "viking",
        "tekken",
        "chameleon",
    ] {
        let cfg = pre_config(Some(name)).unwrap();
        let pre = PreTokenizer::new(&cfg.regexes).unwrap_or_else(|e| panic!("{name}: {e}"));
        let words = pre.split("Hello world 123 ½ naïve!");
        assert!(!words.is_empty(), "{name}");
    }
    // deepseek-llm's hand-written letter ranges are not carried over: a clear error instead.
    for name in ["no-such-pre", "deepseek-llm"] {
        assert!(pre_config(Some(name)).is_err(), "{name}");
    }
}

#[test]
fn words_are_byte_encoded() {
    let pre = PreTokenizer::new(&[GPT2]).unwrap();
    assert_eq!(
        pre.split("Hello world\n"),
        vec!["Hello", "\u{120}world", "\u{10a}"]
    );
}
