//! Batch invariance of the forward pass: a sequence's logits are bit-identical whether its
//! tokens run alone, one by one, in chunks, or interleaved with 63 other sequences.

use memoria_kernels::GgmlType;
use memoria_model::gguf::GgufFile;
use memoria_model::llama::{Arch, BatchToken, KvDtype, Model, Scratch};
use memoria_model::synth::{self, SynthSpec};
use memoria_model::tokenizer::Tokenizer;

use crate::shared;

fn stories() -> (Model, Tokenizer) {
    let model = Model::load(shared::path("models/stories260K-f32.gguf")).expect("model loads");
    let tok = Tokenizer::from_gguf(model.gguf()).expect("tokenizer");
    (model, tok)
}

/// Runs `prompt` through the model in chunks of `chunk` tokens and returns every position's
/// logits.
fn chunked(model: &Model, prompt: &[u32], chunk: usize, dtype: KvDtype) -> Vec<f32> {
    let mut kv = model.new_contiguous_kv(dtype, 1, prompt.len());
    let mut s = Scratch::default();
    let mut all = Vec::new();
    for (c, part) in prompt.chunks(chunk).enumerate() {
        let batch: Vec<BatchToken> = part
            .iter()
            .enumerate()
            .map(|(i, &token)| BatchToken {
                token,
                pos: c * chunk + i,
                seq: 0,
                logits: true,
            })
            .collect();
        all.extend_from_slice(model.forward(&batch, &mut kv, &mut s).expect("forward"));
    }
    all
}

#[test]
fn logits_are_identical_for_any_chunking() {
    let (model, tok) = stories();
    let prompt = tok.encode(
        "Once upon a time, there was a little dog named Max. He liked",
        true,
        true,
    );
    for dtype in [KvDtype::F16, KvDtype::F32] {
        let whole = chunked(&model, &prompt, prompt.len(), dtype);
        for chunk in [1, 2, 3, 7] {
            assert!(
                whole == chunked(&model, &prompt, chunk, dtype),
                "chunk {chunk} {dtype:?}"
            );
        }
    }
}

#[test]
fn logits_are_identical_among_63_other_sequences() {
    let (model, tok) = stories();
    let texts: Vec<String> = (0..64)
        .map(|i| format!("Tom had {i} red balls and a big cat"))
        .collect();
    let prompts: Vec<Vec<u32>> = texts.iter().map(|t| tok.encode(t, true, true)).collect();
    let longest = prompts.iter().map(Vec::len).max().expect("prompts");
    let mut kv = model.new_contiguous_kv(KvDtype::F16, prompts.len(), longest);
    let mut s = Scratch::default();
    // Step by position: each step carries one token of every sequence still running.
    let mut together: Vec<Vec<f32>> = vec![Vec::new(); prompts.len()];
    for pos in 0..longest {
        let batch: Vec<BatchToken> = prompts
            .iter()
            .enumerate()
            .filter(|(_, p)| pos < p.len())
            .map(|(seq, p)| BatchToken {
                token: p[pos],
                pos,
                seq,
                logits: true,
            })
            .collect();
        let out = model
            .forward(&batch, &mut kv, &mut s)
            .expect("forward")
            .to_vec();
        let n_vocab = model.hparams().n_vocab;
        for (row, t) in batch.iter().enumerate() {
            together[t.seq].extend_from_slice(&out[row * n_vocab..(row + 1) * n_vocab]);
        }
    }
    for (seq, prompt) in prompts.iter().enumerate() {
        let alone = chunked(&model, prompt, prompt.len(), KvDtype::F16);
        assert!(
            alone == together[seq],
            "sequence {seq} differs when batched"
        );
    }
}

#[test]
fn bad_batches_are_errors_not_panics() {
    let (model, _) = stories();
    let mut kv = model.new_contiguous_kv(KvDtype::F16, 1, 4);
    let mut s = Scratch::default();
    let too_big = [BatchToken {
        token: 100_000,
        pos: 0,
        seq: 0,
        logits: true,
    }];
    assert!(model.forward(&too_big, &mut kv, &mut s).is_err());
    let past_end = [BatchToken {
        token: 1,
        pos: 4,
        seq: 0,
        logits: true,
    }];
    assert!(model.forward(&past_end, &mut kv, &mut s).is_err());
}

fn synthetic(arch: synth::Arch, ty: GgmlType) -> Model {
    let bytes = synth::synthesize(&SynthSpec::tiny(arch, ty))
        .expect("synthesize")
        .to_bytes();
    Model::from_gguf(GgufFile::from_bytes(bytes).expect("parse")).expect("load")
}

#[test]
fn synthetic_models_of_every_type_are_chunk_invariant() {
    let prompt: Vec<u32> = (0..21).map(|i| (i * 37 + 5) % 500).collect();
    for (arch, ty) in [
        (synth::Arch::Llama, GgmlType::Q8_0),
        (synth::Arch::Llama, GgmlType::Q4_0),
        (synth::Arch::Llama, GgmlType::Q4K),
        (synth::Arch::Llama, GgmlType::Q6K),
        (synth::Arch::Llama, GgmlType::BF16),
        (synth::Arch::Qwen2, GgmlType::F16),
        (synth::Arch::Qwen2, GgmlType::F32),
    ] {
        let model = synthetic(arch, ty);
        let expected_arch = if arch == synth::Arch::Qwen2 {
            Arch::Qwen2
        } else {
            Arch::Llama
        };
        assert_eq!(model.hparams().arch, expected_arch);
        let whole = chunked(&model, &prompt, prompt.len(), KvDtype::F16);
        assert!(
            whole.iter().all(|v| v.is_finite()),
            "{arch:?} {ty}: non-finite logits"
        );
        for chunk in [1, 5, 16] {
            assert!(
                whole == chunked(&model, &prompt, chunk, KvDtype::F16),
                "{arch:?} {ty} chunk {chunk}"
            );
        }
    }
}
