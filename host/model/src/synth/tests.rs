//! Tests of the synthesizer: every type reads back with the right shapes, types and metadata;
//! output is deterministic per seed; the generated vocabulary is SentencePiece-shaped.

use std::collections::HashSet;
use std::path::PathBuf;

use memoria_kernels::GgmlType;

use super::vocab::{FIRST_NORMAL, spm_tokenizer};
use super::*;
use crate::gguf::{GgufFile, MetaArray};

fn read_back(spec: &SynthSpec) -> GgufFile {
    GgufFile::from_bytes(synthesize(spec).unwrap().to_bytes()).unwrap()
}

#[test]
fn synth_tiny_model_every_type_reads_back() {
    for ty in GgmlType::ALL
        .into_iter()
        .filter(|t| !t.is_activation_only())
    {
        for arch in [Arch::Llama, Arch::Qwen2] {
            let spec = SynthSpec::tiny(arch, ty);
            let f = read_back(&spec);
            let a = arch.name();
            assert_eq!(f.get_str("general.architecture"), Some(a));
            assert_eq!(f.get_u32(&format!("{a}.embedding_length")), Some(256));
            assert_eq!(f.get_u32(&format!("{a}.block_count")), Some(2));
            assert_eq!(f.get_u32(&format!("{a}.attention.head_count_kv")), Some(2));
            assert_eq!(f.get_u32(&format!("{a}.rope.dimension_count")), Some(64));
            assert_eq!(f.get_u32(&format!("{a}.vocab_size")), Some(512));
            assert_eq!(
                f.get_u32("general.file_type"),
                Some(WeightTypes::Single(ty).file_type())
            );
            assert_eq!(
                f.get_array("tokenizer.ggml.tokens").map(MetaArray::len),
                Some(512)
            );
            let emb = f.tensor("token_embd.weight").unwrap();
            assert_eq!(emb.dims, [256, 512]);
            let want_emb = if matches!(ty, GgmlType::Q4_0 | GgmlType::Q4K) {
                GgmlType::Q6K
            } else {
                ty
            };
            assert_eq!(emb.ty, want_emb);
            assert_eq!(f.tensor("output.weight").unwrap().ty, want_emb);
            assert_eq!(f.tensor("output_norm.weight").unwrap().ty, GgmlType::F32);
            let k = f.tensor("blk.1.attn_k.weight").unwrap();
            assert_eq!((k.dims.as_slice(), k.ty), (&[256u64, 128][..], ty));
            assert_eq!(f.tensor("blk.0.ffn_down.weight").unwrap().dims, [512, 256]);
            assert_eq!(f.tensor("blk.0.attn_q.bias").is_some(), arch == Arch::Qwen2);
            let per_layer = if arch == Arch::Qwen2 { 12 } else { 9 };
            assert_eq!(f.tensors().len(), 3 + 2 * per_layer);
        }
    }
}

#[test]
fn synth_is_deterministic_and_seed_dependent() {
    let mut spec = SynthSpec::tiny(Arch::Llama, GgmlType::F32);
    spec.tied_embeddings = true;
    let a = synthesize(&spec).unwrap().to_bytes();
    assert_eq!(a, synthesize(&spec).unwrap().to_bytes());
    let f = GgufFile::from_bytes(a.clone()).unwrap();
    assert!(f.tensor("output.weight").is_none());
    let norm: Vec<f32> = f
        .tensor_data(f.tensor("output_norm.weight").unwrap())
        .as_chunks::<4>()
        .0
        .iter()
        .map(|c| f32::from_le_bytes(*c))
        .collect();
    assert!(norm.iter().all(|v| (0.95..=1.05).contains(v)));
    let q: Vec<f32> = f
        .tensor_data(f.tensor("blk.0.attn_q.weight").unwrap())
        .as_chunks::<4>()
        .0
        .iter()
        .map(|c| f32::from_le_bytes(*c))
        .collect();
    let std = (q.iter().map(|v| v * v).sum::<f32>() / q.len() as f32).sqrt();
    assert!((0.018..0.022).contains(&std), "std {std}");
    spec.seed = 2;
    assert_ne!(a, synthesize(&spec).unwrap().to_bytes());
}

#[test]
fn synth_vocab_is_spm_shaped_and_unique() {
    let meta = spm_tokenizer(5000, &[]);
    let get = |k: &str| &meta.iter().find(|(key, _)| key == k).unwrap().1;
    let tokens = get("tokenizer.ggml.tokens")
        .as_array()
        .unwrap()
        .as_strings()
        .unwrap();
    assert_eq!(tokens.len(), 5000);
    assert_eq!(
        (tokens[0].as_str(), tokens[1].as_str(), tokens[2].as_str()),
        ("<unk>", "<s>", "</s>")
    );
    assert_eq!(
        (tokens[3].as_str(), tokens[258].as_str()),
        ("<0x00>", "<0xFF>")
    );
    assert_eq!(tokens.iter().collect::<HashSet<_>>().len(), 5000);
    let types = get("tokenizer.ggml.token_type")
        .as_array()
        .unwrap()
        .as_i32()
        .unwrap();
    assert_eq!((types[0], types[1], types[3], types[259]), (2, 3, 6, 1));
    let scores = get("tokenizer.ggml.scores")
        .as_array()
        .unwrap()
        .as_f32()
        .unwrap();
    assert!(scores[FIRST_NORMAL..].windows(2).all(|w| w[0] > w[1]));
}

#[test]
fn synth_rejects_bad_specs() {
    let mut spec = SynthSpec::tiny(Arch::Llama, GgmlType::Q4K);
    spec.ffn = 300;
    assert!(matches!(synthesize(&spec), Err(SynthError::BadSpec(_))));
    let mut spec = SynthSpec::tiny(Arch::Llama, GgmlType::F32);
    spec.kv_heads = 3;
    assert!(matches!(synthesize(&spec), Err(SynthError::BadSpec(_))));
    spec = SynthSpec::tiny(Arch::Llama, GgmlType::Q8K);
    assert!(matches!(synthesize(&spec), Err(SynthError::BadSpec(_))));
    spec = SynthSpec::tiny(Arch::Llama, GgmlType::Q8_1);
    assert!(matches!(synthesize(&spec), Err(SynthError::BadSpec(_))));
    spec = SynthSpec::tiny(Arch::Llama, GgmlType::F32);
    spec.vocab = SynthVocab::Size(10);
    assert!(matches!(synthesize(&spec), Err(SynthError::BadSpec(_))));
    spec.vocab = SynthVocab::FromFile(PathBuf::from("/nonexistent/vocab.gguf"));
    assert!(matches!(synthesize(&spec), Err(SynthError::Vocab { .. })));
}

/// Logits of a 4-token prompt (one batch) through a tiny synthetic llama of `ty`.
fn tiny_logits(ty: GgmlType) -> Vec<f32> {
    use crate::llama::{BatchToken, KvDtype, Model, Scratch};
    let f = read_back(&SynthSpec::tiny(Arch::Llama, ty));
    let model = Model::from_gguf(f).unwrap_or_else(|e| panic!("{ty}: {e}"));
    let mut kv = model.new_contiguous_kv(KvDtype::F32, 1, 8);
    let mut scratch = Scratch::default();
    let batch: Vec<BatchToken> = [5u32, 300, 17, 420]
        .into_iter()
        .enumerate()
        .map(|(pos, token)| BatchToken {
            token,
            pos,
            seq: 0,
            logits: true,
        })
        .collect();
    let logits = model.forward(&batch, &mut kv, &mut scratch).unwrap();
    logits.to_vec()
}

/// A synthetic model of every weight type loads and runs, and its logits stay close to the F32
/// model's (same random values before quantization): the kernels compute the right thing.
#[test]
fn synth_model_of_every_type_loads_and_runs() {
    let want = tiny_logits(GgmlType::F32);
    let norm = |v: &[f32]| v.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    for ty in GgmlType::ALL
        .into_iter()
        .filter(|t| !t.is_activation_only())
    {
        let got = tiny_logits(ty);
        assert_eq!(got.len(), want.len(), "{ty}");
        assert!(got.iter().all(|v| v.is_finite()), "{ty}");
        let diff: Vec<f32> = got.iter().zip(&want).map(|(a, b)| a - b).collect();
        let rel = norm(&diff) / norm(&want);
        eprintln!("{ty}: relative logit error {rel:.4}");
        // Unrelated logits would be ~1.4 apart; 2- and 3-bit weights are coarse.
        let bound = match ty {
            GgmlType::Q2K => 0.7,
            GgmlType::Q3K => 0.45,
            _ => 0.3,
        };
        assert!(rel < bound, "{ty}: relative logit error {rel} >= {bound}");
    }
}

#[test]
fn tensors_read_in_place_leave_out_exactly_the_interleaved_matrices() {
    let spec = SynthSpec::tiny(Arch::Llama, GgmlType::Q8_0);
    let model = crate::llama::Model::from_gguf(read_back(&spec)).unwrap();
    let copied: Vec<&str> = model
        .weights()
        .matrices()
        .filter(|m| m.interleaved.is_some())
        .map(|m| m.info.name.as_str())
        .collect();
    let in_place: Vec<&str> = model
        .tensors_read_in_place()
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(
        in_place.len() + copied.len(),
        model.gguf().tensors().len(),
        "{copied:?}"
    );
    assert!(copied.iter().all(|c| !in_place.contains(c)));
    assert!(in_place.contains(&"output_norm.weight"));
    // Every matrix is copied where the kernels use the interleaved layout (this shape qualifies).
    let copies = memoria_kernels::matmul::Interleaved::in_use();
    assert_eq!(copied.len(), if copies { 15 } else { 0 }, "{copied:?}");
}
